"""The remote engine opened the one way every command opens it: the key from
DSPINE_API_KEY or a file (never the command line, which `ps` shows every user), the
server asked what it is (backends/remote_probe), and what the user must hear said once
(plain http to another machine, a key file others can read)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from backends.remote import RemoteEngine
from backends.remote_probe import check_url, plain_http_warning

from ..errors import UsageError
from ..key_files import key_problem, read_key_file, readable_by_others

KEY_ENV = "DSPINE_API_KEY"


@dataclass(frozen=True)
class RemoteKey:
    key: str | None
    warning: str | None = None


def remote_key(given: str | None, environ: dict[str, str] | None = None, option: str = "--api-key") -> RemoteKey:
    """`@FILE` (its first line), else DSPINE_API_KEY, else no key. A key typed on the
    command line is refused: every user of the machine reads it in `ps`, and the shell's
    history keeps it."""
    environ = dict(os.environ) if environ is None else environ
    if given is not None:
        if not given.startswith("@"):
            raise UsageError(
                f"{option} takes @FILE, not the key itself: a key on the command line is visible to every "
                "user of this machine (ps) and stays in the shell's history",
                f"put the key in a file only you can read (chmod 600) and give {option} @FILE, or set {KEY_ENV}",
            )
        path = Path(given[1:]).expanduser()
        key = read_key_file(given, path, option)
        if not key:
            raise UsageError(f"{option} {given}: {path} is empty", "put the key on its first line")
        if problem := key_problem(key):
            raise UsageError(f"{option} {given}: the first line of {path} is {problem}", "put the key alone on it")
        return RemoteKey(key, readable_by_others(path))
    from_env = environ.get(KEY_ENV)
    if not from_env:
        return RemoteKey(None)
    if problem := key_problem(from_env):
        raise UsageError(f"{KEY_ENV} is {problem}", f"set {KEY_ENV} to the key alone, or unset it")
    return RemoteKey(from_env)


def open_remote(
    url: str | None,
    api_key: str | None,
    model: str | None,
    drafter: str | None,
    read_timeout_s: float,
    ctx: int | None,
    environ: dict[str, str] | None = None,
    warn: Callable[[str], None] | None = None,
    option: str = "--api-key",
) -> RemoteEngine:
    """`warn` hears what the user must know before anything is sent (plain http to another
    machine, a key file others can read); `option`: the option that gives the key."""
    if not url:
        raise UsageError("--engine remote needs --url", "give the server's base URL, e.g. http://host:8000/v1")
    check_url(url)
    key = remote_key(api_key, environ, option)
    for warning in (plain_http_warning(url), key.warning):
        if warning and warn is not None:
            warn(warning)
    return RemoteEngine.connect(
        url, key.key, model, drafter, read_timeout_s=read_timeout_s, n_ctx=ctx, key_option=option
    )
