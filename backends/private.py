"""Files that hold prompts, code or keys are for their owner only: 0600 in 0700 folders.

Folders dspine did not create (a models_dir on a shared disk, the user's home)
keep their modes: only the ones it makes are 0700. The one copy of this rule:
here, where both the engines (llama-server's logs and key file) and app/ reach it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

FILE_MODE = 0o600
DIR_MODE = 0o700


def private_dir(folder: Path) -> Path:
    """Make `folder` (and missing parents) owner-only where dspine creates it."""
    missing = []
    probe = folder
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    folder.mkdir(parents=True, exist_ok=True)
    for made in missing:
        made.chmod(DIR_MODE)
    return folder


def make_private(path: Path) -> None:
    """Narrow an existing file to its owner (files made before this rule were 0644)."""
    try:
        if path.stat().st_mode & 0o077:
            path.chmod(FILE_MODE)
    except FileNotFoundError:
        pass


def open_private(path: Path, flags: int) -> int:
    """`os.open` of a file for its owner only: created 0600, and narrowed to 0600 where an
    older file of that name (a log of the same port, a leftover .tmp) was wider."""
    fd = os.open(path, flags | os.O_CREAT, FILE_MODE)
    if hasattr(os, "fchmod"):
        os.fchmod(fd, FILE_MODE)
    return fd


def write_private_json(path: Path, data: Any) -> None:
    """`data` as JSON in an owner-only file, whole or not at all (written beside it, then
    moved over it), in an owner-only folder where dspine makes it."""
    private_dir(path.parent)
    temporary = path.with_name(path.name + ".tmp")
    with os.fdopen(open_private(temporary, os.O_WRONLY | os.O_TRUNC), "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
    os.replace(temporary, path)
