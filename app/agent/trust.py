"""Whether the user trusts what a project would start: its MCP servers.

A project's `.mcp.json` and `opencode.json` are the project's words: a downloaded
repository can name any command there, or a URL that gets the user's secrets through
`${VAR}`. So, as Claude Code does, the first chat in a project says what it would start or
reach (each server, its command or URL, and which of the user's variables it would get)
and asks. The answer is kept in dspine's data folder, never in the project, for this
project and for these files' exact contents: a change to either file asks again. Until
the user says yes, no project server starts and no variable is expanded for one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from backends.private import write_private_json

from ..terminal_text import one_line
from .hooks import Hook
from .mcp.config import PROJECT_FILES, ServerSpec, variables
from .shell_words import shell_words

MAX_TREE_FILES = 2000  # files of one folder a server names that are read for the fingerprint
MAX_TREE_BYTES = 256 << 20  # and their bytes; past either, names, sizes and times stand in


def named_paths(root: Path, spec: ServerSpec) -> list[str]:
    """The project's files and folders a stdio server's command, arguments or environment
    name (`python tools/srv.py`, `--config=conf/x.json`, `PYTHONPATH=.cache-x`), relative to
    the project and in order: what it runs is part of what the user trusts."""
    if spec.transport != "stdio":
        return []
    root = root.resolve()
    words = [spec.command, *spec.args, *spec.env.values()]
    # A shell's `-c` string, an option list (`NODE_OPTIONS=--require ./pre.js`): its words too.
    words += [piece for w in words if any(c.isspace() or c in "&|;<>()" for c in w) for piece in shell_words(w)]
    pieces = [p for w in words for part in w.split("=") for p in part.split(os.pathsep) if p.strip()]
    # `python -m pkg.mod` runs the project's pkg/ (or pkg.py) when there is one: servers start
    # in the project, which is first on their import path.
    args = list(spec.args)
    pieces += [args[i + 1].split(".")[0] for i, arg in enumerate(args[:-1]) if arg == "-m"]
    pieces += [f"{p}.py" for p in pieces if p.isidentifier()]
    found: list[str] = []
    for piece in pieces:
        if "${" in piece or "{env:" in piece or "\0" in piece:
            continue
        candidate = Path(piece) if Path(piece).is_absolute() else root / piece
        try:
            real = candidate.resolve(strict=True)
        except (OSError, RuntimeError, ValueError):
            # Not there yet: still named, where it reads as a path in the project (a hook's
            # "$CLAUDE_PROJECT_DIR"/scripts/fmt.sh, `python tools/check.py`), since a command
            # that makes it would have it run outside the sandbox.
            if not _reads_as_path(piece) or not (real := candidate.resolve()).is_relative_to(root):
                continue
        if not real.is_relative_to(root):
            continue
        # The project itself (PYTHONPATH=., `node .`): its top folder's files (a sitecustomize.py
        # the model writes there would run at the next start).
        name = real.relative_to(root).as_posix() if real != root else "."
        if name not in found:
            found.append(name)
    return found


def _reads_as_path(piece: str) -> bool:
    """A word that names a file whether or not it is there: a path with a folder in it, not an
    option, a URL or a variable."""
    return "/" in piece and not piece.startswith(("-", "$", "~")) and "://" not in piece and "@" not in piece


def _digest_tree(path: Path, digest, top_only: bool = False) -> None:
    """A file's bytes, or a folder's files' names and bytes (bounded: past the bounds, names,
    sizes and modification times)."""
    if path.is_file():
        files = [path]
    elif top_only:
        files = sorted(p for p in path.iterdir() if p.is_file() and not p.is_symlink())
    else:
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    budget = MAX_TREE_BYTES
    for count, file in enumerate(files):
        if file != path:
            digest.update(file.relative_to(path).as_posix().encode() + b"\0")
        try:
            info = file.stat()
            if count >= MAX_TREE_FILES or info.st_size > budget:
                digest.update(f"{info.st_size}:{info.st_mtime_ns}".encode())
                continue
            budget -= info.st_size
            with file.open("rb") as handle:
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
        except OSError as exc:
            digest.update(f"unreadable {exc.errno}".encode())


_PROJECT_DIR = re.compile(
    r"\$\{CLAUDE_PROJECT_DIR\}|\$CLAUDE_PROJECT_DIR\b|\$\{DSPINE_PROJECT_DIR\}|\$DSPINE_PROJECT_DIR\b"
)


def hook_as_program(hook: Hook, root: Path | None = None) -> ServerSpec:
    """A hook's command as a stdio program, so the project files it runs are found as a
    server's are (`named_paths`): the project's folder variable stands for the project."""
    command = _PROJECT_DIR.sub(lambda _: str(root), hook.command) if root is not None else hook.command
    words = shell_words(command)
    return ServerSpec(f"{hook.event} hook", hook.source, "stdio", words[0] if words else "", tuple(words[1:]))


def hook_reach(root: Path, hook: Hook) -> list[str]:
    """What a hook really runs: the project files its command names and, for a named file, the
    folder it lies in (a script imports or sources what lies beside it: `json.py` beside a Python
    hook, the `lib.sh` a shell hook sources), unless that folder is the project itself."""
    root = root.resolve()
    reach: list[str] = []
    for name in named_paths(root, hook_as_program(hook, root)):
        reach.append(name)
        path = root / name
        if name != "." and path.is_file() and path.parent != root:
            folder = path.parent.relative_to(root).as_posix()
            if folder not in reach:
                reach.append(folder)
    return reach


def hook_files_digest(root: Path, hook: Hook) -> str:
    """The project files a hook runs (`hook_reach`), as they are now: checked before each run, so
    a script or a file beside it changed since the user said yes (by the model, by a pull) does
    not run."""
    digest = hashlib.sha256()
    for name in hook_reach(root, hook):
        digest.update(name.encode() + b"\0")
        _digest_tree(root.resolve() / name, digest, top_only=name == ".")
    return digest.hexdigest()


def named_by(root: Path, servers: Sequence[ServerSpec] = (), hooks: Sequence[Hook] = ()) -> list[Path]:
    """The project's files and folders its servers and hooks run or read (absolute): the model's
    tools ask before writing there, and the sandbox keeps them read-only (app/agent/guarded.py)."""
    names = [n for spec in servers for n in named_paths(root, spec)]
    names += [n for hook in hooks for n in hook_reach(root, hook)]
    found: list[Path] = []
    for name in names:
        path = root.resolve() / name
        if name != "." and path not in found:
            found.append(path)
    return found


def fingerprint(
    seen: Mapping[str, bytes],
    root: Path | None = None,
    servers: Sequence[ServerSpec] = (),
    hooks: Sequence[Hook] = (),
    skills: Mapping[str, bytes] | None = None,
) -> str:
    """The project's MCP files as they were read (`config.discover`'s `seen`): names and bytes,
    and the project files the servers name (`named_paths`): a script the model rewrites, or a
    folder put on a server's PYTHONPATH, asks again. The project's hooks likewise: each one's
    event, matcher and command, and the project files its command names."""
    digest = hashlib.sha256()
    for name, _, _ in PROJECT_FILES:
        data = seen.get(name)
        digest.update(name.encode() + b"\0")
        digest.update(b"-" if data is None else hashlib.sha256(data).digest())
    programs = list(servers)
    for name, data in sorted((skills or {}).items()):  # none: the digest as before skills were read
        digest.update(b"\3" + name.encode() + b"\0" + hashlib.sha256(data).digest())
    for hook in hooks:  # none: the same digest as before hooks were read, so answers stay valid
        digest.update(b"\2" + json.dumps([hook.event, hook.matcher, hook.command, hook.timeout_s]).encode())
        if root is not None:
            digest.update(b"\4" + hook_files_digest(root, hook).encode())
    if root is not None:
        for spec in programs:
            for name in named_paths(root, spec):
                digest.update(b"\1" + name.encode() + b"\0")
                _digest_tree(root.resolve() / name, digest, top_only=name == ".")
    return digest.hexdigest()


@dataclass(frozen=True)
class TrustQuestion:
    title: str
    body: str


def _server_lines(root: Path, spec: ServerSpec) -> list[str]:
    """An MCP server as the trust question shows it: what it connects to or runs, with what."""
    lines = [f"- {one_line(spec.name)} ({one_line(Path(spec.source).name)})"]
    if spec.transport == "http":
        lines.append(f"  connects to {one_line(spec.url)}")
        lines += [f"  header {one_line(key)}: {one_line(value)}" for key, value in spec.headers.items()]
    else:
        lines.append(f"  runs {one_line(shlex.join([spec.command, *spec.args]))}")
        lines += [f"  with {one_line(key)}={one_line(value)}" for key, value in spec.env.items()]
        for name in named_paths(root, spec):
            what = "top folder's files" if name == "." else one_line(name)
            lines.append(f"  runs or reads the project's {what} (a change to it asks again)")
    given = variables(spec)
    lines.append("  gets your variables: " + ", ".join(given) if given else "  gets none of your variables by name")
    if not spec.enabled:
        lines.append("  (switched off in the file: starts only with /mcp on)")
    return lines


def _hook_lines(root: Path, hook: Hook) -> list[str]:
    """A hook as the trust question shows it: its command, what of the project it reaches."""
    on = f" on {one_line(hook.matcher)}" if hook.matcher not in ("", "*") else ""
    lines = [f"- {hook.event} hook{on} ({one_line(hook.source)})", f"  runs {one_line(hook.command)}"]
    named = hook_reach(root, hook)
    for name in named:
        what = "top folder's files" if name == "." else one_line(name)
        lines.append(f"  runs or reads the project's {what} (a change to it asks again)")
    lines.append("  runs OUTSIDE the sandbox, as you, with the network")
    if not named:
        lines.append("  names no file of the project: what that command runs is not checked for changes")
    if hook.event == "PreToolUse":
        lines.append("  may block a tool call, or let one run without asking you")
    return lines


def question(
    root: Path,
    servers: Sequence[ServerSpec],
    not_used: Sequence[str] = (),
    hooks: Sequence[Hook] = (),
    skills: Sequence[tuple[str, str, str]] = (),
) -> TrustQuestion:
    """What the project would start or reach, as the user is asked it: nothing expanded,
    nothing left out (every argument, every environment entry), each field one line with its
    line breaks and control characters made visible, so no name can draw lines of its own."""
    lines = [line for spec in servers for line in _server_lines(root, spec)]
    lines += [line for hook in hooks for line in _hook_lines(root, hook)]
    for name, where, description in skills:
        lines.append(f"- skill {one_line(name)} ({one_line(where)})")
        lines.append(f"  {one_line(description)}")
    for problem in not_used:
        lines.append(f"- {one_line(problem)}")
    counted = [f"{len(servers)} server{'s' if len(servers) != 1 else ''}"] if servers else []
    counted += [f"{len(hooks)} hook{'s' if len(hooks) != 1 else ''}"] if hooks else []
    counted += [f"{len(skills)} skill{'s' if len(skills) != 1 else ''}"] if skills else []
    lines += [
        "",
        f"{' and '.join(counted) or 'nothing'} in all.",
        "y: trust these files as they are now (asked again if they change).",
        "n: run none of them; /mcp trust asks again.",
    ]
    what = " and ".join(
        (["start or reach these MCP servers"] if servers else [])
        + (["run these hooks"] if hooks else [])
        + (["give the model these skills"] if skills else [])
    )
    return TrustQuestion(f"{one_line(str(root))} would {what or 'start nothing'}. Trust them?", "\n".join(lines))


class TrustStore:
    """The user's answers, per project and per content of its files: one small JSON file (0600)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _all(self) -> dict[str, dict[str, object]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return {}  # none yet, or damaged: every project asks again
        return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}

    def once_trusted(self, root: Path) -> bool:
        """Whether the user's last answer for this project was yes (for its files as they were
        then, whatever they hold now)."""
        entry = self._all().get(str(root.resolve()))
        return entry is not None and entry.get("trusted") is True

    def decision(self, root: Path, files: str) -> bool | None:
        """True (trusted) or False (declined) for the project's files with this `fingerprint`;
        None: not asked about them yet."""
        entry = self._all().get(str(root.resolve()))
        if entry is None or entry.get("fingerprint") != files:
            return None
        trusted = entry.get("trusted")
        return trusted if isinstance(trusted, bool) else None

    def remember(self, root: Path, files: str, trusted: bool) -> None:
        data = self._all()
        data[str(root.resolve())] = {"fingerprint": files, "trusted": trusted}
        write_private_json(self.path, data)
