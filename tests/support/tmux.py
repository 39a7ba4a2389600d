"""`dspine` in a real terminal: a tmux session of its own (110x32 unless told), keys typed into it, the
screen read back. The process gets the test's own config, data and chats, and this
checkout's code whatever folder it runs in."""

from __future__ import annotations

import atexit
import os
import shlex
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import ROOT, dspine_cmd

# What a test's `env` fixture isolates that the process in the terminal must see too.
ISOLATED = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "DSPINE_MODELS_DIR", "HOME")


# A tmux server of the test run's own (not the user's), kept running between tests by a
# session of its own: a new session asked of a server that was exiting (its last session just
# killed by the test before) failed with "server exited unexpectedly" (a CI flake).
SOCKET = f"dspine-tests-{os.getpid()}"
_server_kept = False


def tmux(*args: str) -> list[str]:
    """The tmux command line for the test run's own server."""
    return ["tmux", "-L", SOCKET, *args]


def _keep_server() -> None:
    global _server_kept
    if not _server_kept:
        subprocess.run(tmux("new-session", "-d", "-s", "keeper"), check=True)
        atexit.register(_end_server)
        _server_kept = True


def _end_server() -> None:
    subprocess.run(tmux("kill-server"), capture_output=True)
    folder = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}"
    (folder / SOCKET).unlink(missing_ok=True)


def screen(session: str) -> str:
    return subprocess.run(tmux("capture-pane", "-p", "-t", session), capture_output=True, text=True).stdout


def keys(session: str, *typed: str) -> None:
    subprocess.run(tmux("send-keys", "-t", session, *typed), check=True)


@contextmanager
def dspine_in_tmux(
    env: dict[str, str],
    tmp_path: Path,
    *args: str,
    cwd: Path,
    name: str,
    size: tuple[int, int] = (110, 32),
    extra_env: dict[str, str] | None = None,
) -> Iterator[str]:
    """Start `dspine ARGS` in `cwd` in a new tmux session (the tmux server's environment, with
    `env`'s isolated folders and `extra_env` over it); yield the session's name; end it."""
    variables = {k: env[k] for k in ISOLATED if k in env}
    variables |= {"DSPINE_CHATS_DB": str(tmp_path / "chats.db"), "PYTHONPATH": str(ROOT), **(extra_env or {})}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items())
    session = f"dspine-{name}-{tmp_path.name}"
    _keep_server()
    subprocess.run(
        tmux("new-session", "-d", "-s", session, "-x", str(size[0]), "-y", str(size[1]), "-c", str(cwd)), check=True
    )
    try:
        # COLUMNS and LINES out: the test run's COLUMNS reaches the tmux server, bash exports it
        # with the pane's size at launch, and Textual then reads that fixed size for good (a
        # `resize-window` was never seen: the question kept its old frame). A user's terminal
        # exports neither.
        keys(session, f"env -u COLUMNS -u LINES {exports} {shlex.join(dspine_cmd(*args))}", "Enter")
        yield session
    finally:
        subprocess.run(tmux("kill-session", "-t", session), capture_output=True)
