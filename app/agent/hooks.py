"""Hooks: programs the user (or a trusted project) names to run at points of a chat, in the
format Claude Code reads, so the hooks people already keep work here unchanged.

    {"hooks": {"PreToolUse": [{"matcher": "Edit|Write",
                               "hooks": [{"type": "command", "command": "./check.sh", "timeout": 30}]}]}}

Read from `~/.claude/settings.json` and dspine's own settings (`hooks`, the user's), and a
project's `.claude/settings.json` and `.claude/settings.local.json`. A project's hooks are
programs the project carries: they run only once the user trusts the project, and the
trust question lists each one (app/agent/trust.py); a changed hook asks again.

Each hook gets the event as JSON on standard input and runs in the project with a timeout
(its process group is killed past it). What its answer means, as in Claude Code:
- exit 0: done; for SessionStart and UserPromptSubmit its output is context for the model;
- exit 2: a block: PreToolUse refuses the call, PostToolUse and Stop hand its words to the
  model (Stop: the model goes on), UserPromptSubmit keeps the prompt from the model;
- any other exit: an error the user is shown; the chat goes on;
- a JSON answer on standard output may say the same: `{"decision": "block", "reason": ...}`,
  or for PreToolUse `{"hookSpecificOutput": {"permissionDecision": "allow"|"deny"|"ask"}}`.

Matchers are regular expressions over the tool's name; Claude Code's names (Bash, Edit,
Write, Read, Grep, Glob, LS, TodoWrite) match dspine's tools that do the same."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .child_env import child_environ

EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
TOOL_EVENTS = ("PreToolUse", "PostToolUse")
DEFAULT_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 600.0
SAID_CHARS = 200  # of what a hook printed, shown in the chat as one line
MAX_OUTPUT = 10_000  # characters of a hook's output kept (shown, or given to the model)
BLOCK_EXIT = 2
# Claude Code's tool names, and dspine's tool that does the same.
CLAUDE_NAMES = {
    "Bash": "run_command",
    "Edit": "edit_file",
    "MultiEdit": "edit_file",
    "Write": "write_file",
    "Read": "read_file",
    "Grep": "search",
    "Glob": "list_files",
    "LS": "list_files",
    "TodoWrite": "todo_write",
}
PROJECT_FILES = (".claude/settings.json", ".claude/settings.local.json")


@dataclass(frozen=True)
class Hook:
    event: str
    matcher: str  # a regular expression over tool names; "" or "*" matches every tool
    command: str
    timeout_s: float
    source: str  # the file it was read from, as the user knows it
    project: bool  # the project's own (runs only once the project is trusted)
    # `onFailure`: "block" or "allow"; "" is the default, which blocks for PreToolUse (a guard that
    # crashed, timed out or could not start must not let the call through: a stated difference
    # from Claude Code, whose default lets it) and allows for every other event.
    on_failure: str = ""

    @property
    def fails_closed(self) -> bool:
        return self.on_failure == "block" or (self.on_failure == "" and self.event == "PreToolUse")

    def matches(self, tool: str | None) -> bool:
        if self.event not in TOOL_EVENTS or self.matcher in ("", "*"):
            return True
        if tool is None:
            return False
        names = [tool] + [claude for claude, ours in CLAUDE_NAMES.items() if ours == tool]
        try:
            pattern = re.compile(self.matcher)
        except re.error:
            return False
        return any(pattern.fullmatch(name) for name in names)


@dataclass
class HookConfig:
    hooks: list[Hook] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # entries that were skipped, and why
    seen: dict[str, bytes] = field(default_factory=dict)  # the project's files as read (for trust)

    @property
    def project_hooks(self) -> list[Hook]:
        return [h for h in self.hooks if h.project]


def parse(data: Any, source: str, project: bool) -> tuple[list[Hook], list[str]]:
    """The hooks of one settings object (its `hooks` block), and what was skipped."""
    if not isinstance(data, Mapping) or "hooks" not in data:
        return [], []
    block = data["hooks"]
    if not isinstance(block, Mapping):
        return [], [f"{source}: `hooks` is not an object; its hooks are not used"]
    hooks: list[Hook] = []
    problems: list[str] = []
    for event, groups in block.items():
        if event not in EVENTS:
            problems.append(f"{source}: dspine has no {str(event)[:40]!r} event; those hooks are not used")
            continue
        for group in groups if isinstance(groups, list) else [None]:
            if not isinstance(group, Mapping) or not isinstance(group.get("hooks"), list):
                problems.append(f"{source}: a {event} entry has no list of hooks; it is not used")
                continue
            matcher = group.get("matcher", "")
            if not isinstance(matcher, str):
                problems.append(f"{source}: a {event} matcher is not text; its hooks are not used")
                continue
            for entry in group["hooks"]:
                command = entry.get("command") if isinstance(entry, Mapping) else None
                if not isinstance(entry, Mapping) or entry.get("type", "command") != "command" or not command:
                    problems.append(f"{source}: a {event} hook is not a command; it is not used")
                    continue
                if not isinstance(command, str) or "\0" in command:
                    problems.append(f"{source}: a {event} hook's command is not text; it is not used")
                    continue
                timeout = entry.get("timeout", DEFAULT_TIMEOUT_S)
                if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
                    timeout = DEFAULT_TIMEOUT_S
                on_failure = entry.get("onFailure", "")
                if on_failure not in ("", "block", "allow"):
                    problems.append(f'{source}: a {event} hook\'s onFailure is not "block" or "allow"; it blocks')
                    on_failure = "block"
                timeout_s = min(float(timeout), MAX_TIMEOUT_S)
                hooks.append(Hook(event, matcher, command, timeout_s, source, project, on_failure))
    return hooks, problems


def _read_json(path: Path) -> tuple[Any, bytes | None, str | None]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, None, None
    except OSError as exc:
        return None, None, f"{path}: cannot be read ({exc.strerror}); its hooks are not used"
    try:
        return json.loads(raw.decode("utf-8")), raw, None
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None, raw, f"{path}: not valid JSON; its hooks are not used"


def load(root: Path | None, user_files: Iterable[Path], settings_hooks: Any = None) -> HookConfig:
    """Every hook: the user's files, dspine's own `hooks` setting, then the project's files."""
    user_files = list(user_files)
    config = HookConfig()
    for path in user_files:
        data, _, problem = _read_json(path)
        if problem:
            config.problems.append(problem)
        hooks, problems = parse(data, str(path), project=False)
        config.hooks += hooks
        config.problems += problems
    if settings_hooks:
        hooks, problems = parse({"hooks": settings_hooks}, "dspine's settings", project=False)
        config.hooks += hooks
        config.problems += problems
    users = {os.path.realpath(p) for p in user_files}
    if root is not None:
        for name in PROJECT_FILES:
            path = root / name
            if os.path.realpath(path) in users:
                continue  # dspine started in the home folder: the user's file, read once as theirs
            if path.is_symlink() or (path.exists() and not path.is_file()):
                config.problems.append(f"{name}: not a plain file; its hooks are not used")
                continue
            data, raw, problem = _read_json(path)
            if raw is not None:
                config.seen[name] = raw
            if problem:
                config.problems.append(problem)
            hooks, problems = parse(data, name, project=True)
            config.hooks += hooks
            config.problems += problems
    return config


