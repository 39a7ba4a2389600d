"""Advisory locks between dspine processes: one per file being pulled, one for the manifest.

An OS lock (flock on POSIX, msvcrt on Windows) is released by the kernel when
its holder dies, even by kill -9, so a crashed pull never leaves a stale lock.
The holder writes its pid into the lock file so that a waiting pull can say who
it waits for.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

WaitCallback = Callable[[str], None]  # told who holds the lock, once, before waiting


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _lock(fd: int) -> None:
        while True:
            os.lseek(fd, 0, os.SEEK_SET)
            try:
                msvcrt.locking(fd, msvcrt.LK_LOCK, 1)  # retries for 10 s, then raises
                return
            except OSError:
                continue

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _holder(fd: int) -> str:
    try:
        pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip() if hasattr(os, "pread") else ""
    except OSError:
        pid = ""
    return f"pid {pid}" if pid.isdigit() else "another process"


@contextmanager
def held(path: Path, on_wait: WaitCallback | None = None) -> Iterator[None]:
    """Hold the lock for `path` (a `.lock` file beside it), waiting for it if need be."""
    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if not _try_lock(fd):
            if on_wait is not None:
                on_wait(_holder(fd))
            _lock(fd)
        os.ftruncate(fd, 0)
        if hasattr(os, "pwrite"):
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        try:
            yield
        finally:
            _unlock(fd)
    finally:
        os.close(fd)


def is_held(path: Path) -> bool:
    """Whether another process holds the lock for `path` right now (without waiting)."""
    lock = lock_path(path)
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        if not _try_lock(fd):
            return True
        _unlock(fd)
        return False
    finally:
        os.close(fd)
