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


@dataclass(frozen=True)
class FileBack:
    """One file to put back: what it held before the prompt and what the chat left in it."""

    name: str
    before: str | None  # None: it did not exist (the chat created it: it is removed)
    left: str  # what the chat's last change left in it
    now: str | None  # what it holds now (None: gone)

    @property
    def changed_outside(self) -> bool:
        return self.now != self.left

    @property
    def already_back(self) -> bool:
        return self.now == self.before


def changed_since(changes: Sequence[RecordedChange], prompt_id: int) -> list[RecordedChange]:
    return [c for c in changes if c.prompt_id >= prompt_id]


def plan(root, changes: Sequence[RecordedChange], prompt_id: int) -> list[FileBack]:
    """The files changed at or after `prompt_id`, in the order first changed, each with what
    it held before the first such change and what the chat's last change left in it."""
    first: dict[str, RecordedChange] = {}
    last: dict[str, RecordedChange] = {}
    for change in changed_since(changes, prompt_id):
        first.setdefault(change.name, change)
        last[change.name] = change
    return [FileBack(name, first[name].before, last[name].after, _now(root, name)) for name in first]


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
