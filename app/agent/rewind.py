"""Going back to an earlier prompt: the files this chat changed since, put back as they were.

The chat records every edit and write it applied, under the prompt it answered (the chats
store keeps them, so a resumed chat can go back too). Going back to a prompt puts each
file changed at or after it back to what it held before the first of those changes. A
file that holds something else than the chat left in it was changed outside the chat
since: it is named and left alone, unless the user says to put it back anyway.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import safe_files
from .files import read_text
from .paths import ToolRefused, resolve


@dataclass(frozen=True)
class RecordedChange:
    """An edit or write the chat applied, as the store keeps it."""

    id: int
    prompt_id: int  # the user message it answered
    name: str  # the file, relative to the project
    before: str | None  # None: the change created the file
    after: str
    root: str = ""  # the project it was applied in ("": a record older than that column)


@dataclass(frozen=True)
class FileBack:
    """One file to put back: what it held before the prompt and what the chat left in it."""

    name: str
    before: str | None  # None: it did not exist (the chat created it: it is removed)
    left: str  # what the chat's last change left in it
    now: str | None  # what it holds now (None: gone)
    # Changed by someone else between two of the chat's changes (a change found something else
    # than the one before it left): putting it back would drop that work too.
    changed_between: bool = False

    @property
    def changed_outside(self) -> bool:
        return self.now != self.left or self.changed_between

    @property
    def already_back(self) -> bool:
        return self.now == self.before


def changed_since(changes: Sequence[RecordedChange], prompt_id: int) -> list[RecordedChange]:
    return [c for c in changes if c.prompt_id >= prompt_id]


class OtherProject(ValueError):
    """Records of changes applied in another folder: they are never put back here."""


def plan(root, changes: Sequence[RecordedChange], prompt_id: int, project: str = "") -> list[FileBack]:
    """The files changed at or after `prompt_id`, in the order first changed, each with what
    it held before the first such change and what the chat's last change left in it.
    OtherProject when one of those changes was applied in another folder than `root` (a
    record without its folder counts as the chat's `project`, when that is known)."""
    here = str(Path(root).resolve())
    first: dict[str, RecordedChange] = {}
    last: dict[str, RecordedChange] = {}
    between: set[str] = set()
    for change in changed_since(changes, prompt_id):
        where = change.root or project
        if where and where != here:
            raise OtherProject(f"this chat changed files in {where}, not in {here}: open it there to put them back")
        if change.name in last and last[change.name].after != change.before:
            between.add(change.name)
        first.setdefault(change.name, change)
        last[change.name] = change
    return [FileBack(name, first[name].before, last[name].after, _now(root, name), name in between) for name in first]


def _now(root, name: str) -> str | None:
    try:
        path = resolve(root, name)
        return read_text(root, path, name) if os.path.lexists(path) else None
    except (ToolRefused, safe_files.TooLarge, OSError):
        return "\0unreadable"  # never equal to anything the chat wrote: named, left alone


def put_back(root, files: Sequence[FileBack], anyway: bool = False) -> tuple[list[str], list[str]]:
    """Put each file back (those changed outside the chat only when `anyway`): the names put
    back, and what was left alone and why."""
    done: list[str] = []
    left_alone: list[str] = []
    for file in files:
        if file.already_back:
            done.append(file.name)
            continue
        if file.changed_outside and not anyway:
            left_alone.append(f"{file.name}: changed outside this chat since; left as it is")
            continue
        try:
            path = resolve(root, file.name, write=True)
            safe_files.replace(root, path, file.name, _bytes(file.now), _bytes(file.before))
        except ToolRefused as exc:
            left_alone.append(f"{file.name}: {exc}")
            continue
        done.append(file.name)
    return done, left_alone


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode()
