"""Drafters converted from safetensors (DFlash with a sliding layer, DFlash2, DSpark with its
confidence head) load in dspine's pinned llama-server with their --spec-type against a
generated qwen35 target, draft, and leave greedy output token for token plain output."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.hub.convert_run import convert_checkpoint
from backends.llama_server import LlamaServerEngine, ServerConfig
from tests.support.engine_models import HYBRID
from tests.support.gguf_models import write_model
from tests.support.real_models import quantize_binary
from tests.support.safetensors_drafters import Drafter, write_checkpoint

REQUEST = {"prompt": "the cat sat on the", "n_predict": 48, "temperature": 0, "return_tokens": True, "ignore_eos": True}

CASES = [
    ("dflash", "dflash", {"sliding_window": 8}, "draft-dflash"),
    ("dflash2", "dflash", {}, "draft-dflash"),
    ("dspark", "dspark", {}, "draft-dspark"),
    ("dspine", "dspine", {"dspine": {"transfer_rank": 32, "message_size": 8, "top_k": 4}}, "draft-dspine"),
]


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    # Sharp weights: the next token depends strongly on the state, so a wrong rollback shows.
    return write_model(tmp_path_factory.mktemp("target") / "target.gguf", HYBRID, scale=0.2)


def launch(binary: Path, target: Path, log_dir: Path, drafter: Path | None = None, kind: str | None = None):
    config = ServerConfig(
        model=str(target),
        draft_model=str(drafter) if drafter else None,
        drafter_kind=kind,
        n_ctx=1024,
        gpu_layers=0,
        draft_gpu_layers=0,
        n_max=7 if drafter else None,
    )
    return LlamaServerEngine(config, binary=str(binary), log_dir=log_dir).start()


def complete(engine: LlamaServerEngine) -> dict:
    assert engine._running is not None
    response = engine._running.client.post("/completion", json=REQUEST)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture(scope="module")
def plain(patched_server, target, tmp_path_factory) -> list[int]:
    engine = launch(patched_server, target, tmp_path_factory.mktemp("plain"))
    try:
        return complete(engine)["tokens"]
    finally:
        engine.close()


@pytest.mark.parametrize(("family", "kind", "shape", "spec_type"), CASES, ids=[c[0] for c in CASES])
def test_a_converted_drafter_loads_drafts_and_keeps_greedy_output(
    patched_server, target, plain, tmp_path, family, kind, shape, spec_type
):
    drafter = Drafter(family=family, hidden=128, vocab=320, n_head=4, n_head_kv=2, head_dim=32, n_ff=256, **shape)
    folder = write_checkpoint(tmp_path / family, drafter)
    converted = convert_checkpoint(
        folder / "config.json",
        [folder / "model.safetensors"],
        target,
        tmp_path / f"{family}-Q8_0.gguf",
        "Q8_0",
        llama_servers=(quantize_binary().with_name("llama-server"),),
    )
    assert converted.kind == kind
    engine = launch(patched_server, target, tmp_path, converted.path, kind)
    try:
        reply = complete(engine)
        log = engine.log_path.read_text() if engine.log_path else ""
    finally:
        engine.close()
    assert f"--spec-type {spec_type}" in log
    assert len(plain) == REQUEST["n_predict"]
    assert reply["tokens"] == plain
    assert reply["timings"].get("draft_n", 0) > 0, reply["timings"]  # it drafted (and was overruled)


def test_a_dspine_drafter_cut_to_4_bits_keeps_its_code_table_at_q8_0(patched_server, target, plain, tmp_path):
    """The code table is fixed (the drafter was trained against those codes) and only read by id:
    a 4-bit conversion keeps it at Q8_0 while the weights go to Q4_0, and the drafter still runs."""
    from backends.gguf_header import read_local

    dspine = {"transfer_rank": 32, "message_size": 8, "top_k": 4}
    drafter = Drafter(
        family="dspine", hidden=128, vocab=320, n_head=4, n_head_kv=2, head_dim=32, n_ff=256, dspine=dspine
    )
    folder = write_checkpoint(tmp_path / "dspine", drafter)
    converted = convert_checkpoint(
        folder / "config.json",
        [folder / "model.safetensors"],
        target,
        tmp_path / "dspine-Q4_0.gguf",
        "Q4_0",
        llama_servers=(quantize_binary().with_name("llama-server"),),
    )
    types = {t.name: t.type_name for t in read_local(converted.path).tensors}
    assert types["dspine_codes.weight"] == "Q8_0"
    assert types["blk.0.ffn_up.weight"] == "Q4_0"
    engine = launch(patched_server, target, tmp_path, converted.path, "dspine")
    try:
        reply = complete(engine)
    finally:
        engine.close()
    assert reply["tokens"] == plain
