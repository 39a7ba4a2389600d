"""Where files a sandboxed command planted go: out of the project, kept, never deleted.

A sandboxed command may create what runs later outside the sandbox (`.envrc`, `.vscode/tasks.json`,
a `core.hooksPath` folder not made yet): bubblewrap keeps read-only only what exists when it
starts. app/agent/guarded.py says what was planted; this moves it to dspine's data folder, under
the project's name and the time, so the user can look at it and put back what they want.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

from ..paths import default_data_dir


def set_aside_folder(root: Path) -> Path:
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:8]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return default_data_dir() / "set-aside" / f"{root.name or 'root'}-{digest}" / stamp


def set_aside(root: Path, planted: Iterable[Path]) -> Path:
    """Each planted path (in `root`) moved to the set-aside folder under its path in the project;
    the folder. One inside another that moved already went with it."""
    folder = set_aside_folder(root)
    moved: list[Path] = []
    for path in planted:
        if any(path.is_relative_to(done) for done in moved) or not path.is_relative_to(root):
            continue
        target = folder / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        shutil.move(str(path), str(target))
        moved.append(path)
    return folder
