"""`dspine pull qwen3.8-27b --drafter dspark`: a drafter published only as safetensors,
downloaded from a hub on 127.0.0.1, converted here to one verified GGUF, known to
`list` and `rm`; killed mid-download and mid-conversion, it resumes and ends the same."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, TARGET_Q4, TARGET_REPO, dspine_cmd, wait_for
from tests.support.gguf_models import Shape, write_model
from tests.support.safetensors_drafters import Drafter, write_checkpoint

DSPARK_REPO = "RadixArk/Qwen3.8-27B-DSpark"
CONVERTED = "Qwen3.8-27B-DSpark-Q8_0.gguf"
TARGET = Shape(arch="qwen35", n_layer=4, n_embd=64, n_head=4, n_head_kv=2, head_dim=16, n_ff=128)


def checkpoint_files(folder: Path, drafter: Drafter) -> dict[str, bytes]:
    write_checkpoint(folder, drafter)
    return {name: (folder / name).read_bytes() for name in ("config.json", "model.safetensors")}


@pytest.fixture
def dspark_hub(hub, tmp_path):
    """The test hub with a real (generated) qwen35 target and DSpark's safetensors checkpoint:
    a wide FFN (about 25 MB) so that a conversion lasts long enough to be killed midway."""
    target = write_model(tmp_path / "target.gguf", TARGET)
    hub.repos[TARGET_REPO].files[TARGET_Q4] = target.read_bytes()
    drafter = Drafter(family="dspark", hidden=64, vocab=300, n_ff=49152)
    hub.add_repo(DSPARK_REPO, {**checkpoint_files(tmp_path / "dspark", drafter), "README.md": b"# DSpark\n"})
    return hub


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pulled(dspine) -> dict:
    listed = dspine("list", "--json")
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)["pulls"]["qwen3.8-27b"]


def test_pull_converts_the_safetensors_drafter_to_one_verified_gguf(dspine, dspark_hub, models_dir):
    result = dspine("pull", "qwen3.8-27b", "--drafter", "dspark")
    assert result.returncode == 0, result.stderr
    folder = models_dir / DSPARK_REPO
    gguf = folder / CONVERTED
    # The disk it needs, said before the first byte; the conversion's stages shown.
    assert "converted here from safetensors to Q8_0: this pull needs" in result.stderr
    assert "to download" in result.stderr and "while converting" in result.stderr
    assert "drafter converting" in result.stderr and "drafter quantizing to Q8_0" in result.stderr
    assert "converted here, read back, sha256 recorded" in result.stdout
    # One GGUF is left: the checkpoint and every staging file are gone.
    assert sorted(p.name for p in folder.iterdir() if not p.name.endswith(".lock")) == [CONVERTED]
    assert gguf.read_bytes()[:4] == b"GGUF"

    entry = pulled(dspine)
    assert entry["status"] == "complete" and entry["drafter_kind"] == "dspark"
    drafter = next(f for f in entry["files"] if f["role"] == "drafter")
    assert drafter["local"] == str(gguf) and drafter["size"] == gguf.stat().st_size
    assert drafter["sha256"] == sha(gguf)
    assert [f["role"] for f in entry["files"]] == ["target", "drafter"]

    # Pulled again: nothing fetched, nothing converted; the GGUF is checked against its sha256.
    dspark_hub.reset_counts()
    again = dspine("pull", "qwen3.8-27b", "--drafter", "dspark")
    assert again.returncode == 0, again.stderr
    assert dspark_hub.served_bytes() == 0
    assert "converted here from safetensors" not in again.stderr
    assert "already here" in again.stderr

    removed = dspine("rm", "qwen3.8-27b", "--yes")
    assert removed.returncode == 0, removed.stderr
    assert not gguf.exists()
    assert "nothing pulled yet" in dspine("list").stdout


def test_keep_safetensors_keeps_the_checkpoint_recorded(dspine, dspark_hub, models_dir):
    result = dspine("pull", "qwen3.8-27b", "--drafter", "dspark", "--keep-safetensors")
    assert result.returncode == 0, result.stderr
    entry = pulled(dspine)
    assert [f["role"] for f in entry["files"]] == ["target", "drafter", "source", "source"]
    kept = {Path(f["local"]).name for f in entry["files"] if f["role"] == "source"}
    assert kept == {"config.json", "model.safetensors"}
    assert all(f["status"] == "complete" for f in entry["files"])
    assert (models_dir / DSPARK_REPO / "model.safetensors").exists()
    assert dspine("list", "--json").stdout.count('"orphans": []') == 1

    wrong = dspine("pull", "qwen3.8-27b", "--drafter", "dflash2-q4", "--keep-safetensors")
    assert wrong.returncode == 2 and "--keep-safetensors only applies" in wrong.stderr


def _pull_killed_when(env, ready) -> None:
    process = subprocess.Popen(
        dspine_cmd("pull", "qwen3.8-27b", "--drafter", "dspark"),
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: ready() or process.poll() is not None, timeout=60, what="the moment to kill the pull")
        assert process.poll() is None, "the pull ended before it could be killed"
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()


def test_killed_mid_download_and_mid_conversion_the_pull_resumes_to_one_verified_gguf(
    env, dspine, dspark_hub, models_dir, tmp_path
):
    folder = models_dir / DSPARK_REPO
    shards = folder / "model.safetensors"
    gguf = folder / CONVERTED
    size = len(dspark_hub.repos[DSPARK_REPO].files["model.safetensors"])

    # Killed while the checkpoint downloads: the .part is kept, as for any pull.
    dspark_hub.misbehave.bytes_per_second = 8 * 2**20
    part = folder / "model.safetensors.part"
    _pull_killed_when(env, lambda: part.exists() and part.stat().st_size >= 2**20)
    have = part.stat().st_size
    assert 0 < have < size
    assert not gguf.exists()
    assert pulled(dspine)["status"] == "partial"

    # Killed while converting: the checkpoint is whole, the GGUF only a staging file.
    dspark_hub.misbehave.bytes_per_second = None
    dspark_hub.reset_counts()
    staging = (folder / (CONVERTED + ".part"), folder / (CONVERTED + ".quant.part"))
    _pull_killed_when(env, lambda: any(p.exists() for p in staging))
    assert dspark_hub.served_bytes(DSPARK_REPO, "model.safetensors") == size - have  # only the rest
    assert sha(shards) == dspark_hub.repos[DSPARK_REPO].sha256("model.safetensors")
    assert not gguf.exists()  # never half a GGUF under its final name
    listed = pulled(dspine)
    assert listed["status"] == "partial"
    assert not any(o["file"] == CONVERTED for o in json.loads(dspine("list", "--json").stdout)["orphans"])

    # Resumed: nothing fetched again, converted from the start, one verified GGUF.
    dspark_hub.reset_counts()
    result = dspine("pull", "qwen3.8-27b", "--drafter", "dspark")
    assert result.returncode == 0, result.stderr
    assert dspark_hub.served_bytes(DSPARK_REPO) == 0
    assert sorted(p.name for p in folder.iterdir() if not p.name.endswith(".lock")) == [CONVERTED]
    entry = pulled(dspine)
    assert entry["status"] == "complete"
    assert next(f for f in entry["files"] if f["role"] == "drafter")["sha256"] == sha(gguf)
    # Byte for byte what a conversion never stopped makes of the same checkpoint and target.
    assert sha(gguf) == sha(uninterrupted(dspark_hub, models_dir, tmp_path / "uninterrupted", gguf.stem))


def uninterrupted(hub, models_dir: Path, folder: Path, name: str) -> Path:
    from app.hub.convert_run import convert_checkpoint
    from tests.support.real_models import quantize_binary

    folder.mkdir()
    for file in ("config.json", "model.safetensors"):
        (folder / file).write_bytes(hub.repos[DSPARK_REPO].files[file])
    target = models_dir / TARGET_REPO / TARGET_Q4
    servers = (quantize_binary().with_name("llama-server"),)
    out = folder / CONVERTED
    convert_checkpoint(folder / "config.json", [folder / "model.safetensors"], target, out, "Q8_0", servers, name=name)
    return out


def test_a_checkpoint_the_converter_refuses_leaves_nothing_half_written(dspine, dspark_hub, models_dir, tmp_path):
    files = checkpoint_files(tmp_path / "odd", Drafter(family="dspark", hidden=64, vocab=300))
    config = json.loads(files["config.json"])
    config["markov_temperature"] = 0.5
    dspark_hub.repos[DSPARK_REPO].files["config.json"] = json.dumps(config).encode()
    dspark_hub.repos[DSPARK_REPO].files["model.safetensors"] = files["model.safetensors"]
    result = dspine("pull", "qwen3.8-27b", "--drafter", "dspark")
    assert result.returncode == 12
    assert "fields the converter does not know: markov_temperature" in result.stderr
    assert "nothing was written" in result.stderr and "Traceback" not in result.stderr
    folder = models_dir / DSPARK_REPO
    assert not [p for p in folder.glob("*.gguf*") if not p.name.endswith(".lock")]
    # The checkpoint stays (verified), so a fixed dspine converts it without fetching it again.
    assert (folder / "model.safetensors").exists()
