"""The memory model against llama.cpp itself: generated GGUFs loaded for real
through llama-cpp-python, every buffer size it logs compared line by line."""

from __future__ import annotations

import pytest

from app.fit.dryrun import load_report, measure
from app.fit.memory import Runtime, footprint
from app.fit.shape import shape_from_header
from backends.gguf_header import read_local
from tests.support.gguf_models import Shape, write_model

MIB_ROUNDING = 0.006 * 2**20  # llama.cpp prints MiB with two decimals

MODELS = {
    "dense": Shape(arch="llama", n_layer=4, n_embd=256, n_head=8, n_head_kv=8, head_dim=32, n_ff=512, n_vocab=1000),
    "gqa": Shape(arch="llama", n_layer=4, n_embd=256, n_head=8, n_head_kv=2, head_dim=32, n_ff=512, n_vocab=1000),
    "hybrid": Shape(
        arch="qwen35",
        n_layer=4,
        n_embd=256,
        n_head=4,
        n_head_kv=2,
        head_dim=64,
        n_ff=512,
        n_vocab=1000,
        full_attention_interval=2,
        ssm_state_size=32,
        ssm_group_count=4,
        ssm_time_step_rank=8,
    ),
}


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    return {name: write_model(folder / f"{name}.gguf", shape) for name, shape in MODELS.items()}


@pytest.mark.parametrize("kv", ["f16", "q8_0", "q4_0"])
@pytest.mark.parametrize("name", list(MODELS))
def test_weights_kv_and_recurrent_state_match_llama_cpp(model_files, name, kv):
    path = model_files[name]
    shape = shape_from_header(read_local(path))
    for n_ctx in (2048, 5000):
        report = load_report(path, n_ctx, kv, kv)
        assert report is not None, "llama.cpp did not load the model"
        ours = footprint(shape, Runtime(n_ctx=n_ctx, type_k=kv, type_v=kv))
        assert abs(sum(report["kv"].values()) - (ours.kv.gpu + ours.kv.cpu)) <= MIB_ROUNDING
        assert abs(sum(report["rs"].values()) - (ours.recurrent.gpu + ours.recurrent.cpu)) <= MIB_ROUNDING
        # Weights: llama.cpp pads each tensor to its alignment; allow that, nothing more.
        loaded = sum(report["model"].values())
        assert 0 <= loaded - shape.total_weight_bytes <= 64 * len(read_local(path).tensors) + MIB_ROUNDING
    if name == "hybrid":
        assert ours.recurrent.gpu > 0 and len(shape.kv_layers) == 2


@pytest.mark.parametrize("name", list(MODELS))
def test_dry_run_compute_equals_a_real_load(model_files, name):
    path = model_files[name]
    curve = measure(path, [2048, 8192])
    assert curve is not None
    for n_ctx, measured in curve.points:
        real = load_report(path, n_ctx)
        assert real is not None
        assert abs(sum(real["compute"].values()) - measured) <= MIB_ROUNDING
