"""Files that hold prompts, code or keys are for their owner only: 0600 in 0700 folders.

Folders dspine did not create (a models_dir on a shared disk, the user's home)
keep their modes: only the ones it makes are 0700.
"""

from __future__ import annotations

from pathlib import Path

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
