"""Who may connect, pure: loopback needs nothing; any other address needs a key,
and the key never travels on a command line other local users can read."""

from __future__ import annotations

import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError

LOOPBACK = {"127.0.0.1", "::1", "localhost"}
KEY_ENV = "DSPINE_SERVE_API_KEY"
GENERATE = "generate"


@dataclass(frozen=True)
class Access:
    key: str | None
    generated: bool = False
    warning: str | None = None  # said once at start, never with the key in it


def _readable_by_others(path: Path) -> str | None:
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


KEY_FILE_MAX = 4096  # a key is a line; more than this is not a key file


def _read_key_file(given: str, path: Path) -> str:
    """The first line of a regular file. A FIFO or a device would block the start or
    feed it without end: refused before it is opened."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise UsageError(f"--api-key {given}: {path} is not a regular file", "give a file that holds the key")
        with path.open("rb") as file:
            head = file.read(KEY_FILE_MAX + 1)
    except OSError as exc:
        raise UsageError(f"--api-key {given}: cannot read {path} ({exc.strerror})", "check the path") from exc
    if len(head) > KEY_FILE_MAX:
        raise UsageError(f"--api-key {given}: {path} is larger than a key", "put the key alone on its first line")
    try:
        lines = head.decode().strip().splitlines()
    except UnicodeDecodeError as exc:
        raise UsageError(f"--api-key {given}: {path} is not text", "put the key alone on its first line") from exc
    return lines[0].strip() if lines else ""


def _key_problem(key: str) -> str | None:
    """Why `key` cannot be a key: blank (it would be no key), with spaces around it or a
    control character in it (a header is trimmed and carries no control characters, so no
    client could send it)."""
    if not key.strip():
        return "blank: a key of spaces would be no key"
    if key != key.strip():
        return "a key with spaces around it, which no client's header can carry"
    if not key.isprintable():
        return "a key with a control character in it, which no client's header can carry"
    return None


def resolve_access(host: str, api_key: str | None, environ: dict[str, str] | None = None) -> Access:
    """`--api-key` is `@FILE` (read it), `generate` (make one, print it once) or the key
    itself (works, but `ps` shows it: we say so); else DSPINE_SERVE_API_KEY."""
    environ = dict(os.environ) if environ is None else environ
    if api_key == GENERATE:
        return Access(secrets.token_urlsafe(24), generated=True)
    if api_key and api_key.startswith("@"):
        path = Path(api_key[1:]).expanduser()
        key = _read_key_file(api_key, path)
        if not key:
            raise UsageError(f"--api-key {api_key}: {path} is empty", "put the key on its first line")
        if problem := _key_problem(key):
            raise UsageError(f"--api-key {api_key}: the first line of {path} is {problem}", "put the key alone on it")
        return Access(key, warning=_readable_by_others(path))
    if api_key is not None and (problem := _key_problem(api_key)):
        raise UsageError(f"--api-key is {problem}", "give the key alone, --api-key @FILE, or --api-key generate")
    if api_key:
        return Access(
            api_key,
            warning=(
                "the key given on the command line is visible to other users of this machine (ps); "
                f"use --api-key @FILE or {KEY_ENV} instead"
            ),
        )
    if environ.get(KEY_ENV):
        key = environ[KEY_ENV]
        if problem := _key_problem(key):
            raise UsageError(
                f"{KEY_ENV} is {problem}",
                f"set {KEY_ENV} to the key alone, or unset it",
            )
        return Access(key)
    if host not in LOOPBACK:
        raise UsageError(
            f"--host {host} opens the endpoint to other machines, and no API key was given",
            f"set {KEY_ENV}, or give --api-key @FILE (a file only you can read), "
            "or --api-key generate (one is made and printed once); or leave --host out to stay on 127.0.0.1",
        )
    return Access(None)
