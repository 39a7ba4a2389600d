"""Real coding agents from the npm registry for the tests, installed once per machine
into `~/.cache/dspine-tests/npm-clients/PACKAGE` under a lock (several test processes may
ask at once) and reused; a machine without the registry gets NpmUnavailable, which the
tests turn into a skip with the reason.

    npm_client("@anthropic-ai/claude-code", "claude") -> Path of the `claude` binary
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

CACHE = Path.home() / ".cache" / "dspine-tests" / "npm-clients"


class NpmUnavailable(Exception):
    """npm is missing or the registry cannot be reached: the reason, for a skip."""


def npm_client(package: str, binary: str) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        raise NpmUnavailable("npm is not installed")
    folder = CACHE / package.strip("@").replace("/", "+")
    found = folder / "node_modules" / ".bin" / binary
    folder.mkdir(parents=True, exist_ok=True)
    with (folder.with_suffix(".lock")).open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if found.exists():
            return found
        done = subprocess.run(
            [npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund", "--loglevel", "error", package],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode != 0:
            reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
            if any(word in done.stderr for word in ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "network")):
                raise NpmUnavailable(f"the npm registry is not reachable: {reason}")
            raise RuntimeError(f"npm install {package} failed: {done.stderr[-2000:]}")
    if not found.exists():
        raise RuntimeError(f"npm installed {package} but {found} is missing")
    return found
