"""Pulls that race each other, and files damaged on disk (issue 14, items 1 and 3)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path

from tests.conftest import DFLASH_REPO, DRAFTER_Q4, DSPINE_REPO, ROOT, TARGET_Q4, TARGET_REPO, dspine_cmd

ROUNDS = 3


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _start(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        dspine_cmd(*args), env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    try:
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    return process.returncode, stderr


def test_two_pulls_of_the_same_model_at_once_give_one_good_file(env, hub, models_dir):
    # Slow enough that the two downloads overlap whichever starts first.
    hub.misbehave.bytes_per_second = 2 * 1024 * 1024
    target = models_dir / TARGET_REPO / TARGET_Q4
    size = len(hub.repos[TARGET_REPO].files[TARGET_Q4])
    for _ in range(ROUNDS):
        for path in models_dir.rglob("*"):
            if path.is_file():
                path.unlink()
        pulls = [_start(env, "pull", "qwen3.8-27b") for _ in range(2)]
        outcomes = [_finish(p) for p in pulls]
        for code, stderr in outcomes:
            assert code == 0, stderr
            assert "unexpected" not in stderr
        assert target.stat().st_size == size
        assert sha(target) == hub.repos[TARGET_REPO].sha256(TARGET_Q4)
        assert not list(models_dir.rglob("*.part"))
        assert any("another dspine pull" in stderr for _, stderr in outcomes)


def test_two_pulls_of_different_models_at_once_both_reach_the_manifest(env, hub, models_dir):
    hub.misbehave.bytes_per_second = 4 * 1024 * 1024
    manifest = models_dir / "manifest.json"
    for _ in range(ROUNDS):
        manifest.unlink(missing_ok=True)
        pulls = [
            _start(env, "pull", "qwen3.8-27b", "--drafter", "dspine-gguf"),
            _start(env, "pull", f"{DFLASH_REPO}:Q4_K_M"),
        ]
        for code, stderr in (_finish(p) for p in pulls):
            assert code == 0, stderr
        records = json.loads(manifest.read_text())["pulls"]
        assert set(records) == {"qwen3.8-27b", f"{DFLASH_REPO}:Q4_K_M"}


def test_a_damaged_file_of_the_right_size_is_rehashed_and_fetched_again(dspine, hub, models_dir):
    assert dspine("pull", "qwen3.8-27b", "--drafter", "dspine-gguf").returncode == 0
    drafter = models_dir / DSPINE_REPO / DRAFTER_Q4
    data = bytearray(drafter.read_bytes())
    data[1000] ^= 0xFF
    drafter.write_bytes(bytes(data))
    hub.reset_counts()
    again = dspine("pull", "qwen3.8-27b", "--drafter", "dspine-gguf")
    assert again.returncode == 0, again.stderr
    assert sha(drafter) == hub.repos[DSPINE_REPO].sha256(DRAFTER_Q4)
    assert hub.served_bytes(DSPINE_REPO) == len(data)
    assert hub.served_bytes(TARGET_REPO) == 0
    assert "failed its checksum" in again.stderr or "damaged" in again.stderr


def test_a_damaged_manifest_is_set_aside_and_pull_records_again(dspine, hub, models_dir):
    assert dspine("pull", "qwen3.8-27b").returncode == 0
    manifest = models_dir / "manifest.json"
    manifest.write_bytes(b'{"version": 1, "pulls": {"qwen3.8-27b": {"na')  # truncated
    listed = dspine("list")
    assert listed.returncode == 0, listed.stderr
    assert "set aside" in listed.stderr
    aside = list(models_dir.glob("manifest.json.damaged-*"))
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b'{"version"')
    hub.reset_counts()
    again = dspine("pull", "qwen3.8-27b")
    assert again.returncode == 0, again.stderr
    assert hub.served_bytes() == 0
    assert "qwen3.8-27b" in json.loads(manifest.read_text())["pulls"]
    assert manifest.stat().st_mode & 0o777 == 0o600


def test_a_frozen_hub_is_an_error_after_the_read_timeout_and_the_pull_resumes(dspine, hub, models_dir):
    hub.misbehave.freeze_after[TARGET_Q4] = 1024 * 1024
    started = time.monotonic()
    frozen = dspine("pull", "qwen3.8-27b", extra_env={"DSPINE_READ_TIMEOUT_S": "1"})
    assert time.monotonic() - started < 30
    assert frozen.returncode == 5, frozen.stderr
    assert "sent nothing for 1 s" in frozen.stderr and TARGET_Q4 in frozen.stderr
    assert "read_timeout_s" in frozen.stderr
    part = models_dir / TARGET_REPO / (TARGET_Q4 + ".part")
    assert part.stat().st_size == 1024 * 1024
    again = dspine("pull", "qwen3.8-27b")
    assert again.returncode == 0, again.stderr
    assert sha(models_dir / TARGET_REPO / TARGET_Q4) == hub.repos[TARGET_REPO].sha256(TARGET_Q4)
