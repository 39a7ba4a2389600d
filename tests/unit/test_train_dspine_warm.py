"""The trainer goes on from a converted drafter (issue 70): `train --init-from` reads dspine's
converter's GGUF back under the reference's state-dict names, so what a session trained and
shipped is where the next one starts. No JAX: numpy and gguf."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from app.hub.convert_run import convert_checkpoint
from app.hub.safetensors import load, read_header
from tests.unit.test_convert import GOLDEN, golden_copy, golden_target

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from train_dspine.warm import NotThisDrafter, gguf_name, params_from_gguf

SHIPPED = Path(__file__).resolve().parents[2] / "assets" / "drafters" / "smollm2-135m-dspine.Q8_0.gguf"


def reference_tensors() -> dict[str, np.ndarray]:
    """The authors' own DSpine checkpoint (SpecForge's state dict, 2 layers)."""
    return {n: load(i) for n, i in read_header(GOLDEN / "model.safetensors").items() if n != "transfer_ready"}


def test_the_references_checkpoint_converted_reads_back_as_it_was(tmp_path):
    source = reference_tensors()
    codes = source.pop("transfer_codes")
    folder = golden_copy(tmp_path)
    out = tmp_path / "drafter.gguf"
    convert_checkpoint(folder / "config.json", [folder / "model.safetensors"], golden_target(tmp_path / "t.gguf"),
                       out, "F32")  # fmt: skip
    params, read_codes = params_from_gguf(out, {n: v.shape for n, v in source.items()})
    assert sorted(params) == sorted(source)
    for name, values in source.items():
        assert params[name].dtype == np.float32
        assert np.array_equal(params[name], values), name  # F32 in, F32 out: bit for bit
    assert read_codes is not None and np.array_equal(read_codes, codes)


def test_a_drafter_of_another_shape_is_refused_by_name(tmp_path):
    source = reference_tensors()
    source.pop("transfer_codes")
    folder = golden_copy(tmp_path)
    out = tmp_path / "drafter.gguf"
    convert_checkpoint(folder / "config.json", [folder / "model.safetensors"], golden_target(tmp_path / "t.gguf"),
                       out, "F32")  # fmt: skip
    wanted = {n: v.shape for n, v in source.items()}
    wanted["injection.writes.1.weight"] = (64, 9)
    wanted["layers.2.mlp.up_proj.weight"] = (128, 64)
    with pytest.raises(NotThisDrafter) as caught:
        params_from_gguf(out, wanted)
    said = str(caught.value)
    assert "blk.1.dspine_write.weight (injection.writes.1.weight)" in said and "the trainer's is [64, 9]" in said
    assert "blk.2.ffn_up.weight (layers.2.mlp.up_proj.weight): missing" in said


def test_the_shipped_drafter_is_a_start_the_trainer_can_take():
    """Every tensor of the shipped Q8_0 file but the code table is one of the trainer's (13.04M
    values), and the table is 49,152 x 256 unit rows, as the trainer made it."""
    names = [
        f"layers.{i}.{part}"
        for i in range(3)
        for part in (
            "input_layernorm.weight",
            "self_attn.q_proj.weight",
            "self_attn.k_proj.weight",
            "self_attn.v_proj.weight",
            "self_attn.o_proj.weight",
            "self_attn.q_norm.weight",
            "self_attn.k_norm.weight",
            "post_attention_layernorm.weight",
            "mlp.gate_proj.weight",
            "mlp.up_proj.weight",
            "mlp.down_proj.weight",
        )
    ]
    names += [f"injection.{kind}.{i}.weight" for i in range(3) for kind in ("readouts", "writes")]
    names += ["fc.weight", "hidden_norm.weight", "norm.weight", "injection.message.weight",
              "injection.receiver_gate.weight", "injection.predecessor_gate.weight", "injection.bias"]  # fmt: skip
    from gguf import GGUFReader

    shapes = {t.name: tuple(int(d) for d in reversed(t.shape)) for t in GGUFReader(SHIPPED).tensors}
    assert sorted(shapes) == sorted([gguf_name(n) for n in names] + ["dspine_codes.weight"])
    params, codes = params_from_gguf(SHIPPED, {n: shapes[gguf_name(n)] for n in names})
    assert round(sum(v.size for v in params.values()) / 1e6, 2) == 13.04
    assert codes is not None and codes.shape == (49152, 256)
    assert np.allclose(np.linalg.norm(codes, axis=1), 1.0, atol=0.01)
    assert all(np.isfinite(v).all() for v in params.values())
