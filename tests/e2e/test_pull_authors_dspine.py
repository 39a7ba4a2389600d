"""`dspine pull qwen3.8-27b`: the authors' DSpine checkpoint (issue 67), a generated one in the
reference's own layout (SpecForge's DSpineDraftModel, the golden checkpoint), served by the
hub on 127.0.0.1 under Tencent's repository name, downloaded and converted here: BF16 as it
is, Q4_K_M with its code table kept at Q8_0; both layouts (the code table in the model file,
or only in transfer.safetensors). A second pull fetches and converts nothing."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import pytest

from tests.conftest import TARGET_Q4, TARGET_REPO
from tests.unit.test_convert import golden_target

AUTHORS = "tencent/Qwen3.8-27B-DSpine-b16"


def checkpoint(folder: Path, codes_in_model: bool) -> dict[str, bytes]:
    from tests.unit.test_convert import golden_copy

    made = golden_copy(folder, codes_in_model=codes_in_model, codes_file=True)
    return {p.name: p.read_bytes() for p in made.iterdir() if p.is_file()}


@pytest.fixture
def authors_hub(hub, tmp_path):
    target = golden_target(tmp_path / "target.gguf")
    hub.repos[TARGET_REPO].files[TARGET_Q4] = target.read_bytes()
    hub.add_repo(AUTHORS, {**checkpoint(tmp_path / "ckpt", codes_in_model=False), "README.md": b"# DSpine\n"})
    return hub


def reader_types(path: Path) -> dict[str, str]:
    return {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(path)).tensors}


@pytest.mark.parametrize(("variant", "quant"), [("dspine-bf16", "BF16"), ("dspine", "Q4_K_M"), ("dspine-q8", "Q8_0")])
def test_pull_converts_the_authors_checkpoint(dspine, authors_hub, models_dir, variant, quant):
    result = dspine("pull", "qwen3.8-27b", "--drafter", variant, timeout=300)
    assert result.returncode == 0, result.stderr
    converted = models_dir / AUTHORS / f"Qwen3.8-27B-DSpine-b16-{quant}.gguf"
    assert converted.is_file(), sorted(p.name for p in (models_dir / AUTHORS).iterdir())
    assert "converted here, read back, sha256 recorded" in result.stdout
    assert "converting holds up to" in result.stderr and "of memory (" in result.stderr  # said, with the bars
    types = reader_types(converted)
    assert "dspine_codes.weight" in types and "blk.1.dspine_readout.weight" in types
    if quant == "BF16":
        # Not quantized: the checkpoint's half type (the generated one is F32, so F16; Tencent's is BF16).
        assert types["blk.0.attn_q.weight"] in ("BF16", "F16")
    else:
        # The code table is not cut below 8 bits (its rows of 16 here are too short for Q8_0's
        # blocks of 32, so llama-quantize keeps F16); the weights are quantized (rows of 64 are
        # too short for k-quants: llama-quantize falls back to Q5_0 and Q8_0).
        assert types["dspine_codes.weight"] in ("Q8_0", "F16", "BF16")
        assert {"Q5_0", "Q8_0"} & set(types.values()) and types["blk.0.attn_q.weight"] not in ("F16", "BF16")
    listed = json.loads(dspine("list", "--json").stdout)["pulls"]["qwen3.8-27b"]
    assert listed["status"] == "complete" and listed["drafter_kind"] == "dspine"
    authors_hub.reset_counts()
    again = dspine("pull", "qwen3.8-27b", "--drafter", variant)
    assert again.returncode == 0 and authors_hub.served_bytes() == 0
    assert "converted here from safetensors" not in again.stderr


def test_on_dspines_llama_server_the_plain_pull_takes_the_authors_checkpoint_and_doctor_passes(
    dspine, authors_hub, models_dir, patched_server
):
    """No --drafter: the recommendation on dspine's patched server is the authors' DSpine,
    converted here; doctor reads the converted file and says the server here runs it."""
    here = {"DSPINE_LLAMA_SERVER": str(patched_server)}
    result = dspine("pull", "qwen3.8-27b", extra_env=here, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "drafter dspine: DSpine: the llama-server found here runs it, --spec-type draft-dspine" in (
        result.stdout + result.stderr
    )
    assert (models_dir / AUTHORS / "Qwen3.8-27B-DSpine-b16-Q4_K_M.gguf").is_file()
    assert authors_hub.served_bytes("aj9o9/Qwen3.8-27B-DSpine-b16-GGUF") == 0  # the community file is not fetched
    doctor = dspine("doctor", "--model", "qwen3.8-27b", "--json", "--quick", extra_env=here)
    checks = {c["name"]: c for c in json.loads(doctor.stdout)}
    file_check = checks["drafter file of qwen3.8-27b"]
    assert file_check["ok"] and "runs it (--spec-type draft-dspine)" in file_check["detail"], file_check
    assert checks["drafter for qwen3.8-27b"]["ok"]
