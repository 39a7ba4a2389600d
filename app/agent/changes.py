"""Edits and writes: proposed as a diff, applied only after consent, undone by /undo.

A change never lands on a file that changed on disk since the model read it
(or since the diff was shown): the model gets a message to read it again.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from . import safe_files
from .files import MAX_FILE_BYTES, read_text
from .paths import ToolRefused, resolve, shown

APPLIED = "applied: "  # how a change's result begins once it is written
_GIT_ESCAPES = {"\n": "\\n", "\t": "\\t", '"': '\\"', "\\": "\\\\"}


def header_name(prefix: str, name: str) -> str:
    """A file name in a diff's header as git writes it: quoted, with escapes, when it holds a
    line break, a quote, a backslash or a control character, so a name cannot end the header
    line and draw diff lines of its own (`x\n+++ b/other`)."""
    if not any(ch in _GIT_ESCAPES or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
        return prefix + name
    body = "".join(
        _GIT_ESCAPES.get(ch, f"\\{ord(ch):03o}" if ord(ch) < 0x20 or ord(ch) == 0x7F else ch) for ch in prefix + name
    )
    return f'"{body}"'


def fingerprint(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Change:
    """A proposed edit or write: what the file holds now and what it would hold."""

    path: Path
    name: str
    before: str | None  # None: the file does not exist yet
    after: str

    @property
    def diff(self) -> str:
        lines = difflib.unified_diff(
            (self.before or "").splitlines(keepends=True),
            self.after.splitlines(keepends=True),
            fromfile="/dev/null" if self.before is None else header_name("a/", self.name),
            tofile=header_name("b/", self.name),
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)

    @property
    def summary(self) -> str:
        added = sum(1 for line in self.diff.splitlines() if line.startswith("+") and not line.startswith("+++"))
        removed = sum(1 for line in self.diff.splitlines() if line.startswith("-") and not line.startswith("---"))
        verb = "create" if self.before is None else "edit"
        return f"{verb} {self.name} (+{added} -{removed})"


@dataclass
class Changes:
    """The chat's changes to one project: what the model has read, what was applied."""

    root: Path
    _read: dict[Path, str | None] = field(default_factory=dict)  # path -> fingerprint when read
    _applied: list[Change] = field(default_factory=list)
    # Told of each change once it is written (from the tool's worker thread): the chat keeps a
    # record of it for /rewind.
    on_applied: Callable[[Change], None] | None = None

    def saw(self, path: Path, text: str) -> None:
        self._read[path] = fingerprint(text)

    def _current(self, path: Path, name: str) -> str | None:
        try:
            return read_text(self.root, path, name) if os.path.lexists(path) else None
        except safe_files.TooLarge as exc:
            raise ToolRefused(f"{exc}: the tools cannot change it") from None

    def _unchanged_since_read(self, path: Path, name: str, now: str | None) -> None:
        if path in self._read and self._read[path] != fingerprint(now):
            raise ToolRefused(
                f"{name!r} changed on disk since you read it: read it again (read_file) before changing it"
            )

    def propose_edit(self, name: str, old_text: str, new_text: str) -> Change:
        path = resolve(self.root, name, write=True)
        before = self._current(path, name)
        if before is None:
            raise ToolRefused(f"{name!r} does not exist: use write_file to create it")
        self._unchanged_since_read(path, name, before)
        if not old_text:
            raise ToolRefused("old_text is empty: give the exact text to replace, as read_file showed it")
        count = before.count(old_text)
        if count == 0:
            raise ToolRefused(
                f"old_text was not found in {name!r}: copy it exactly (spaces and line breaks too) from read_file, "
                "without the line numbers"
            )
        if count > 1:
            raise ToolRefused(
                f"old_text occurs {count} times in {name!r}: include more lines around it so that it is unique"
            )
        return Change(path, shown(self.root, path), before, before.replace(old_text, new_text, 1))

    def propose_write(self, name: str, content: str) -> Change:
        path = resolve(self.root, name, write=True)
        if path.is_dir():
            raise ToolRefused(f"{name!r} is a directory: give a file path")
        if len(content.encode()) > MAX_FILE_BYTES:
            raise ToolRefused(f"the content is over the {MAX_FILE_BYTES:,}-byte cap: write smaller files")
        if content.lstrip("\ufeff \t\r\n").startswith("gitdir:"):
            # A gitfile: under the name `.git` (in some spelling a file system maps to it) it
            # makes its folder a work tree of any repository it names.
            raise ToolRefused(f"{name!r} would be a git link file (it starts with 'gitdir:'): it is not written")
        before = self._current(path, name)
        self._unchanged_since_read(path, name, before)
        return Change(path, shown(self.root, path), before, content)

    def apply(self, change: Change) -> str:
        """Write a change the user accepted, if the file is still what the diff was made from
        and its path still leads where it did (checked again now, consent took a while)."""
        self._same_place(change)
        safe_files.replace(self.root, change.path, change.name, _encoded(change.before), change.after.encode())
        self._applied.append(change)
        self.saw(change.path, change.after)
        if self.on_applied is not None:
            self.on_applied(change)
        return f"{APPLIED}{change.summary}"

    def _same_place(self, change: Change) -> None:
        if resolve(self.root, change.name, write=True) != change.path:
            raise ToolRefused(
                f"{change.name!r} now leads somewhere else (a folder on its path changed) while the change "
                "waited; nothing was written: look at the project again"
            )

    def forget(self, names: set[str]) -> None:
        """Files put back by a rewind: their changes can no longer be undone one by one, and
        the model must read them again before changing them."""
        self._applied = [c for c in self._applied if c.name not in names]
        for path in [p for p in self._read if shown(self.root, p) in names]:
            del self._read[path]

    @property
    def applied(self) -> tuple[Change, ...]:
        """The changes applied and not undone, oldest first."""
        return tuple(self._applied)

    @property
    def can_undo(self) -> bool:
        return bool(self._applied)

    def undo(self) -> str:
        """Revert the last applied change; refuse if the file moved on since."""
        if not self._applied:
            raise ToolRefused("nothing to undo")
        change = self._applied[-1]
        try:
            self._same_place(change)
            safe_files.replace(self.root, change.path, change.name, change.after.encode(), _encoded(change.before))
        except ToolRefused as exc:
            raise ToolRefused(f"{change.name} changed since the edit; not undone (fix it by hand): {exc}") from None
        self._applied.pop()
        if change.before is None:
            self._read.pop(change.path, None)
            return f"undone: removed {change.name}"
        self.saw(change.path, change.before)
        return f"undone: {change.summary}"


def _encoded(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def net_diffs(applied: Iterable[Change]) -> list[str]:
    """What a chat's applied changes did to the project: a unified diff a file (in the order
    each file was first changed), from the file before its first change to after its last.
    A file back where it started has none."""
    first: dict[Path, Change] = {}
    last: dict[Path, Change] = {}
    for change in applied:
        first.setdefault(change.path, change)
        last[change.path] = change
    return [
        Change(path, last[path].name, start.before, last[path].after).diff
        for path, start in first.items()
        if start.before != last[path].after
    ]
