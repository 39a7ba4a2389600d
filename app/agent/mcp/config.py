"""Which MCP servers a chat has: read from the files other assistants already use, in
this order, the first to name a server winning:

1. dspine's own settings: `[mcp_servers.NAME]` tables shaped like `.mcp.json`'s entries
   (the user's own: a project's server of the same name never replaces one of them);
2. the project's `.mcp.json` (Claude Code): {"mcpServers": {NAME: {"command", "args",
   "env"} or {"type": "http", "url", "headers"}}}
3. the `mcp` block of the project's `opencode.json` (opencode): {NAME: {"type": "local",
   "command": [...], "environment", "enabled"} or {"type": "remote", "url", "headers"}}

The project's servers are the project's words, not the user's: none starts, and no
variable is expanded for one, until the user trusts the project (`app/agent/trust.py`).
`${VAR}` and `${VAR:-default}` (and opencode's `{env:VAR}`) are expanded from the
environment when a server starts; the values go to that server only. A broken file or
entry is a Problem (a notice), never a crash: the other servers still start.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

CLAUDE_FILE = ".mcp.json"
OPENCODE_FILE = "opencode.json"
SETTINGS_SOURCE = "dspine settings"

Transport = Literal["stdio", "http"]
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


class ConfigProblem(ValueError):
    """An entry dspine cannot use; the message names what and how to fix it."""


@dataclass(frozen=True)
class ServerSpec:
    """One configured MCP server, as written (variables not yet expanded)."""

    name: str
    source: str  # the file it came from (or "dspine settings"), for the chat to say
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    enabled: bool = True  # opencode's "enabled": false
    timeout_s: float | None = None  # opencode's "timeout" (ms): the start deadline
    project: bool = False  # from a file the project carries (starts only once it is trusted)

    def describe(self) -> str:
        """What runs, for people: the command line or the URL, never the environment's values."""
        if self.transport == "http":
            return self.url
        return " ".join([self.command, *self.args])


@dataclass(frozen=True)
class Problem:
    source: str
    message: str

    def __str__(self) -> str:
        return f"MCP config {self.source}: {self.message}"


def variables(spec: ServerSpec) -> list[str]:
    """The names of the user's environment variables the server would be given (in its
    command, arguments, environment, URL or headers), in order, each once."""
    texts = [spec.command, *spec.args, *spec.env.values(), spec.url, *spec.headers.values()]
    names = [m.group(1) or m.group(3) for text in texts for m in _VAR.finditer(text)]
    return list(dict.fromkeys(names))


