"""Every path a tool touches resolves inside the project.

The model names paths; this module decides whether they may be read or
written. Symlinks are followed and the target is checked, so a link that
points out of the project is refused like `../`.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath


class ToolRefused(Exception):
    """A tool call that cannot run; the message goes back to the model, so it
    says what was wrong and what to do instead."""


def resolve(root: Path, name: str, *, write: bool = False) -> Path:
    """`name` (relative to the project, or absolute inside it) as a real path inside
    `root`; `.git/` internals only for reading."""
    if not name or not name.strip():
        raise ToolRefused("the path is empty: give a path relative to the project root")
    raw = Path(name)
    if ".." in PurePosixPath(name.replace("\\", "/")).parts:
        raise ToolRefused(f"{name!r} contains '..': give a path inside the project, relative to its root")
    root = root.resolve()
    candidate = raw if raw.is_absolute() else root / raw
    # strict=False: a file to be written may not exist yet; existing links are still followed.
    real = candidate.resolve(strict=False)
    if not real.is_relative_to(root):
        where = "is outside" if raw.is_absolute() else "leads outside (through a symlink)"
        raise ToolRefused(f"{name!r} {where} the project {root}: only paths inside it are allowed")
    inside = real.relative_to(root)
    if write and inside.parts[:1] == (".git",):
        raise ToolRefused(f"{name!r} is inside .git/, which is read-only: change files of the work tree instead")
    return real


def shown(root: Path, path: Path) -> str:
    """A path as the model and the user see it: relative to the project."""
    try:
        return path.relative_to(root.resolve()).as_posix() or "."
    except ValueError:
        return str(path)
