"""Where files a sandboxed command planted go: out of the way, in the project, kept.

A sandboxed command may create what runs later outside the sandbox (`.envrc`, `.vscode/tasks.json`,
a `core.hooksPath` folder not made yet): bubblewrap keeps read-only only what exists when it
starts. app/agent/guarded.py says what was planted; this renames it into `.dspine-set-aside/` in
the project (a rename: never a copy, which a sparse file or another file system would make
costly), under the time, so the user can look at it and put back what they want. What cannot be
moved is said, with why.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable
from pathlib import Path

SET_ASIDE = ".dspine-set-aside"


def set_aside(root: Path, planted: Iterable[Path]) -> tuple[Path, list[tuple[Path, str]]]:
    """Each planted path (in `root`) renamed into the set-aside folder under its path in the
    project (one inside another that moved went with it): the folder, and what could not move."""
    base = root / SET_ASIDE
    folder = base / time.strftime("%Y%m%d-%H%M%S")
    moved: list[Path] = []
    failed: list[tuple[Path, str]] = []
    for path in planted:
        if any(path.is_relative_to(done) for done in moved) or not path.is_relative_to(root):
            continue
        target = folder / path.relative_to(root)
        try:
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            ignore = base / ".gitignore"
            if not ignore.exists():
                ignore.write_text("*\n")
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode) and not info.st_mode & stat.S_IWUSR:
                os.chmod(path, info.st_mode | stat.S_IWUSR)  # a folder's rename rewrites its `..`
            os.rename(path, target)
        except OSError as exc:
            failed.append((path, exc.strerror or str(exc)))
            continue
        moved.append(path)
    return folder, failed
