"""API keys kept out of command lines: read from the first line of a file only its owner
reads (`--api-key @FILE`), checked for what no HTTP header can carry. One home for
`dspine serve`'s own key and the key of a remote engine."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import UsageError

KEY_FILE_MAX = 4096  # a key is a line; more than this is not a key file


def readable_by_others(path: Path) -> str | None:
    """A key file other local users can read is a key they have."""
    if os.name != "posix":
        return None  # Windows: the file's ACL, not its mode bits, says who reads it
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if not mode & 0o044:
        return None
    return f"the key file {path} can be read by other users of this machine (mode {mode & 0o777:o}); chmod 600 {path}"


def read_key_file(given: str, path: Path, option: str = "--api-key") -> str:
    """The first line of a regular file. A FIFO or a device would block the start or
    feed it without end: refused before it is opened."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise UsageError(f"{option} {given}: {path} is not a regular file", "give a file that holds the key")
        with path.open("rb") as file:
            head = file.read(KEY_FILE_MAX + 1)
    except FileNotFoundError as exc:
        # No such file: what followed the @ may be the key itself (`--api-key @sk-...`), so it is
        # never echoed; a file that exists is named as it is.
        raise UsageError(
            f"{option} @FILE: no such file (what followed the @ is not shown, in case it was the key)",
            "give the path of a file only you can read (chmod 600) that holds the key on its first line",
        ) from exc
    except OSError as exc:
        raise UsageError(f"{option} {given}: cannot read {path} ({exc.strerror})", "check the path") from exc
    if len(head) > KEY_FILE_MAX:
        raise UsageError(f"{option} {given}: {path} is larger than a key", "put the key alone on its first line")
    try:
        lines = head.decode().strip().splitlines()
    except UnicodeDecodeError as exc:
        raise UsageError(f"{option} {given}: {path} is not text", "put the key alone on its first line") from exc
    return lines[0].strip() if lines else ""


def key_problem(key: str) -> str | None:
    """Why `key` cannot be a key: blank (it would be no key), with spaces around it or a
    control character in it (a header is trimmed and carries no control characters, so no
    client could send it)."""
    if not key.strip():
        return "blank: a key of spaces would be no key"
    if key != key.strip():
        return "a key with spaces around it, which no client's header can carry"
    if not key.isprintable():
        return "a key with a control character in it, which no client's header can carry"
    if not key.isascii():
        return "a key with characters outside ASCII, which an HTTP header cannot carry"
    return None
