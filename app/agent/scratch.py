"""The project's private scratch folder, `.dspine/`: whole tool outputs that were cut
for the model are kept here, so it can read the middle with read_file. Owner-only
(0700 folder, 0600 files) and ignored by git (a `.gitignore` of `*` inside)."""

from __future__ import annotations

import itertools
import os
import stat
import time
from pathlib import Path
from typing import BinaryIO

from backends.private import private_dir

from ..paths import project_scratch

MAX_FILE_BYTES = 64 * 2**20  # one saved output on disk; past it the file says where it stopped
MAX_READ_CHARS = 20_000  # one read of a saved output, like read_file's own cap
_counter = itertools.count(1)


class Scratch:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.folder = project_scratch(root)

    def _ready(self) -> Path:
        # The project may ship `.dspine` (or its `.gitignore`) as a symlink out of itself, or as
        # a file: checked like any path a tool writes, so saved output never lands elsewhere.
        if os.path.lexists(self.folder):
            info = os.lstat(self.folder)
            if not stat.S_ISDIR(info.st_mode):
                raise OSError(f"{self.folder} is not a plain folder (a symlink or a file): nothing is saved there")
        private_dir(self.folder)
        if self.folder.resolve() != self.root.resolve() / self.folder.name:
            raise OSError(f"{self.folder} leads outside the project: nothing is saved there")
        ignore = self.folder / ".gitignore"
        if not os.path.lexists(ignore):
            fd = os.open(ignore, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write("*\n")
        return self.folder

    def create(self, label: str) -> tuple[Path, BinaryIO]:
        """A new owner-only file for one output: its path and the open file to stream into."""
        safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in label)[:40] or "output"
        name = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{next(_counter)}-{safe}.txt"
        path = self._ready() / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        return path, os.fdopen(fd, "wb")

    def save(self, label: str, text: str) -> Path:
        path, out = self.create(label)
        with out:
            data = text.encode()
            out.write(data[:MAX_FILE_BYTES])
            if len(data) > MAX_FILE_BYTES:
                out.write(f"\n… stopped here: the output went on for {len(data) - MAX_FILE_BYTES:,} bytes\n".encode())
        return path

    def shown(self, path: Path) -> str:
        """The path as the model names it: relative to the project."""
        return path.relative_to(self.root).as_posix()

    def holds(self, path: Path) -> bool:
        return path.parent == self.folder.resolve() or path.parent == self.folder

    @staticmethod
    def saved(path: Path) -> bool:
        """A file dspine saved there: a regular file of its own with one link. A project can
        ship `.dspine/` with a hard link to a file elsewhere (a key); that is read, if at all,
        as any other project file, through read_file's checks."""
        try:
            info = os.lstat(path)
        except OSError:
            return False
        return stat.S_ISREG(info.st_mode) and info.st_nlink == 1 and info.st_uid == os.getuid()


def read_lines(path: Path, start_line: int = 1, end_line: int | None = None, max_chars: int = MAX_READ_CHARS) -> str:
    """Numbered lines of a saved output, read as a stream: a saved output may be far larger than
    a project file read_file takes whole."""
    start_line = max(1, start_line)
    lines: list[str] = []
    size = 0
    number = 0
    with path.open("rb") as source:
        for number, raw in enumerate(source, start=1):
            if number < start_line:
                continue
            if end_line is not None and number > end_line:
                break
            line = f"{number:>5}\t{raw.decode(errors='replace').rstrip(chr(10))[:2000]}"
            size += len(line) + 1
            if size > max_chars and lines:
                lines.append(f"… (cut at line {number}: read on with start_line={number})")
                break
            lines.append(line)
    if not lines:
        return f"start_line {start_line} is past the end of the saved output ({number} lines)"
    return "\n".join(lines)