@dataclass(frozen=True)
class HookRun:
    hook: Hook
    exit_code: int | None  # None: it did not finish (timed out, or could not start)
    stdout: str
    stderr: str
    answer: Mapping[str, Any] | None  # its JSON answer, where its output was one

    @property
    def blocks(self) -> bool:
        if self.exit_code == BLOCK_EXIT:
            return True
        if self.failed is not None and self.hook.fails_closed:
            return True  # a guard that did not answer keeps the call back
        if self.answer is None:
            return False
        specific = self.answer.get("hookSpecificOutput")
        decision = specific.get("permissionDecision") if isinstance(specific, Mapping) else None
        return self.answer.get("decision") == "block" or decision == "deny"

    @property
    def allows(self) -> bool:
        """A PreToolUse answer that lets the call go without the user's question."""
        if self.answer is None or self.blocks:
            return False
        specific = self.answer.get("hookSpecificOutput")
        decision = specific.get("permissionDecision") if isinstance(specific, Mapping) else None
        return decision == "allow" or self.answer.get("decision") == "approve"

    @property
    def reason(self) -> str:
        """Why it blocked (or what it says): its JSON reason, else its error output, else its output."""
        if self.failed is not None and self.hook.fails_closed:
            return f'{self.failed} (a failed {self.hook.event} hook blocks; "onFailure": "allow" lets calls go)'
        if self.answer is not None:
            specific = self.answer.get("hookSpecificOutput")
            for value in (
                self.answer.get("reason"),
                specific.get("permissionDecisionReason") if isinstance(specific, Mapping) else None,
            ):
                if isinstance(value, str) and value.strip():
                    return value.strip()[:MAX_OUTPUT]
        return (self.stderr.strip() or self.stdout.strip())[:MAX_OUTPUT]

    @property
    def context(self) -> str:
        """What a SessionStart or UserPromptSubmit hook adds for the model."""
        if self.exit_code != 0:
            return ""
        if self.answer is not None:
            specific = self.answer.get("hookSpecificOutput")
            extra = specific.get("additionalContext") if isinstance(specific, Mapping) else None
            return extra.strip()[:MAX_OUTPUT] if isinstance(extra, str) else ""
        return self.stdout.strip()[:MAX_OUTPUT]

    @property
    def said(self) -> str:
        """What it says to the user, in one line ("" for nothing): its JSON's `systemMessage`
        (Claude Code's field for the user), else the first line it printed, when it neither
        failed nor answered in JSON. Outside text: shown as text, never markup."""
        if self.failed is not None:
            return ""
        if self.answer is not None:
            message = self.answer.get("systemMessage")
            text = message if isinstance(message, str) else ""
        else:
            text = self.stdout.strip() or self.stderr.strip()
        first = text.strip().splitlines()[0] if text.strip() else ""
        return first[:SAID_CHARS] + ("…" if len(first) > SAID_CHARS or "\n" in text.strip() else "")

    @property
    def failed(self) -> str | None:
        """An error to show the user (the chat goes on), or None."""
        if self.exit_code is None:
            return f"the {self.hook.event} hook `{self.hook.command}` did not finish: {self.stderr}"
        if self.exit_code not in (0, BLOCK_EXIT):
            detail = self.stderr.strip()[:500] or "no output"
            return f"the {self.hook.event} hook `{self.hook.command}` failed (exit {self.exit_code}): {detail}"
        return None


