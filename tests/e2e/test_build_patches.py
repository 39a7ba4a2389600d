"""installers/build_llama_server.sh applies dspine's three patches to the pinned llama.cpp
source: the per-request one, then DSpine's on top, then ngram-copy's; without ngram-copy when
its patch does not apply, with only the first when DSpine's does not, and none when the first
does not, saying which in PATCHED each time.

The compile is not what these test (the tests' real build, tests/support/patched_server.py,
compiles both patches): a stand-in cmake leaves a binary, so each case takes seconds."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.patched_server import pinned_source

pytestmark = pytest.mark.slow  # copies the llama.cpp source (about 180 MB) a few times

BUILD = ROOT / "installers" / "build_llama_server.sh"
STAND_IN_CMAKE = """#!/bin/sh
# configure: nothing; --build DIR: a llama-server that prints what it is
if [ "$1" = "--build" ]; then mkdir -p "$2/bin"; printf '#!/bin/sh\\necho stand-in\\n' > "$2/bin/llama-server"; \
chmod +x "$2/bin/llama-server"; fi
"""


@pytest.fixture(scope="module")
def source() -> Path:
    return pinned_source()


def build(src: Path, dest: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess, str]:
    cmake = tmp_path / "cmake"
    cmake.write_text(STAND_IN_CMAKE)
    cmake.chmod(0o755)
    env = {**os.environ, "CMAKE": str(cmake), "JOBS": "1"}
    done = subprocess.run(
        ["bash", str(BUILD), str(src), str(dest)], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL
    )
    return done, (dest / "PATCHED").read_text().strip() if (dest / "PATCHED").exists() else ""


def broken_copy(source: Path, tmp_path: Path, file: str, line: str) -> Path:
    """The source with one line the named patch's context needs changed."""
    copy = tmp_path / "src"
    shutil.copytree(source, copy, symlinks=True)
    path = copy / file
    text = path.read_text()
    assert line in text
    path.write_text(text.replace(line, line + " // changed upstream", 1))
    return copy


def test_every_patch_applies_to_the_pinned_source(source, tmp_path):
    done, patched = build(source, tmp_path / "out", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert patched == (
        "patched: per-request draft length, drafts follow the request's sampler, DSpine drafter, weighed copies"
    )
    assert "patch applied: DSpine drafter (--spec-type draft-dspine)" in done.stdout
    assert "patch applied: copies drafted as far as they pay for their pass (--spec-type ngram-copy)" in done.stdout
    tree = tmp_path / "out" / "src"
    assert "COMMON_SPECULATIVE_TYPE_DRAFT_DSPINE" in (tree / "common" / "common.h").read_text()
    assert "build_dspine_injection" in (tree / "src" / "models" / "dflash.cpp").read_text()
    assert "spec_follow" in (tree / "common" / "speculative.cpp").read_text()  # the per-request patch's
    assert "common_speculative_impl_ngram_copy" in (tree / "common" / "speculative.cpp").read_text()
    assert (tree / "common" / "ngram-copy.cpp").is_file()


def test_without_ngram_copy_when_its_patch_does_not_apply(source, tmp_path):
    line = '    {"ngram-cache",   COMMON_SPECULATIVE_TYPE_NGRAM_CACHE}'
    src = broken_copy(source, tmp_path, "common/speculative.cpp", line)
    done, patched = build(src, tmp_path / "out", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert patched.endswith("DSpine drafter; no weighed copies (their patch did not apply)"), patched
    assert "the ngram-copy patch does not apply to this source; building without it" in done.stdout
    tree = tmp_path / "out" / "src"
    assert "draft-dspine" in (tree / "common" / "speculative.cpp").read_text()
    assert "ngram-copy" not in (tree / "common" / "speculative.cpp").read_text()
    assert not (tree / "common" / "ngram-copy.cpp").exists()  # nothing half applied


def test_only_the_per_request_patch_when_dspines_does_not_apply(source, tmp_path):
    line = '        cb(cur, "l_out", il);'
    src = broken_copy(source, tmp_path, "src/models/dflash.cpp", line)
    done, patched = build(src, tmp_path / "out", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert patched.startswith("patched: per-request draft length") and "no DSpine" in patched
    assert "the DSpine patch does not apply to this source; building without DSpine" in done.stdout
    assert "spec_follow" in (tmp_path / "out" / "src" / "common" / "speculative.cpp").read_text()
    assert "draft-dspine" not in (tmp_path / "out" / "src" / "common" / "speculative.cpp").read_text()


def test_unpatched_when_the_per_request_patch_does_not_apply(source, tmp_path):
    line = "                const llama_token id_sampled = common_sampler_sample(smpl, ctx_dft, i_batch, true);"
    src = broken_copy(source, tmp_path, "common/speculative.cpp", line)
    done, patched = build(src, tmp_path / "out", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert patched == "unpatched: dspine's llama-server patch did not apply"
    assert "draft-dspine" not in (tmp_path / "out" / "src" / "common" / "speculative.cpp").read_text()
