"""Whether another program holds a lock on a file, and which one: SQLite keeps
its locks as POSIX byte-range locks on the database and its -shm file, so "the
chats database is busy" can name the program that holds it."""

from __future__ import annotations

import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no POSIX locks to look at
    fcntl = None  # type: ignore[assignment]

PROC_LOCKS = Path("/proc/locks")


def locked_by_others(path: Path) -> bool:
    """Whether any other process holds a lock on any byte of `path`: a whole-file
    exclusive lock, tried without waiting and let go at once. This process must hold
    no lock on it (closing our probe would drop ours: POSIX locks are per process)."""
    if fcntl is None:
        return False
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _parse(text: str) -> list[tuple[int, int, int, int]]:
    """/proc/locks lines to (pid, major, minor, inode) of the locks held (not waited for)."""
    held = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 6 or fields[1] == "->":
            continue
        try:
            pid = int(fields[4])
            major, minor, inode = fields[5].split(":")
            held.append((pid, int(major, 16), int(minor, 16), int(inode)))
        except ValueError:
            continue
    return held


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def lock_holders(paths: list[Path]) -> list[tuple[int, str]]:
    """(pid, program name) of the other processes holding locks on `paths`, where the
    system says (Linux's /proc/locks); [] where it does not."""
    wanted = set()
    for path in paths:
        try:
            info = path.stat()
        except OSError:
            continue
        wanted.add((os.major(info.st_dev), os.minor(info.st_dev), info.st_ino))
    try:
        text = PROC_LOCKS.read_text()
    except OSError:
        return []
    pids = sorted({pid for pid, *where in _parse(text) if tuple(where) in wanted and pid not in (os.getpid(), -1)})
    return [(pid, _name(pid)) for pid in pids]
