"""Reading custom slash commands from disk (the parsing is `custom_commands.py`).

The folders, in the order a name is looked up (the first file of a name wins):

1. the user's own `~/.claude/commands/`, then Codex's `$CODEX_HOME/prompts/` (else
   `~/.codex/prompts/`): a project never shadows a command the user keeps;
2. the project's `.dspine/commands/`, `.claude/commands/`, `.opencode/command/`,
   `.opencode/commands/`.

Subfolders give `folder:name` (Codex reads only its folder's own files). A project's
file is read like any file a tool reads: one that leads out of the project through a
symlink, a hard link, a special file, one over 64 KiB, one not in UTF-8 or with a
malformed front matter is skipped with a notice that names it; the others still load.
Reading a command runs nothing: it is a prompt.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import project_command_folders, user_command_folders
from . import safe_files
from .custom_commands import MAX_COMMAND_BYTES, CommandProblem, CustomCommand, command_name, first_wins, parse
from .paths import ToolRefused, resolve

MAX_FILES = 500  # command files read from one folder; past it the rest are named in one notice
MAX_DEPTH = 6  # subfolders below a commands folder


@dataclass(frozen=True)
class CommandFolder:
    path: Path
    shown: str  # as the user knows it: ".claude/commands", "~/.codex/prompts"
    project: Path | None = None  # the project root its files must stay inside; None: the user's own
    nested: bool = True  # subfolders give `folder:name`


@dataclass(frozen=True)
class LoadedCommands:
    commands: list[CustomCommand] = field(default_factory=list)  # in lookup order, each name once
    notices: list[str] = field(default_factory=list)  # files skipped, names refused, clashes


def shown_home(path: Path) -> str:
    home = Path.home()
    return "~/" + path.relative_to(home).as_posix() if path.is_relative_to(home) else str(path)


def folders_for(root: Path | None, user: Iterable[Path] | None = None) -> list[CommandFolder]:
    """The user's own folders (`user`: the defaults of app/paths.py) first, then the project's
    (none without a project), a user folder that is one of the project's left out: a name
    both give is the user's, so a downloaded project cannot shadow a command the user trusts
    (`/review` that sends the project's words instead)."""
    project: list[CommandFolder] = []
    if root is not None:
        root = root.resolve()
        for path in project_command_folders(root):
            project.append(CommandFolder(path, path.relative_to(root).as_posix(), root))
    seen = {os.path.realpath(folder.path) for folder in project}
    own: list[CommandFolder] = []
    for path in user_command_folders() if user is None else user:
        path = path.expanduser()
        if os.path.realpath(path) not in seen:
            nested = path.name != "prompts"  # Codex reads its prompts folder's own files only
            own.append(CommandFolder(path, shown_home(path), None, nested))
    return own + project


def load(folders: Iterable[CommandFolder], taken: Iterable[str] = ()) -> LoadedCommands:
    """Every command the folders hold, the first of a name winning; `taken`: the built-in
    names, which no file can replace."""
    found: list[CustomCommand] = []
    notices: list[str] = []
    for folder in folders:
        for parts, text_or_problem in _files(folder):
            source = "/".join((folder.shown, *parts))
            try:
                if isinstance(text_or_problem, CommandProblem):
                    raise text_or_problem
                found.append(parse(command_name(parts), source, text_or_problem))
            except CommandProblem as exc:
                notices.append(f"custom command {source} skipped: {exc}")
    commands, clashes = first_wins(found, taken)
    return LoadedCommands(commands, notices + clashes)


def _files(folder: CommandFolder) -> Iterator[tuple[tuple[str, ...], str | CommandProblem]]:
    """(path parts below the folder, the file's text or why it was not read) for each `.md`."""
    if folder.project is not None:
        try:
            top = resolve(folder.project, folder.shown)
        except ToolRefused:
            yield (), CommandProblem("the folder leads out of the project (a symlink): none of its commands is read")
            return
    else:
        top = folder.path
    if not top.is_dir():
        return
    count = 0
    for parts, entry in _walk(top, (), folder):
        if isinstance(entry, CommandProblem):
            yield parts, entry
            continue
        count += 1
        if count > MAX_FILES:
            yield parts, CommandProblem(f"more than {MAX_FILES} command files in {folder.shown}: the rest are skipped")
            return
        yield parts, _read(folder, entry, "/".join(parts))


def _walk(
    path: Path, parts: tuple[str, ...], folder: CommandFolder
) -> Iterator[tuple[tuple[str, ...], Path | CommandProblem]]:
    try:
        entries = sorted(os.scandir(path), key=lambda entry: entry.name)
    except OSError as exc:
        yield parts, CommandProblem(f"the folder cannot be listed ({exc.strerror})")
        return
    for entry in entries:
        inner = (*parts, entry.name)
        if entry.is_dir(follow_symlinks=False):
            if folder.nested and len(inner) <= MAX_DEPTH:
                yield from _walk(Path(entry.path), inner, folder)
        elif entry.name.lower().endswith(".md"):
            yield inner, Path(entry.path)
        elif entry.is_symlink() and folder.nested and entry.is_dir():
            yield inner, CommandProblem("a symlink to a folder: not followed (move the files here)")


def _read(folder: CommandFolder, path: Path, below: str) -> str | CommandProblem:
    try:
        if folder.project is not None:
            name = f"{folder.shown}/{below}"
            data = safe_files.read_bytes(folder.project, resolve(folder.project, name), name, MAX_COMMAND_BYTES)
        else:
            data = read_own_file(path)
    except (ToolRefused, CommandProblem) as exc:
        return CommandProblem(f"not read: {exc}")
    except OSError as exc:
        return CommandProblem(f"not read ({exc.strerror})")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return CommandProblem(f"not UTF-8 text (byte {exc.start:,} is {data[exc.start]:#04x}): save it as UTF-8")


def read_own_file(path: Path) -> bytes:
    """A file in the user's own folder: links followed (it is theirs), but only a regular
    file, and no more than the cap."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # before opening: a device acts on an open
            raise CommandProblem("not a regular file")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise CommandProblem("a symlink to nothing") from None
        raise
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise CommandProblem("not a regular file")
        if info.st_size > MAX_COMMAND_BYTES:
            raise CommandProblem(f"{info.st_size:,} bytes, over the {MAX_COMMAND_BYTES:,}-byte cap of a command")
        data = handle.read(MAX_COMMAND_BYTES + 1)
    if len(data) > MAX_COMMAND_BYTES:
        raise CommandProblem(f"over the {MAX_COMMAND_BYTES:,}-byte cap of a command")
    return data


def load_for_chat(root: Path | None, taken: Iterable[str] = ()) -> LoadedCommands:
    """The commands a chat on `root` offers: the project's and the user's own."""
    return load(folders_for(root), taken)
