"""Who may connect, pure: loopback needs nothing; any other address needs a key,
and the key never travels on a command line other local users can read."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..key_files import key_problem as _key_problem
from ..key_files import read_key_file as _read_key_file
from ..key_files import readable_by_others as _readable_by_others

LOOPBACK = {"127.0.0.1", "::1", "localhost"}
KEY_ENV = "DSPINE_SERVE_API_KEY"
GENERATE = "generate"


@dataclass(frozen=True)
class Access:
    key: str | None
    generated: bool = False
    warning: str | None = None  # said once at start, never with the key in it


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
