"""The tools offered to the model (OpenAI function-tool schemas) and their dispatch.

`Toolbox.prepare(name, arguments)` turns one tool call into a Step: a result
at once (reads, refusals), a Change waiting for consent (edit, write), or a
command waiting for consent. Nothing here asks or draws: the chat does that.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import files
from .changes import Change, Changes
from .commands import DEFAULT_TIMEOUT_S
from .paths import ToolRefused, resolve


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_STR = {"type": "string"}
_INT = {"type": "integer"}
TOOLS: list[dict] = [
    _function(
        "read_file",
        "Read a text file of the project, with line numbers. Optional 1-based start_line and end_line.",
        {"path": _STR, "start_line": _INT, "end_line": _INT},
        ["path"],
    ),
    _function(
        "list_files",
        "List the project's files (what .gitignore ignores is left out), under path, matching glob.",
        {"path": _STR, "glob": _STR},
        [],
    ),
    _function(
        "search",
        "Search the project's text files for a Python regular expression; prints path:line: text.",
        {"pattern": _STR, "path": _STR, "glob": _STR},
        ["pattern"],
    ),
    _function(
        "edit_file",
        "Replace old_text, which must occur exactly once in the file, with new_text. The user sees a diff first.",
        {"path": _STR, "old_text": _STR, "new_text": _STR},
        ["path", "old_text", "new_text"],
    ),
    _function(
        "write_file",
        "Create or overwrite a file with content. The user sees a diff first.",
        {"path": _STR, "content": _STR},
        ["path", "content"],
    ),
    _function(
        "run_command",
        "Run a shell command in the project root (no input, output capped). The user consents first.",
        {"command": _STR, "timeout_s": _INT},
        ["command"],
    ),
]
TOOL_NAMES = frozenset(t["function"]["name"] for t in TOOLS)


@dataclass(frozen=True)
class Done:
    """A result the model gets at once."""

    result: str


@dataclass(frozen=True)
class ProposedChange:
    change: Change


@dataclass(frozen=True)
class ProposedCommand:
    command: str
    timeout_s: float


Step = Done | ProposedChange | ProposedCommand


def parse_arguments(arguments: str | dict) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        raise ToolRefused(f"the arguments are not valid JSON ({exc}): send a JSON object") from None
    if not isinstance(parsed, dict):
        raise ToolRefused("the arguments must be a JSON object")
    return parsed


def _int(value: Any, name: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ToolRefused(f"{name} must be a whole number, not {value!r}") from None


def _text(args: dict[str, Any], name: str, required: bool = True) -> str:
    value = args.get(name)
    if value is None:
        if required:
            raise ToolRefused(f"the argument {name!r} is missing")
        return ""
    return value if isinstance(value, str) else json.dumps(value)


@dataclass
class Toolbox:
    root: Path
    changes: Changes = field(init=False)

    def __post_init__(self) -> None:
        self.root = self.root.resolve()
        self.changes = Changes(self.root)

    def prepare(self, name: str, arguments: str | dict) -> Step:
        try:
            return self._prepare(name, parse_arguments(arguments))
        except ToolRefused as exc:
            return Done(f"error: {exc}")

    def _prepare(self, name: str, args: dict[str, Any]) -> Step:
        if name == "read_file":
            path_name = _text(args, "path")
            path = resolve(self.root, path_name)
            text = files.read_text(self.root, path, path_name)
            self.changes.saw(path, text)
            return Done(
                files.numbered(
                    text, _int(args.get("start_line"), "start_line") or 1, _int(args.get("end_line"), "end_line")
                )
            )
        if name == "list_files":
            return Done(files.list_files(self.root, _text(args, "path", False) or ".", args.get("glob") or None))
        if name == "search":
            return Done(
                files.search(
                    self.root, _text(args, "pattern"), _text(args, "path", False) or ".", args.get("glob") or None
                )
            )
        if name == "edit_file":
            change = self.changes.propose_edit(
                _text(args, "path"), _text(args, "old_text"), _text(args, "new_text", False)
            )
            return ProposedChange(change)
        if name == "write_file":
            return ProposedChange(self.changes.propose_write(_text(args, "path"), _text(args, "content", False)))
        if name == "run_command":
            command = _text(args, "command").strip()
            if not command:
                raise ToolRefused("the command is empty")
            return ProposedCommand(command, float(_int(args.get("timeout_s"), "timeout_s") or DEFAULT_TIMEOUT_S))
        raise ToolRefused(f"there is no tool {name!r}; the tools are {', '.join(sorted(TOOL_NAMES))}")

    def apply(self, change: Change) -> str:
        try:
            return self.changes.apply(change)
        except ToolRefused as exc:
            return f"error: {exc}"
