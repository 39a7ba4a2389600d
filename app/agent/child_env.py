"""The environment the model's commands and the hooks start with: dspine's own, without its
secrets, as Codex starts its commands.

dspine's environment holds keys (DSPINE_API_KEY for a remote server, a cloud's keys, tokens of
the hub and of package indexes): a command the model wrote, or a hook the project carries,
has no use for them and could send them anywhere the network reaches. So every name that
says it holds a secret (KEY, SECRET, TOKEN, PASS, CREDENTIAL, COOKIE anywhere in it, or PWD,
PAT, JWT, AUTH as a word of it, in any case; a password manager's session) and every DSPINE_
name is left out, unless the user lists it in the
`env_keep` setting. Everything else (PATH, HOME, LANG, a virtual environment's, a
toolchain's) passes, so the tools people run work as in their shell.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

SECRET_WORDS = ("KEY", "SECRET", "TOKEN", "PASS", "CREDENTIAL", "COOKIE")  # PASS: PASSWORD, SSHPASS, PASSPHRASE
# Whole words of a name (between underscores) that say the same: MYSQL_PWD, GH_PAT, CI_JOB_JWT,
# NPM_CONFIG__AUTH, and the session keys of password managers (BW_SESSION, OP_SESSION_my).
SECRET_PARTS = frozenset({"PWD", "PAT", "JWT", "AUTH"})
SECRET_PREFIXES = ("BW_SESSION", "OP_SESSION")
NOT_SECRET = frozenset({"PWD", "OLDPWD"})  # the shell's working folders
_keep: frozenset[str] = frozenset()


def configure(keep: Iterable[str]) -> None:
    """The names the user lets through (the `env_keep` setting), for this process."""
    global _keep
    _keep = frozenset(keep)


def is_secret(name: str) -> bool:
    upper = name.upper()
    if upper in NOT_SECRET:
        return False
    return (
        upper.startswith(("DSPINE_", *SECRET_PREFIXES))
        or any(word in upper for word in SECRET_WORDS)
        or not SECRET_PARTS.isdisjoint(upper.split("_"))
    )


def child_environ(base: Mapping[str, str] | None = None, keep: Iterable[str] | None = None) -> dict[str, str]:
    """`base` (the process's environment) without the names that hold secrets, but those kept."""
    kept = _keep if keep is None else frozenset(keep)
    source = os.environ if base is None else base
    return {name: value for name, value in source.items() if name in kept or not is_secret(name)}


def left_out(base: Mapping[str, str] | None = None) -> list[str]:
    """The names `child_environ` leaves out now (for doctor and the docs: names, never values)."""
    source = os.environ if base is None else base
    return sorted(name for name in source if name not in _keep and is_secret(name))
