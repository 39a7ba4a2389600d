"""aider, the coding agent, installed for tests in a virtual environment of its
own: it pins about a hundred packages (litellm, numpy, scipy, tree-sitter
grammars) that must not meet the project's. Built once under
~/.cache/dspine-tests/aider-venv (pip's own cache makes a rebuild quick) and
reused by every later run; a test that needs it is skipped, with the reason,
when it cannot be installed here (no package index)."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

from tests.support.caches import TEST_CACHE

AIDER = "aider-chat==0.86.2"  # pinned: its flags and its model metadata format are what the test speaks
CACHE = TEST_CACHE
VENV = CACHE / "aider-venv"
INSTALL_TIMEOUT_S = 1200  # measured: about 4 minutes the first time on this 2-core machine


class AiderUnavailable(Exception):
    """Why aider cannot run here (the test is skipped with this)."""


def aider_binary() -> Path:
    """The `aider` executable, installing it first if this machine has not yet."""
    CACHE.mkdir(parents=True, exist_ok=True)
    done = VENV / f"installed-{AIDER}"
    binary = VENV / "bin" / "aider"
    # Test processes running at once install it once: the others wait for the lock.
    with open(CACHE / "aider-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists() and binary.exists():
            return binary
        _install(binary)
        done.write_text(AIDER + "\n")
    return binary


def _install(binary: Path) -> None:
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(VENV)],
        [str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", AIDER],
    ]
    for step in steps:
        try:
            result = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise AiderUnavailable(f"installing {AIDER} took over {INSTALL_TIMEOUT_S} s") from exc
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            raise AiderUnavailable(f"cannot install {AIDER} into {VENV}: {' / '.join(tail)}")
    if not binary.exists():
        raise AiderUnavailable(f"{AIDER} installed no `aider` in {binary.parent}")