def _drain(stream: Any, kept: bytearray, limit: int) -> None:
    """Read a pipe to its end, keeping its first `limit` bytes: a hook that prints without end
    (`yes`) costs no memory, and never blocks on a full pipe."""
    with contextlib.suppress(OSError, ValueError):
        while chunk := stream.read(65536):
            if len(kept) < limit:
                kept += chunk[: limit - len(kept)]


def _feed(stream: Any, data: bytes) -> None:
    with contextlib.suppress(OSError, ValueError):  # a hook that does not read its input
        stream.write(data)
        stream.close()


def run(hook: Hook, payload: Mapping[str, Any], root: Path) -> HookRun:
    """One hook, given the event as JSON on standard input, in the project, in its own process
    group (killed whole past its timeout), its output kept to MAX_OUTPUT."""
    # dspine's environment without its secrets; Python finds no module in the script's folder or
    # the project by accident (a `json.py` beside the hook would shadow the standard library's),
    # and writes no bytecode there.
    env = {
        **child_environ(),
        "CLAUDE_PROJECT_DIR": str(root),
        "DSPINE_PROJECT_DIR": str(root),
        "PYTHONSAFEPATH": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    try:
        process = subprocess.Popen(
            hook.command,
            shell=True,
            cwd=root,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except (OSError, ValueError) as exc:
        return HookRun(hook, None, "", f"it could not start ({getattr(exc, 'strerror', None) or exc})", None)
    out, err = bytearray(), bytearray()
    limit = MAX_OUTPUT * 4  # bytes: room for MAX_OUTPUT characters of UTF-8
    threads = [
        threading.Thread(target=_drain, args=(process.stdout, out, limit), daemon=True),
        threading.Thread(target=_drain, args=(process.stderr, err, limit), daemon=True),
        threading.Thread(target=_feed, args=(process.stdin, json.dumps(payload).encode()), daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        process.wait(timeout=hook.timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        return HookRun(hook, None, "", f"stopped after its {hook.timeout_s:g} s timeout", None)
    for thread in threads[:2]:
        thread.join(timeout=5)  # a program that left the group may keep a pipe open: not waited for
    stdout = out.decode("utf-8", errors="replace")[:MAX_OUTPUT]
    stderr = err.decode("utf-8", errors="replace")[:MAX_OUTPUT]
    answer = None
    if stdout.lstrip().startswith("{"):
        try:
            parsed = json.loads(stdout)
            answer = parsed if isinstance(parsed, dict) else None
        except ValueError:
            answer = None
    return HookRun(hook, process.returncode, stdout, stderr, answer)


# The fields Claude Code's tools take, from dspine's tool's own: hooks written for Claude Code
# read `tool_input.file_path` (the common `.env` guard does); dspine's names stay beside them.
_CLAUDE_FIELDS = {
    "read_file": {"path": "file_path"},
    "write_file": {"path": "file_path"},
    "edit_file": {"path": "file_path", "old_text": "old_string", "new_text": "new_string"},
}


def claude_input(tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call's arguments as a hook sees them: dspine's fields, and Claude Code's names for
    the same values where its tool calls them otherwise."""
    given = dict(arguments)
    for ours, theirs in _CLAUDE_FIELDS.get(tool, {}).items():
        if ours in given and theirs not in given:
            given[theirs] = given[ours]
    return given


def claude_name(tool: str) -> str:
    """The name a hook written for Claude Code expects for one of dspine's tools (its own else)."""
    return next((claude for claude, ours in CLAUDE_NAMES.items() if ours == tool), tool)


class Hooks:
    """The hooks of one chat: which run for an event (a project's only once it is trusted),
    each given the event's fields as Claude Code gives them."""

    def __init__(self, config: HookConfig, root: Path, session_id: str) -> None:
        self.config = config
        self.root = root
        self.session_id = session_id
        self.project_trusted = False
        # The project's hooks' files as the user trusted them (app/agent/trust.py sets these):
        # a hook whose files changed since does not run.
        self.files_digest: Callable[[Hook], str] | None = None
        self.pinned: dict[int, str] = {}

    def pin(self) -> None:
        """Remember the project's hooks' files as they are now (at the user's yes)."""
        digest = self.files_digest
        self.pinned = {id(h): digest(h) for h in self.config.project_hooks} if digest is not None else {}

    def for_event(self, event: str, tool: str | None = None) -> list[Hook]:
        return [
            h
            for h in self.config.hooks
            if h.event == event and (self.project_trusted or not h.project) and h.matches(tool)
        ]

    def fire(self, event: str, fields: Mapping[str, Any], tool: str | None = None) -> list[HookRun]:
        """Every matching hook, one after another (blocking: the caller runs it off the UI)."""
        payload = {"session_id": self.session_id, "cwd": str(self.root), "hook_event_name": event, **fields}
        runs = []
        for hook in self.for_event(event, tool):
            if hook.project and self.files_digest is not None and self.pinned.get(id(hook)) != self.files_digest(hook):
                changed = "its files changed since you trusted the project, so it did not run; /mcp trust asks again"
                runs.append(HookRun(hook, None, "", changed, None))
                continue
            runs.append(run(hook, payload, self.root))
        return runs


def for_chat(root: Path, settings_hooks: Any = None) -> Hooks:
    """The hooks of a chat on the project at `root`: the user's, then the project's (which wait
    for trust: app/agent/mcp/setup.py asks)."""
    import uuid

    from ..paths import user_hook_files

    return Hooks(load(root, user_hook_files(), settings_hooks), root, str(uuid.uuid4()))
