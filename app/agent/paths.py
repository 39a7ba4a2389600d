"""Every path a tool touches resolves inside the project.

The model names paths; this module decides whether they may be read or
written. Symlinks are followed and the target is checked, so a link that
points out of the project is refused like `../`. Writes never reach a
repository's `.git` (in any spelling a file system maps to it), never make a
folder a repository (a HEAD file, or a repository's parts beside one: git would
run that folder's fsmonitor or hooks), never a special file, or a file with a
second hard link (which may live outside).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from pathlib import Path, PurePosixPath

from ..paths import users_own_folders


class ToolRefused(Exception):
    """A tool call that cannot run; the message goes back to the model, so it
    says what was wrong and what to do instead."""


# HFS+ drops these code points when it compares names, so `.g\u200cit` is `.git` on a Mac
# (git's own check, is_hfs_dotgit, strips the same set).
_IGNORED_BY_HFS = re.compile("[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]")
# Windows' 8.3 short names for `.git`: GIT~1 and the hashed form git itself refuses.
_SHORT_NAME = re.compile(r"(git|gi7eba)~\d+")


def is_git_name(part: str) -> bool:
    """True for every spelling some file system opens as `.git`: any case (macOS and
    Windows compare without it), trailing dots and spaces and an NTFS stream suffix
    (`.git. `, `.git::$INDEX_ALLOCATION`: Windows drops them), 8.3 short names (`GIT~1`)
    and HFS+ ignorable code points."""
    name = _folded(part)
    return name == ".git" or _SHORT_NAME.fullmatch(name) is not None


# What git looks for to take a folder for a repository (a bare one, or a `.git` folder
# under any name) besides HEAD: written beside a HEAD, they make `git status` there (or a
# git-aware shell prompt) run the folder's `core.fsmonitor` or hooks.
_REPOSITORY_PARTS = frozenset(
    {"config", "objects", "refs", "commondir", "gitdir", "packed-refs", "hooks", "info", "index", "worktrees"}
)


def _folded(part: str) -> str:
    return _IGNORED_BY_HFS.sub("", part).split(":", 1)[0].rstrip(". ").casefold()


def _check_not_repository(name: str, root: Path, real: Path) -> None:
    """A write that would make a folder a git repository: a file named HEAD anywhere, or a
    repository's part (config, objects/, refs/, ...) in a folder that holds a HEAD."""
    parts = real.relative_to(root).parts
    if parts and _folded(parts[-1]) == "head":
        raise ToolRefused(
            f"{name!r} would be a git HEAD file, which makes its folder a repository that git runs "
            "commands from: files named HEAD are not written; choose another name"
        )
    for depth, part in enumerate(parts):
        folder = root.joinpath(*parts[:depth])
        if _folded(part) in _REPOSITORY_PARTS and os.path.lexists(folder / "HEAD"):
            raise ToolRefused(
                f"{name!r} would be part of a git repository ({shown(root, folder)} holds a HEAD file): "
                "not written; choose another folder"
            )


def _check_not_users_own(name: str, real: Path) -> None:
    """dspine's settings and data and the user's command folders are the user's words, trusted
    as such: a chat started in the home folder would otherwise write itself an MCP server."""
    # The nearest parts of `real` that exist, compared by identity with each folder: on a file
    # system that ignores case, `.CONFIG/dspine` is `.config/dspine` though the names differ.
    existing = [p for p in (real, *real.parents) if os.path.lexists(p)]
    for folder in users_own_folders():
        try:
            mine = folder.resolve()
        except (OSError, RuntimeError):
            continue
        inside = real == mine or real.is_relative_to(mine)
        if not inside and os.path.isdir(mine):
            with contextlib.suppress(OSError):
                inside = any(os.path.samefile(p, mine) for p in existing[:8])
        if inside:
            raise ToolRefused(
                f"{name!r} is in {mine}, where dspine keeps your own settings, data or commands: "
                "the tools never write there; the user edits those files themselves"
            )


def kind_of(mode: int) -> str:
    """A special file's kind in words, for a refusal."""
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "not a regular file"


def _check_writable(name: str, real: Path) -> None:
    try:
        info = os.lstat(real)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ToolRefused(f"{name!r} cannot be looked at ({exc.strerror}): choose another path") from None
    if stat.S_ISDIR(info.st_mode):
        return  # the callers say "is a directory"
    if not stat.S_ISREG(info.st_mode):
        raise ToolRefused(f"{name!r} is {kind_of(info.st_mode)}: only regular files can be written")
    if info.st_nlink > 1:
        raise ToolRefused(
            f"{name!r} has {info.st_nlink} hard links, and the others may be outside the project: "
            "it is not written through; write a new file instead"
        )


def resolve(root: Path, name: str, *, write: bool = False) -> Path:
    """`name` (relative to the project, or absolute inside it) as a real path inside
    `root`; `.git/` internals (at any depth) only for reading."""
    if not name or not name.strip():
        raise ToolRefused("the path is empty: give a path relative to the project root")
    if "\0" in name:
        raise ToolRefused(f"{name!r} contains a NUL character: give a plain path")
    try:
        name.encode("utf-8")
    except UnicodeError:
        raise ToolRefused(f"{name!r} is not valid text (a lone surrogate): give a plain path") from None
    raw = Path(name)
    given = PurePosixPath(name.replace("\\", "/"))
    if ".." in given.parts:
        raise ToolRefused(f"{name!r} contains '..': give a path inside the project, relative to its root")
    root = root.resolve()
    candidate = raw if raw.is_absolute() else root / raw
    # strict=False: a file to be written may not exist yet; existing links are still followed.
    try:
        real = candidate.resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before Python 3.13)
        raise ToolRefused(f"{name!r} cannot be resolved ({exc}): give another path") from None
    if not real.is_relative_to(root):
        where = "is outside" if raw.is_absolute() else "leads outside (through a symlink)"
        raise ToolRefused(f"{name!r} {where} the project {root}: only paths inside it are allowed")
    if write and any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
        raise ToolRefused(f"{name!r} has a line break or another control character in it: choose a plain name")
    if write:
        # Both the spelling given and where it leads: `hooks -> .git/hooks` is caught by the second.
        spelled = () if raw.is_absolute() else given.parts
        if any(is_git_name(part) for part in (*spelled, *real.relative_to(root).parts)):
            raise ToolRefused(
                f"{name!r} is inside a .git folder, which is read-only: change files of the work tree instead"
            )
        _check_not_repository(name, root, real)
        _check_not_users_own(name, real)
        _check_writable(name, real)
    return real


def shown(root: Path, path: Path) -> str:
    """A path as the model and the user see it: relative to the project."""
    try:
        return path.relative_to(root.resolve()).as_posix() or "."
    except ValueError:
        return str(path)
