"""`dspine pull` end to end against a hub served on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import DRAFTER_Q4, DSPINE_REPO, ROOT, TARGET_Q4, TARGET_REPO, dspine_cmd, wait_for
from tests.support.signals import default_sigint


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_pull_bundle_fetches_target_and_drafter_and_verifies(dspine, hub, models_dir):
    result = dspine("pull", "qwen3.8-27b", "--drafter", "dspine-gguf")
    assert result.returncode == 0, result.stderr
    target = models_dir / TARGET_REPO / TARGET_Q4
    drafter = models_dir / DSPINE_REPO / DRAFTER_Q4
    assert sha(target) == hub.repos[TARGET_REPO].sha256(TARGET_Q4)
    assert sha(drafter) == hub.repos[DSPINE_REPO].sha256(DRAFTER_Q4)
    # The plain Q4_K_M file, not the UD variant, the Q8_0 or the projector.
    assert hub.served_bytes(TARGET_REPO) == target.stat().st_size
    assert hub.served_bytes(DSPINE_REPO) == drafter.stat().st_size
    assert "pulled qwen3.8-27b (Q4_K_M, drafter dspine-gguf (dspine))" in result.stdout
    assert not list(models_dir.rglob("*.part"))

    hub.reset_counts()
    again = dspine("pull", "qwen3.8-27b", "--drafter", "dspine-gguf")
    assert again.returncode == 0, again.stderr
    assert hub.served_bytes() == 0
    assert "already here" in again.stderr


def test_pull_repo_ref_with_quant(dspine, hub, models_dir):
    result = dspine("pull", f"{TARGET_REPO}:q8_0")
    assert result.returncode == 0, result.stderr
    assert (models_dir / TARGET_REPO / "Qwen3.8-27B-Q8_0.gguf").exists()
    assert hub.served_bytes(TARGET_REPO) == 8192
    assert hub.served_bytes(DSPINE_REPO) == 0


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
def test_interrupted_pull_resumes_with_only_the_missing_bytes(env, dspine, hub, models_dir, how):
    size = len(hub.repos[TARGET_REPO].files[TARGET_Q4])
    hub.misbehave.bytes_per_second = 1024 * 1024  # a 3 MiB file takes about 3 s
    part = models_dir / TARGET_REPO / (TARGET_Q4 + ".part")
    process = subprocess.Popen(
        dspine_cmd("pull", "qwen3.8-27b"),
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        wait_for(lambda: part.exists() and part.stat().st_size >= 1024 * 1024, what="a partial download")
        process.send_signal(how)
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    if how == signal.SIGINT:
        assert process.returncode == 130
        assert "interrupted" in stderr and "again" in stderr
    else:
        assert process.returncode == -signal.SIGKILL
    have = part.stat().st_size
    assert 0 < have < size

    listed = dspine("list", "--json")
    entry = json.loads(listed.stdout)["pulls"]["qwen3.8-27b"]
    assert entry["status"] == "partial"

    hub.misbehave.bytes_per_second = None
    hub.reset_counts()
    result = dspine("pull", "qwen3.8-27b")
    assert result.returncode == 0, result.stderr
    assert hub.served_bytes(TARGET_REPO, TARGET_Q4) == size - have
    ranges = [r for method, path, r in hub.requests if path.endswith(TARGET_Q4) and method == "GET"]
    assert ranges == [f"bytes={have}-"]
    assert sha(models_dir / TARGET_REPO / TARGET_Q4) == hub.repos[TARGET_REPO].sha256(TARGET_Q4)
    assert "resuming" in result.stderr


def test_dropped_connection_is_resumed_in_the_same_run(dspine, hub, models_dir):
    size = len(hub.repos[TARGET_REPO].files[TARGET_Q4])
    hub.misbehave.drop_after[TARGET_Q4] = 1_000_000
    result = dspine("pull", "qwen3.8-27b")
    assert result.returncode == 0, result.stderr
    assert hub.served_bytes(TARGET_REPO, TARGET_Q4) == size
    gets = [r for method, path, r in hub.requests if path.endswith(TARGET_Q4) and method == "GET"]
    assert gets == [None, "bytes=1000000-"]


def test_server_ignoring_range_restarts_the_file_and_still_verifies(dspine, hub, models_dir):
    hub.misbehave.drop_after[TARGET_Q4] = 100_000
    hub.misbehave.ignore_range = True
    result = dspine("pull", "qwen3.8-27b")
    assert result.returncode == 0, result.stderr
    assert sha(models_dir / TARGET_REPO / TARGET_Q4) == hub.repos[TARGET_REPO].sha256(TARGET_Q4)


def test_corrupted_byte_is_caught_set_aside_and_refetched(dspine, hub, models_dir):
    hub.misbehave.corrupt_at[DRAFTER_Q4] = 4242
    result = dspine("pull", "qwen3.8-27b", "--drafter", "dspine-gguf")
    assert result.returncode == 7
    assert "failed its checksum" in result.stderr
    assert "set aside" in result.stderr
    final = models_dir / DSPINE_REPO / DRAFTER_Q4
    assert not final.exists()
    assert (final.parent / (DRAFTER_Q4 + ".corrupt")).exists()
    assert "Traceback" not in result.stderr

    hub.misbehave.corrupt_at.clear()
    again = dspine("pull", "qwen3.8-27b", "--drafter", "dspine-gguf")
    assert again.returncode == 0, again.stderr
    assert sha(final) == hub.repos[DSPINE_REPO].sha256(DRAFTER_Q4)


def test_missing_repository(dspine):
    result = dspine("pull", "nobody/Nothing-GGUF")
    assert result.returncode == 3
    assert "nobody/Nothing-GGUF was not found" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_quant_lists_what_the_repository_has(dspine):
    result = dspine("pull", f"{TARGET_REPO}:Q3_K_S")
    assert result.returncode == 3
    assert "has no Q3_K_S file" in result.stderr
    assert "Q4_K_M" in result.stderr and "Q8_0" in result.stderr


def test_catalog_pattern_matching_nothing_lists_the_files(dspine, hub):
    del hub.repos[DSPINE_REPO].files[DRAFTER_Q4]
    result = dspine("pull", "qwen3.8-27b", "--drafter", "dspine-gguf")
    assert result.returncode == 3
    assert "no file in aj9o9/Qwen3.8-27B-DSpine-b16-GGUF matches" in result.stderr
    assert "Qwen3.8-27B-DSpine-b16-BF16.gguf" in result.stderr


def test_unknown_name_suggests_close_matches(dspine):
    result = dspine("pull", "qwen3.8-72b")
    assert result.returncode == 2
    assert "unknown model 'qwen3.8-72b'" in result.stderr
    assert "did you mean qwen3.8-27b" in result.stderr


def test_full_disk_is_refused_before_the_first_byte(dspine, hub):
    hub.misbehave.listed_size[TARGET_Q4] = 1 << 60
    result = dspine("pull", "qwen3.8-27b")
    assert result.returncode == 6
    assert "missing" in result.stderr and "DSPINE_MODELS_DIR" in result.stderr
    assert hub.served_bytes() == 0


def test_disk_filling_up_mid_download_keeps_what_arrived(dspine, hub, models_dir):
    """A .part that is really /dev/full: every write fails with ENOSPC."""
    target = models_dir / TARGET_REPO / TARGET_Q4
    target.parent.mkdir(parents=True)
    repo = hub.repos[TARGET_REPO]
    meta = {
        "repo": TARGET_REPO,
        "path": TARGET_Q4,
        "size": len(repo.files[TARGET_Q4]),
        "sha256": repo.sha256(TARGET_Q4),
    }
    (target.parent / (TARGET_Q4 + ".part.json")).write_text(json.dumps(meta))
    os.symlink("/dev/full", target.parent / (TARGET_Q4 + ".part"))
    result = dspine("pull", "qwen3.8-27b")
    assert result.returncode == 6
    assert "is full" in result.stderr and "resumes" in result.stderr
    assert "Traceback" not in result.stderr


def test_gated_repository_needs_a_token(dspine, hub, models_dir):
    hub.repos[TARGET_REPO].gated = True
    result = dspine("pull", "qwen3.8-27b")
    assert result.returncode == 4
    assert "gated" in result.stderr and "HF_TOKEN" in result.stderr
    ok = dspine("pull", "qwen3.8-27b", extra_env={"HF_TOKEN": hub.TOKEN})
    assert ok.returncode == 0, ok.stderr
    assert (models_dir / TARGET_REPO / TARGET_Q4).exists()


def test_no_network(dspine):
    result = dspine("pull", "qwen3.8-27b", extra_env={"HF_ENDPOINT": "http://127.0.0.1:9"})
    assert result.returncode == 5
    assert "cannot reach the hub" in result.stderr


def test_offline_with_nothing_on_disk_then_with_a_complete_pull(dspine, hub):
    offline = {"HF_HUB_OFFLINE": "1"}
    result = dspine("pull", "qwen3.8-27b", extra_env=offline)
    assert result.returncode == 5
    assert "offline mode is on" in result.stderr
    assert dspine("pull", "qwen3.8-27b").returncode == 0
    hub.reset_counts()
    again = dspine("pull", "qwen3.8-27b", extra_env=offline)
    assert again.returncode == 0, again.stderr
    assert "already complete on disk" in again.stdout
    assert hub.requests == []


def test_file_in_the_hf_cache_is_used_not_fetched(dspine, hub, env, models_dir):
    from huggingface_hub import hf_hub_download

    cached = hf_hub_download(TARGET_REPO, TARGET_Q4, endpoint=hub.url, cache_dir=Path(env["HF_HOME"]) / "hub")
    hub.reset_counts()
    result = dspine("pull", "qwen3.8-27b")
    assert result.returncode == 0, result.stderr
    assert hub.served_bytes(TARGET_REPO) == 0
    assert "in your HF cache" in result.stderr
    assert not (models_dir / TARGET_REPO / TARGET_Q4).exists()
    listed = json.loads(dspine("list", "--json").stdout)["pulls"]["qwen3.8-27b"]
    target = next(f for f in listed["files"] if f["role"] == "target")
    assert target["local"] == cached and target["status"] == "complete"

    removed = dspine("rm", "qwen3.8-27b", "--yes")
    assert removed.returncode == 0
    assert Path(cached).exists()  # shared with other tools: never deleted by dspine


def test_offline_pull_of_a_repository_in_the_hf_cache(dspine, hub, env, models_dir):
    from huggingface_hub import hf_hub_download

    cache = Path(env["HF_HOME"]) / "hub"
    cached = hf_hub_download(TARGET_REPO, "Qwen3.8-27B-Q8_0.gguf", endpoint=hub.url, cache_dir=cache)
    hub.reset_counts()
    result = dspine("pull", f"{TARGET_REPO}:Q8_0", extra_env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr
    assert hub.requests == []
    listed = json.loads(dspine("list", "--json").stdout)["pulls"][f"{TARGET_REPO}:Q8_0"]
    assert listed["files"][0]["local"] == cached and listed["status"] == "complete"
    missing = dspine("pull", f"{TARGET_REPO}:Q4_K_M", extra_env={"HF_HUB_OFFLINE": "1"})
    assert missing.returncode == 5
    assert "offline mode is on" in missing.stderr and "has no Q4_K_M file" in missing.stderr
