"""Opening a project file without following anything that changed since its path
was checked.

`paths.resolve()` gives a real path (no symlinks left in it) inside the project.
Between that check and the moment of reading or writing (for a write, the user's
consent lies between them) a folder on the way can be swapped for a symlink. So
the path is opened again one component at a time from the project root, with
O_NOFOLLOW and O_DIRECTORY: a link met now was not there at the check, and the
call is refused. Special files are refused from their lstat, before any open
(opening a FIFO blocks; opening a device can act on it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .paths import ToolRefused, kind_of

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
# Windows has no openat(); there the path is opened whole after resolve() checked it.
_AT_SUPPORTED = os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd


def _moved(name: str) -> ToolRefused:
    return ToolRefused(
        f"{name!r}: a part of its path is not a plain folder (it is a file, or it became a symlink after "
        "the path was checked); nothing was read or written: look at the project again"
    )


def _parts(root: Path, real: Path) -> tuple[str, ...]:
    parts = real.relative_to(root).parts
    if not parts:
        raise ToolRefused("the project root is a folder, not a file: give a file path")
    return parts


def _folder(root: Path, parts: tuple[str, ...], name: str, *, create: bool) -> int:
    """A descriptor of the folder `parts` below root, reached without following links."""
    fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for part in parts:
            try:
                inner = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, dir_fd=fd)
                inner = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = inner
    except FileNotFoundError:
        os.close(fd)
        raise
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise _moved(name) from None
        raise ToolRefused(f"{name!r} cannot be reached ({exc.strerror})") from None
    return fd


def _regular(info: os.stat_result, name: str) -> os.stat_result:
    if stat.S_ISDIR(info.st_mode):
        raise ToolRefused(f"{name!r} is a directory: use list_files to see what it holds")
    if not stat.S_ISREG(info.st_mode):
        raise ToolRefused(f"{name!r} is {kind_of(info.st_mode)}: only regular files can be read or written")
    return info


class TooLarge(ToolRefused):
    """A file over the cap of a whole read: a line range of it can still be read (`opened`)."""


def read_bytes(root: Path, real: Path, name: str, limit: int, *, cut: bool = False) -> bytes:
    """The bytes of a regular file inside root; over `limit` bytes is refused (TooLarge, the
    message says the size), or with `cut` only the first `limit` bytes come back.
    FileNotFoundError when it does not exist."""
    with opened(root, real, name) as (handle, info):
        if not cut:
            _cap(info.st_size, limit, name)
        return handle.read(limit if cut else limit + 1)


@contextlib.contextmanager
def opened(root: Path, real: Path, name: str) -> Iterator[tuple[BinaryIO, os.stat_result]]:
    """A regular file inside root opened for reading, reached without following links, with
    its stat. FileNotFoundError when it does not exist."""
    root = root.resolve()
    if not _AT_SUPPORTED:
        info = os.stat(real)
        _regular(info, name)
        _not_linked(info, name)
        with open(real, "rb") as plain:
            yield plain, info
        return
    *folders, last = _parts(root, real)
    parent = _folder(root, tuple(folders), name, create=False)
    try:
        _not_linked(_regular(os.stat(last, dir_fd=parent, follow_symlinks=False), name), name)
        try:
            fd = os.open(last, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _moved(name) from None
            raise
    finally:
        os.close(parent)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        _regular(info, name)  # swapped between the lstat and the open
        _not_linked(info, name)  # linked between them
        yield handle, info


def _not_linked(info: os.stat_result, name: str) -> None:
    """A file with a second hard link may be a file outside the project (a link made to
    ~/.ssh/id_ed25519 inside it is a plain file to every path check): it is not read."""
    if info.st_nlink > 1:
        raise ToolRefused(
            f"{name!r} is a hard link ({info.st_nlink} names for one file): it may be a file outside the "
            "project, so it is not read"
        )


def _cap(size: int, limit: int, name: str) -> None:
    if size > limit:
        raise TooLarge(f"{name!r} is {size:,} bytes, over the {limit:,}-byte cap of a whole read")


def replace(root: Path, real: Path, name: str, expect: bytes | None, new: bytes | None) -> None:
    """Write `new` into the file (None: remove it) only if it holds `expect` now (None: it
    must not exist). Refused through a changed folder, a symlink, a special file or a
    file with a second hard link; missing folders are made (without following links)."""
    try:
        _replace(root, real, name, expect, new)
    except FileNotFoundError:
        raise ToolRefused(f"{name!r} was removed while the change waited: read the project again") from None
    except OSError as exc:  # permission denied, a full disk, a read-only file system
        raise ToolRefused(f"{name!r} could not be written ({exc.strerror}); nothing was changed") from None


def _replace(root: Path, real: Path, name: str, expect: bytes | None, new: bytes | None) -> None:
    root = root.resolve()
    *folders, last = _parts(root, real)
    if not _AT_SUPPORTED:
        _replace_by_path(real, name, expect, new)
        return
    try:
        parent = _folder(root, tuple(folders), name, create=new is not None)
    except FileNotFoundError:
        if expect is None:
            return  # nothing to remove, nothing was there
        raise ToolRefused(f"{name!r} was removed while the change waited: read the project again") from None
    try:
        try:
            info: os.stat_result | None = os.stat(last, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            info = None
        if info is None:
            if expect is not None:
                raise ToolRefused(f"{name!r} was removed while the change waited: read the project again")
            if new is not None:
                _create(parent, last, name, new)
            return
        _regular(info, name)
        _single_link(info, name)
        if expect is None:
            raise ToolRefused(f"{name!r} was created while the change waited: read it, then change it")
        flags = (os.O_RDWR if new is not None else os.O_RDONLY) | _NOFOLLOW | _NONBLOCK | _CLOEXEC
        try:
            fd = os.open(last, flags, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _moved(name) from None
            raise
        with os.fdopen(fd, "r+b" if new is not None else "rb") as handle:
            opened = os.fstat(handle.fileno())
            if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
                raise _moved(name)
            _regular(opened, name)
            _single_link(opened, name)
            if handle.read(len(expect) + 1) != expect:
                raise ToolRefused(f"{name!r} changed on disk while the change waited: read it again")
            if new is None:
                os.unlink(last, dir_fd=parent)
                return
            handle.seek(0)
            handle.truncate()
            handle.write(new)
    finally:
        os.close(parent)


def _single_link(info: os.stat_result, name: str) -> None:
    if info.st_nlink > 1:
        raise ToolRefused(
            f"{name!r} has {info.st_nlink} hard links, and the others may be outside the project: "
            "it is not written through; write a new file instead"
        )


def _create(parent: int, last: str, name: str, data: bytes) -> None:
    try:
        fd = os.open(last, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o666, dir_fd=parent)
    except FileExistsError:
        raise ToolRefused(f"{name!r} was created while the change waited: read it, then change it") from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _replace_by_path(real: Path, name: str, expect: bytes | None, new: bytes | None) -> None:
    """Without openat (Windows): the same checks on the whole path."""
    try:
        info: os.stat_result | None = os.lstat(real)
    except FileNotFoundError:
        info = None
    if info is not None:
        _regular(info, name)
        _single_link(info, name)
    now = real.read_bytes() if info is not None else None
    if now != expect:
        raise ToolRefused(f"{name!r} changed on disk while the change waited: read it again")
    if new is None:
        real.unlink()
        return
    real.parent.mkdir(parents=True, exist_ok=True)
    real.write_bytes(new)