def expand(text: str, environ: Mapping[str, str]) -> str:
    """`${VAR}`, `${VAR:-default}` and `{env:VAR}` from `environ`; a variable that is not set
    and has no default is a ConfigProblem naming it (never its value)."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        default = match.group(2)
        value = environ.get(name)
        if value is None or (value == "" and default is not None):
            if default is not None:
                return default
            raise ConfigProblem(f"${{{name}}} is not set: export it, or write ${{{name}:-default}}")
        return value

    return _VAR.sub(one, text)


def expanded(spec: ServerSpec, environ: Mapping[str, str]) -> ServerSpec:
    """The spec with every variable filled in, ready to start."""
    return ServerSpec(
        spec.name,
        spec.source,
        spec.transport,
        expand(spec.command, environ),
        tuple(expand(a, environ) for a in spec.args),
        {k: expand(v, environ) for k, v in spec.env.items()},
        expand(spec.url, environ),
        {k: expand(v, environ) for k, v in spec.headers.items()},
        spec.enabled,
        spec.timeout_s,
        spec.project,
    )


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigProblem(f"{what} must be a list of strings")
    return tuple(value)


def _table(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigProblem(f"{what} must be an object of names to strings")
    out = {}
    for key, item in value.items():
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise ConfigProblem(f"{what}.{key} must be a string")
        out[str(key)] = str(item)
    return out


def _claude_entry(name: str, entry: Any, source: str) -> ServerSpec:
    """An `.mcp.json` entry (also the shape of dspine's own `[mcp_servers.NAME]`)."""
    if not isinstance(entry, dict):
        raise ConfigProblem("must be an object with a command (stdio) or a url (http)")
    kind = entry.get("type") or ("http" if "url" in entry and "command" not in entry else "stdio")
    enabled = entry.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigProblem("enabled must be true or false")
    if kind in ("http", "streamable-http", "streamable_http"):
        url = entry.get("url")
        if not isinstance(url, str) or not url:
            raise ConfigProblem('an http server needs a "url"')
        return ServerSpec(
            name, source, "http", url=url, headers=_table(entry.get("headers"), "headers"), enabled=enabled
        )
    if kind == "sse":
        raise ConfigProblem('SSE servers are not supported: use "type": "http" if the server speaks streamable HTTP')
    if kind != "stdio":
        raise ConfigProblem(f'unknown "type" {kind!r}: use "stdio" (a command) or "http" (a url)')
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ConfigProblem('a stdio server needs a "command" (a string; arguments go in "args")')
    return ServerSpec(
        name,
        source,
        "stdio",
        command=command,
        args=_strings(entry.get("args"), "args"),
        env=_table(entry.get("env"), "env"),
        enabled=enabled,
    )


def _opencode_entry(name: str, entry: Any, source: str) -> ServerSpec:
    if not isinstance(entry, dict):
        raise ConfigProblem('must be an object with "type": "local" or "remote"')
    enabled = entry.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigProblem("enabled must be true or false")
    timeout = entry.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ConfigProblem("timeout must be a number of milliseconds")
    timeout_s = timeout / 1000 if timeout else None
    kind = entry.get("type")
    if kind == "remote":
        url = entry.get("url")
        if not isinstance(url, str) or not url:
            raise ConfigProblem('a remote server needs a "url"')
        return ServerSpec(name, source, "http", url=url, headers=_table(entry.get("headers"), "headers"),
                          enabled=enabled, timeout_s=timeout_s)  # fmt: skip
    if kind != "local":
        raise ConfigProblem(f'"type" must be "local" or "remote", not {kind!r}')
    command = _strings(entry.get("command"), "command")
    if not command:
        raise ConfigProblem('a local server needs "command": ["program", "arg", ...]')
    return ServerSpec(
        name,
        source,
        "stdio",
        command=command[0],
        args=command[1:],
        env=_table(entry.get("environment"), "environment"),
        enabled=enabled,
        timeout_s=timeout_s,
    )


MAX_CONFIG_BYTES = 1 << 20  # a config file is a few KB; more is not one (and is not read whole)


def _read_json(path: Path, seen: dict[str, bytes] | None = None) -> Any:
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
        if seen is not None:
            seen[path.name] = raw
        if len(raw) > MAX_CONFIG_BYTES:
            raise ConfigProblem(f"is over {MAX_CONFIG_BYTES >> 20} MiB: not a config file")
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigProblem("is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ConfigProblem(f"is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise ConfigProblem("is nested too deeply to be a config file") from None
    except OSError as exc:
        raise ConfigProblem(f"cannot be read ({exc.strerror})") from None


def _block(data: Any, key: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ConfigProblem("must be a JSON object")
    block = data.get(key) or {}
    if not isinstance(block, dict):
        raise ConfigProblem(f'"{key}" must be an object of server names')
    return block


PROJECT_FILES = ((CLAUDE_FILE, "mcpServers", _claude_entry), (OPENCODE_FILE, "mcp", _opencode_entry))


def discover(
    root: Path, settings_servers: Mapping[str, Any] | None = None, seen: dict[str, bytes] | None = None
) -> tuple[list[ServerSpec], list[Problem]]:
    """Every server in the order above, and what was wrong on the way. `seen` gets the bytes
    of each project file read (what the user is asked to trust is exactly what was parsed)."""
    specs: dict[str, ServerSpec] = {}
    problems: list[Problem] = []

    def add(source: str, block: Mapping[str, Any], parse, project: bool) -> None:
        for name, entry in block.items():
            try:
                spec = parse(str(name), entry, source)
            except ConfigProblem as exc:
                problems.append(Problem(source, f"server {name!r} left out: {exc}"))
                continue
            if spec.name in specs:
                used = specs[spec.name].source
                why = "your own server of that name is used" if used == SETTINGS_SOURCE else f"{used}'s is used"
                problems.append(Problem(source, f"server {name!r} ({spec.describe()}) is not used: {why}"))
                continue
            specs[spec.name] = replace(spec, project=project)

    add(SETTINGS_SOURCE, settings_servers or {}, _claude_entry, False)
    for file_name, key, parse in PROJECT_FILES:
        path = root / file_name
        if not path.is_file():
            continue
        try:
            block = _block(_read_json(path, seen), key)
        except ConfigProblem as exc:
            problems.append(Problem(str(path), f"{exc}; its servers are left out"))
            continue
        add(str(path), block, parse, True)
    return list(specs.values()), problems
