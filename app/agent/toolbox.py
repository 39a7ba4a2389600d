"""The tools offered to the model: one record per tool (name, schema, whether it
waits for consent, handler) feeds the schemas sent to the engine, the dispatch and
consent, so the three can never drift apart.

`Toolbox.prepare(name, arguments)` turns one tool call into a Step: a result
at once (reads, refusals), a Change waiting for consent (edit, write), or a
command waiting for consent. Nothing here asks or draws: the session does that.
A tool from elsewhere (an MCP server, later) joins with `Toolbox.add`: its record
names its source and whether it waits for consent.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import files, safe_files, todos
from .changes import Change, Changes
from .commands import DEFAULT_TIMEOUT_S
from .guarded import Guard, unsafe_root
from .paths import ToolRefused, resolve
from .sandbox import Sandbox, Where, where_to_run
from .sandbox import describe as describe_place
from .sandbox import find as find_sandbox
from .scratch import Scratch, read_lines
from .set_aside import set_aside


@dataclass(frozen=True)
class Done:
    """A result the model gets at once."""

    result: str


@dataclass(frozen=True)
class ProposedChange:
    change: Change
    guarded: str = ""  # why the file runs code later outside the sandbox (app/agent/guarded.py): it always asks


@dataclass(frozen=True)
class ProposedCommand:
    command: str
    timeout_s: float
    outside: bool = False  # the model asked to run it outside the sandbox (the user sees that)


@dataclass(frozen=True)
class ProposedCall:
    """A call to something outside dspine (an MCP server's tool): the user sees `title` and
    `body` (exactly what will be sent), then `run(stop)` makes the call; `stop` set from
    another thread ends the wait. "Always" covers this tool (by name) in this chat."""

    title: str
    body: str
    run: Callable[[threading.Event | None], str]
    always: str  # what "always" would cover, for the key's label


Step = Done | ProposedChange | ProposedCommand | ProposedCall

# What the model gets for a call the user said no to (the session answers it so); compaction
# recognises it to list such a command as declined rather than with an outcome.
DECLINED = "the user declined this; ask what they want instead, or try something else"


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


@dataclass(frozen=True)
class ToolSpec:
    """One tool: what the model is told (name, description, JSON-schema parameters), whether a
    call waits for the user's consent, and the handler that turns a call into a Step."""

    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[[Toolbox, dict[str, Any]], Step]
    needs_consent: bool = False
    source: str = "dspine"  # where the tool comes from: "dspine", or an MCP server's name
    # The same work needing only the project root, run by the session in a process of its own
    # (apart.call), so a runaway can be killed: a catastrophic regex holds Python's lock.
    apart: Callable[[Path, dict[str, Any]], Done] | None = None

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool schema sent to the engine."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


def _read_file(box: Toolbox, args: dict[str, Any]) -> Step:
    path_name = _text(args, "path")
    path = resolve(box.root, path_name)
    start, end = _int(args.get("start_line"), "start_line") or 1, _int(args.get("end_line"), "end_line")
    if box.scratch.holds(path) and box.scratch.saved(path):
        return Done(read_lines(path, start, end, box.result_chars))  # a saved output: read as a stream, any size
    try:
        text = files.read_text(box.root, path, path_name)
    except safe_files.TooLarge as exc:
        if args.get("start_line") is None and args.get("end_line") is None:
            raise ToolRefused(
                f"{exc}: read it in parts, with start_line and end_line (up to {files.MAX_OUTPUT_CHARS:,} "
                "characters come back a call)"
            ) from None
        return Done(files.read_range(box.root, path, path_name, start, end))
    box.changes.saw(path, text)
    return Done(files.numbered(text, start, end))


def _list_files(box: Toolbox, args: dict[str, Any]) -> Step:
    return Done(files.list_files(box.root, _text(args, "path", False) or ".", args.get("glob") or None))


def search_in(root: Path, args: dict[str, Any]) -> Done:
    return Done(files.search(root, _text(args, "pattern"), _text(args, "path", False) or ".", args.get("glob") or None))


def _search(box: Toolbox, args: dict[str, Any]) -> Step:
    return search_in(box.root, args)


def _proposed(box: Toolbox, change: Change) -> ProposedChange:
    return ProposedChange(change, box.guard.why(change.path))


def _edit_file(box: Toolbox, args: dict[str, Any]) -> Step:
    box.refuse_unsafe_root()
    return _proposed(
        box, box.changes.propose_edit(_text(args, "path"), _text(args, "old_text"), _text(args, "new_text", False))
    )


def _write_file(box: Toolbox, args: dict[str, Any]) -> Step:
    box.refuse_unsafe_root()
    return _proposed(box, box.changes.propose_write(_text(args, "path"), _text(args, "content", False)))


def _run_command(box: Toolbox, args: dict[str, Any]) -> Step:
    box.refuse_unsafe_root()
    command = _text(args, "command").strip()
    if not command:
        raise ToolRefused("the command is empty")
    outside = args.get("outside_sandbox", False)
    if not isinstance(outside, bool):
        raise ToolRefused("outside_sandbox must be true or false")
    timeout_s = float(_int(args.get("timeout_s"), "timeout_s") or DEFAULT_TIMEOUT_S)
    return ProposedCommand(command, timeout_s, outside)


def _todo_write(box: Toolbox, args: dict[str, Any]) -> Step:
    try:
        box.todos = todos.parse(args.get("todos"))
    except todos.TodoProblem as exc:
        raise ToolRefused(str(exc)) from None
    return Done("the todo list is now:\n" + todos.render(box.todos))


_STR = {"type": "string"}
_INT = {"type": "integer"}
_BOOL = {"type": "boolean"}
BUILTIN: tuple[ToolSpec, ...] = (
    ToolSpec(
        "read_file",
        "Read a text file of the project, with line numbers. Optional 1-based start_line and end_line.",
        _object({"path": _STR, "start_line": _INT, "end_line": _INT}, ["path"]),
        _read_file,
    ),
    ToolSpec(
        "list_files",
        "List the project's files (what .gitignore ignores is left out), under path, matching glob.",
        _object({"path": _STR, "glob": _STR}, []),
        _list_files,
    ),
    ToolSpec(
        "search",
        "Search the project's text files for a Python regular expression; prints path:line: text.",
        _object({"pattern": _STR, "path": _STR, "glob": _STR}, ["pattern"]),
        _search,
        apart=search_in,
    ),
    ToolSpec(
        "edit_file",
        "Replace old_text, which must occur exactly once in the file, with new_text. The user sees a diff first.",
        _object({"path": _STR, "old_text": _STR, "new_text": _STR}, ["path", "old_text", "new_text"]),
        _edit_file,
        needs_consent=True,
    ),
    ToolSpec(
        "write_file",
        "Create or overwrite a file with content. The user sees a diff first.",
        _object({"path": _STR, "content": _STR}, ["path", "content"]),
        _write_file,
        needs_consent=True,
    ),
    ToolSpec(
        "run_command",
        "Run a shell command in the project root (no input, output capped) once the user consents; in a "
        "sandbox: writes only in the project and /tmp, no network (outside_sandbox asks for more).",
        _object({"command": _STR, "timeout_s": _INT, "outside_sandbox": _BOOL}, ["command"]),
        _run_command,
        needs_consent=True,
    ),
    ToolSpec(
        "todo_write",
        "Your todo list for a task of several steps, whole each time: pending, in_progress (one) or completed.",
        _object(
            {
                "todos": {
                    "type": "array",
                    "items": _object(
                        {"content": _STR, "status": {"type": "string", "enum": list(todos.STATUSES)}},
                        ["content", "status"],
                    ),
                }
            },
            ["todos"],
        ),
        _todo_write,
    ),
)
TOOLS: list[dict] = [spec.schema for spec in BUILTIN]
TOOL_NAMES = frozenset(spec.name for spec in BUILTIN)
NEEDS_CONSENT = frozenset(spec.name for spec in BUILTIN if spec.needs_consent)


@dataclass
class Toolbox:
    root: Path
    changes: Changes = field(init=False)
    specs: dict[str, ToolSpec] = field(init=False)
    scratch: Scratch = field(init=False)  # where cut outputs are kept whole
    result_chars: int = 20_000  # how much of a saved output one read returns (the session sets it)
    sandbox_enabled: bool = True  # the user's `sandbox` setting: false runs every command as them
    sandbox: Sandbox | None = None  # the system's, found at the first command (None: not yet)
    todos: list[todos.Todo] = field(default_factory=list)  # the model's todo list (todo_write)
    guard: Guard = field(init=False)  # the places that run code later (always asked, read-only in the sandbox)
    unsafe_root: str = field(init=False)  # why the project root is never written ("" when it may be)

    def __post_init__(self) -> None:
        self.root = self.root.resolve()
        self.guard = Guard(self.root)
        self.unsafe_root = unsafe_root(self.root)
        self.changes = Changes(self.root)
        self.scratch = Scratch(self.root)
        self.specs = {spec.name: spec for spec in BUILTIN}

    def add(self, spec: ToolSpec) -> None:
        """A tool from elsewhere (an MCP server): it may not take a built-in's name."""
        if spec.name in self.specs:
            raise ValueError(f"a tool named {spec.name!r} exists already (from {self.specs[spec.name].source})")
        self.specs[spec.name] = spec

    def replace_source(self, prefix: str, specs: list[ToolSpec]) -> None:
        """Swap every record whose source starts with `prefix` (an MCP server's tools) for
        `specs`, which keep their order after the built-in ones."""
        self.specs = {name: spec for name, spec in self.specs.items() if not spec.source.startswith(prefix)}
        for spec in specs:
            self.add(spec)

    def schemas(self, offered: Callable[[ToolSpec], bool] | None = None) -> list[dict[str, Any]]:
        """What the engine is told, in a fixed order: the same bytes every request (prefix cache);
        `offered`: which tools go (a permission mode's choice), all when None."""
        return [spec.schema for spec in self.specs.values() if offered is None or offered(spec)]

    def needs_consent(self, name: str) -> bool:
        spec = self.specs.get(name)
        return spec is not None and spec.needs_consent

    def spec(self, name: str) -> ToolSpec | None:
        return self.specs.get(name)

    def prepare(self, name: str, arguments: str | dict) -> Step:
        try:
            spec = self.specs.get(name)
            if spec is None:
                raise ToolRefused(f"there is no tool {name!r}; the tools are {', '.join(sorted(self.specs))}")
            return spec.handler(self, parse_arguments(arguments))
        except ToolRefused as exc:
            return Done(f"error: {exc}")

    def command_place(self, step: ProposedCommand) -> tuple[Where, str, list[str] | None]:
        """Where a command runs, what the consent question says of it, and the sandbox's argv
        to run it in (None: outside)."""
        if self.sandbox is None:
            self.sandbox = find_sandbox()
        where = where_to_run(self.sandbox, self.sandbox_enabled, step.outside)
        said = describe_place(self.sandbox, where, setting_off=not self.sandbox_enabled)
        if where != "sandbox":
            return where, said, None
        return where, said, self.sandbox.wrap(self.root, self.guard.read_only())

    def refuse_unsafe_root(self) -> None:
        if self.unsafe_root:
            raise ToolRefused(self.unsafe_root)

    def sandbox_wrap(self) -> list[str]:
        """The sandbox's argv, made just before the command runs: a fresh walk, what runs later
        as it is now (`Guard.watch`), its binds from that walk."""
        assert self.sandbox is not None
        git = self.guard.watch()
        return self.sandbox.wrap(self.root, self.guard.read_only(git))

    def after_command(self, sandboxed: bool = True) -> str:
        """What a command left that runs later outside the sandbox, said to the model and the
        user: a repository it made (its hooks and fsmonitor run in git commands there), and, from
        a sandboxed command, what an agent, editor, direnv or git would run (`.envrc`,
        `.vscode/`, a hooks folder, a repository whose settings run programs), moved aside: the
        sandbox promised it writes none of that. The sandbox's binds follow from the next command."""
        notes = []
        made = self.guard.refresh()
        planted = self.guard.planted(made) if sandboxed else []
        if planted:
            folder, failed = set_aside(self.root, planted)
            moved = [p for p in planted if p not in {path for path, _ in failed}]
            if moved:
                names = ", ".join(p.relative_to(self.root).as_posix() for p in moved[:5])
                notes.append(
                    f"note: the command made {names}, which an agent, an editor, direnv or git would run "
                    f"later outside the sandbox; dspine moved them to {folder}. Write such files with the "
                    "edit tools, which ask the user."
                )
            for path, why in failed:
                notes.append(
                    f"warning: the command made {path.relative_to(self.root).as_posix()}, which runs later "
                    f"outside the sandbox, and dspine could not move it ({why}): look at it before opening "
                    "the folder in an editor or running git there."
                )
        made = [git for git in made if os.path.lexists(git)]
        if made:
            names = ", ".join(p.relative_to(self.root).as_posix() for p in made[:5])
            notes.append(
                f"note: the command made {names}: git run in that folder would run its hooks and settings. "
                "It is read-only to later commands; look at it before running git there."
            )
        return "\n".join(notes)

    def sandbox_left(self, step: ProposedCommand) -> bool:
        """Whether this command runs outside a sandbox that would otherwise hold it."""
        return step.outside and self.sandbox is not None and self.sandbox.available and self.sandbox_enabled

    def apply(self, change: Change) -> str:
        try:
            return self.changes.apply(change)
        except ToolRefused as exc:
            return f"error: {exc}"
