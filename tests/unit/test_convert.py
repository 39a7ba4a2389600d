"""The safetensors -> GGUF converter for block drafters: upstream's keys and names, DSpine's
table, and every refusal before a byte is written (app/hub/convert.py, convert_run.py)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections import namedtuple
from pathlib import Path

import gguf
import numpy as np
import pytest

from app.errors import ConversionError, DiskFullError
from app.hub import convert
from app.hub.convert_run import (
    ConvertProgress,
    _read_target,
    convert_checkpoint,
    needed_bytes,
    prepare,
    verify,
    write_stage,
)
from app.hub.safetensors import load, read_header
from tests.support.gguf_models import Shape, write_model
from tests.support.safetensors_drafters import Drafter, config, tensor_shapes, write_checkpoint, write_safetensors

TARGET = Shape(arch="qwen35", n_layer=4, n_embd=64, n_head=4, n_head_kv=2, head_dim=16, n_ff=128)


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    return write_model(tmp_path_factory.mktemp("target") / "target.gguf", TARGET)


def convert_to_bf16(tmp_path: Path, target: Path, drafter: Drafter) -> gguf.GGUFReader:
    folder = write_checkpoint(tmp_path / drafter.family, drafter)
    out = tmp_path / f"{drafter.family}.gguf"
    convert_checkpoint(folder / "config.json", [folder / "model.safetensors"], target, out, "BF16")
    return gguf.GGUFReader(out)


def field(reader: gguf.GGUFReader, name: str):
    return reader.fields[name].contents()


def test_dflash_with_a_sliding_layer_gets_upstreams_keys_and_names(tmp_path, target):
    reader = convert_to_bf16(tmp_path, target, Drafter(family="dflash", sliding_window=8))
    assert field(reader, "general.architecture") == "dflash"
    assert field(reader, "dflash.target_layers") == [1, 2, 3]  # HF ids + 1: the layer inputs
    assert field(reader, "dflash.block_size") == 16
    assert field(reader, "dflash.attention.sliding_window") == 8
    assert field(reader, "dflash.attention.sliding_window_pattern") == [True, False]
    assert field(reader, "tokenizer.ggml.mask_token_id") == 261
    assert field(reader, "dflash.rope.dimension_sections") == [8, 0, 0, 0]  # the target ropes in sections
    # The tokenizer is the target's, token for token.
    target_reader = gguf.GGUFReader(target)
    assert field(reader, "tokenizer.ggml.tokens") == field(target_reader, "tokenizer.ggml.tokens")
    assert field(reader, "tokenizer.ggml.merges") == field(target_reader, "tokenizer.ggml.merges")
    tensors = {t.name: t for t in reader.tensors}
    assert {"fc.weight", "enc.output_norm.weight", "output_norm.weight", "blk.1.attn_q.weight"} <= set(tensors)
    assert tensors["blk.0.attn_q.weight"].tensor_type == gguf.GGMLQuantizationType.BF16
    assert tensors["blk.0.attn_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32  # norms stay F32
    assert list(tensors["fc.weight"].shape) == [3 * 64, 64]  # ggml order {n_taps x n_embd, n_embd}


def test_the_values_arrive_unchanged(tmp_path, target):
    drafter = Drafter(family="dflash")
    reader = convert_to_bf16(tmp_path, target, drafter)
    header = read_header(tmp_path / "dflash" / "model.safetensors")
    fc = {t.name: t for t in reader.tensors}["fc.weight"]
    written = np.asarray(fc.data).reshape(-1).view(np.uint16)  # BF16 bit patterns, as they were
    assert np.array_equal(written, load(header["fc.weight"]).reshape(-1))


def test_dflash2_and_dspark_carry_their_heads(tmp_path, target):
    dflash2 = convert_to_bf16(tmp_path, target, Drafter(family="dflash2"))
    names = {t.name for t in dflash2.tensors}
    assert {"selector_hidden.weight", "blk.0.attn_conv_base", "blk.1.ffn_conv_proj.weight"} <= names
    assert field(dflash2, "dflash.selector_top_k") == 4 and field(dflash2, "dflash.conv_kernel_size") == 4
    conv_base = {t.name: t for t in dflash2.tensors}["blk.0.attn_conv_base"]
    assert conv_base.tensor_type == gguf.GGMLQuantizationType.F32  # not named .weight: F32, as upstream

    dspark = convert_to_bf16(tmp_path, target, Drafter(family="dspark"))
    names = {t.name for t in dspark.tensors}
    assert {"markov_w1.weight", "markov_w2.weight", "conf_proj.weight", "conf_proj.bias"} <= names
    assert field(dspark, "dflash.has_confidence_head") is True
    assert field(dspark, "dflash.sample_from_anchor") is True

    plain = convert_to_bf16(tmp_path / "plain", target, Drafter(family="dspark", confidence_head=False))
    assert field(plain, "dflash.has_confidence_head") is False


GOLDEN = Path(__file__).resolve().parents[1] / "engines" / "golden" / "dspine" / "ckpt-s0-b16"

# SpecForge's names -> the GGUF's (the golden checkpoint: 2 layers).
DSPINE_NAMES = {
    "injection.message.weight": "dspine_message.weight",
    "injection.receiver_gate.weight": "dspine_receiver_gate.weight",
    "injection.predecessor_gate.weight": "dspine_predecessor_gate.weight",
    "injection.bias": "dspine_gate.bias",
    "transfer_codes": "dspine_codes.weight",
} | {
    f"injection.{lists}.{il}.weight": f"blk.{il}.dspine_{one}.weight"
    for il in (0, 1)
    for lists, one in (("readouts", "readout"), ("writes", "write"))
}


def golden_target(path: Path, n_vocab: int = 256, n_embd: int = 64, n_layer: int = 4) -> Path:
    """A header-only target for the golden drafter: vocabulary 256, hidden 64 (gguf_models'
    vocabulary has at least 266 tokens)."""
    writer = gguf.GGUFWriter(str(path), "qwen3")
    writer.add_block_count(n_layer)
    writer.add_embedding_length(n_embd)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([f"t{i}" for i in range(n_vocab)])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    return path


def golden_copy(tmp_path: Path, codes_in_model: bool = True, codes_file: bool = True) -> Path:
    """The golden folder, or its independent layout (transfer_codes only in transfer.safetensors)."""
    folder = tmp_path / "ckpt"
    shutil.copytree(GOLDEN, folder)
    if not codes_file:
        (folder / "transfer.safetensors").unlink()
    if not codes_in_model:
        from app.hub.safetensors import read_header as header_of

        kept = {
            n: (i.dtype, load(i)) for n, i in header_of(folder / "model.safetensors").items() if n != "transfer_codes"
        }
        write_safetensors(folder / "model.safetensors", kept)
    return folder


def golden_source() -> dict[str, np.ndarray]:
    model = {n: load(i) for n, i in read_header(GOLDEN / "model.safetensors").items()}
    assert np.array_equal(model["transfer_codes"], load(read_header(GOLDEN / "transfer.safetensors")["codes"]))
    return model


def check_golden_gguf(out: Path) -> None:
    reader = gguf.GGUFReader(out)
    tensors = {t.name: t for t in reader.tensors}
    assert field(reader, "general.architecture") == "dflash"
    assert field(reader, "dflash.block_size") == 16
    assert field(reader, "dflash.target_layers") == [1, 2]
    assert field(reader, "dflash.attention.causal") is True
    assert field(reader, "dflash.dspine.top_k") == 4
    assert reader.fields["dflash.dspine.top_k"].types == [gguf.GGUFValueType.UINT32]
    assert field(reader, "tokenizer.ggml.mask_token_id") == 255
    assert field(reader, "dflash.rope.freq_base") == 10000.0
    assert "dflash.attention.sliding_window" not in reader.fields
    assert not any(k.startswith("dflash.injection") for k in reader.fields)
    assert not any("inj_" in n for n in tensors) and "transfer_ready" not in tensors
    source = golden_source()
    for hf, name in DSPINE_NAMES.items():
        tensor, values = tensors[name], source[hf]
        # ggml order is numpy's reversed: a PyTorch [out, in] is {in, out}.
        assert list(tensor.shape) == list(reversed(values.shape)), name
        if name == "dspine_gate.bias":
            assert tensor.tensor_type == gguf.GGMLQuantizationType.F32
            assert np.array_equal(np.asarray(tensor.data), values)
        else:  # an F32 checkpoint's weights are written F16 (upstream's --outtype auto)
            assert tensor.tensor_type == gguf.GGMLQuantizationType.F16, name
            assert np.array_equal(np.asarray(tensor.data).reshape(values.shape), values.astype(np.float16)), name
    assert list(tensors["fc.weight"].shape) == [128, 64]


@pytest.fixture(scope="module")
def golden_tgt(tmp_path_factory) -> Path:
    return golden_target(tmp_path_factory.mktemp("golden") / "target.gguf")


def test_the_references_own_dspine_checkpoint_converts(tmp_path, golden_tgt):
    """SpecForge's save_pretrained output (transfer_codes in model.safetensors, and the same table
    in transfer.safetensors beside it): every dspine_* tensor equals its source."""
    folder = golden_copy(tmp_path)
    out = tmp_path / "golden.gguf"
    converted = convert_checkpoint(folder / "config.json", [folder / "model.safetensors"], golden_tgt, out, "BF16")
    assert converted.kind == "dspine"
    check_golden_gguf(out)
    # Every safetensors file of the folder given as shards: transfer.safetensors is the code table.
    again = tmp_path / "again.gguf"
    convert_checkpoint(folder / "config.json", sorted(folder.glob("*.safetensors")), golden_tgt, again, "BF16")
    check_golden_gguf(again)


def test_the_independent_layout_takes_the_code_table_from_its_own_file(tmp_path, golden_tgt):
    folder = golden_copy(tmp_path, codes_in_model=False)
    assert "transfer_codes" not in read_header(folder / "model.safetensors")
    out = tmp_path / "independent.gguf"
    convert_checkpoint(folder / "config.json", [folder / "model.safetensors"], golden_tgt, out, "BF16")
    check_golden_gguf(out)
    # Without either, the code table is named as missing.
    bare = golden_copy(tmp_path / "bare", codes_in_model=False, codes_file=False)
    with pytest.raises(ConversionError, match="dspine_codes.weight") as caught:
        convert_checkpoint(bare / "config.json", [bare / "model.safetensors"], golden_tgt, tmp_path / "b.gguf", "BF16")
    assert "`codes`" in caught.value.fix and not list(tmp_path.glob("b.gguf*"))


def golden_refused(tmp_path: Path, target: Path, folder: Path) -> ConversionError:
    """The conversion of the checkpoint in `folder` is refused, writing nothing."""
    out = tmp_path / "bad.gguf"
    with pytest.raises(ConversionError) as caught:
        convert_checkpoint(folder / "config.json", [folder / "model.safetensors"], target, out, "BF16")
    assert not list(tmp_path.glob("bad.gguf*")), "a refusal wrote something"
    assert "nothing was written" in caught.value.fix
    return caught.value


def test_a_code_table_of_the_wrong_shape_or_with_a_nan_is_refused(tmp_path, golden_tgt):
    folder = golden_copy(tmp_path, codes_in_model=False)
    codes = load(read_header(folder / "transfer.safetensors")["codes"])
    write_safetensors(folder / "transfer.safetensors", {"codes": ("F32", codes[:, :15].copy())})
    error = golden_refused(tmp_path, golden_tgt, folder)
    assert "transfer.safetensors" in error.cause and "[256, 15]" in error.cause and "[256, 16]" in error.cause
    codes = codes.copy()
    codes[7, 3] = np.nan
    write_safetensors(folder / "transfer.safetensors", {"codes": ("F32", codes)})
    error = golden_refused(tmp_path, golden_tgt, folder)
    assert "1 value(s) that are not finite" in error.cause and "transfer.safetensors" in error.cause
    # A target of another vocabulary: the code table's rows are the target's tokens.
    wide = golden_target(tmp_path / "wide.gguf", n_vocab=300)
    assert "256" in golden_refused(tmp_path, wide, golden_copy(tmp_path / "w")).cause


def test_a_dspine_checkpoint_whose_tensors_disagree_is_refused(tmp_path, golden_tgt):
    folder = golden_copy(tmp_path, codes_file=False)
    model = {n: (i.dtype, load(i)) for n, i in read_header(folder / "model.safetensors").items()}

    def rewrite(**changes):
        tensors = {**model, **changes}
        write_safetensors(folder / "model.safetensors", {n: v for n, v in tensors.items() if v is not None})
        return golden_refused(tmp_path, golden_tgt, folder)

    assert "blk.1.dspine_readout.weight" in rewrite(**{"injection.readouts.1.weight": None}).cause
    assert "dspine_predecessor_gate.weight" in rewrite(**{"injection.predecessor_gate.weight": None}).cause
    wrong = rewrite(**{"injection.writes.0.weight": ("F32", np.zeros((64, 9), np.float32))}).cause
    assert "injection.writes.0.weight is [64, 9]" in wrong and "[64, 8]" in wrong
    fc = rewrite(**{"fc.weight": ("F32", np.zeros((64, 192), np.float32))}).cause
    assert "fc.weight is [64, 192]" in fc and "[64, 128]" in fc
    bias = rewrite(**{"layers.0.self_attn.q_proj.bias": ("F32", np.zeros(64, np.float32))}).cause
    assert "layers.0.self_attn.q_proj.bias" in bias and "bias" in bias


def test_a_dspine_config_the_target_cannot_serve_is_refused(tmp_path, golden_tgt):
    folder = golden_copy(tmp_path)
    raw = json.loads((folder / "config.json").read_text())

    def with_config(change) -> ConversionError:
        config = json.loads(json.dumps(raw))
        change(config)
        (folder / "config.json").write_text(json.dumps(config))
        return golden_refused(tmp_path, golden_tgt, folder)

    mask = with_config(lambda c: c["dflash_config"].update(mask_token_id=256)).cause
    assert "mask token 256 is outside" in mask
    # The target has 4 layers: llama.cpp taps layer inputs 0..3, so HF id 2 (input 3) is the last.
    tap = with_config(lambda c: c["dflash_config"].update(target_layer_ids=[0, 3])).cause
    assert "target_layer_ids [0, 3]" in tap and "layer(s) [3]" in tap and "4 layers" in tap
    rank = with_config(lambda c: c["dspine_config"].update(transfer_rank=8)).cause
    assert "transfer_rank (8)" in rank and "[256, 16]" in rank
    unknown = with_config(lambda c: c["dspine_config"].update(gate="sigmoid")).cause
    assert "dspine_config.gate" in unknown
    # The last layer a 4-layer target can give: HF id 2.
    config = json.loads(json.dumps(raw))
    config["dflash_config"]["target_layer_ids"] = [1, 2]
    (folder / "config.json").write_text(json.dumps(config))
    spec, *_ = prepare(folder / "config.json", [folder / "model.safetensors"], golden_tgt)
    assert spec.family == "dspine" and spec.dspine == {"transfer_rank": 16, "message_size": 8, "top_k": 4}


def test_what_the_server_or_the_reference_refuses_is_refused_at_convert_naming_the_key(tmp_path, golden_tgt):
    """Issue 67: a top_k the refinement lattice cannot hold converted and then llama-server
    refused to load it; a window with no layer_types converted and the server refused it; sliding
    layers with use_sliding_window false (the reference refuses it) lost the window silently."""
    folder = golden_copy(tmp_path)
    raw = json.loads((folder / "config.json").read_text())

    def with_config(change) -> ConversionError:
        config = json.loads(json.dumps(raw))
        change(config)
        (folder / "config.json").write_text(json.dumps(config))
        return golden_refused(tmp_path, golden_tgt, folder)

    wide = with_config(lambda c: c["dspine_config"].update(top_k=8))  # hidden 64 < 8 x 9
    assert "dspine_config.top_k is 8" in wide.cause and "refinement lattice" in wide.cause and "64" in wide.cause
    default = with_config(lambda c: c["dspine_config"].pop("top_k"))
    assert "reference's default 16" in default.cause
    n_layer = raw["num_hidden_layers"]
    no_types = with_config(lambda c: (c.update(use_sliding_window=True, sliding_window=8), c.pop("layer_types")))
    assert "layer_types is missing" in no_types.cause and "sliding_window 8" in no_types.cause
    sliding = ["sliding_attention"] * n_layer
    off = with_config(lambda c: c.update(use_sliding_window=False, sliding_window=8, layer_types=sliding))
    assert f"layer_types names {n_layer} sliding_attention layers but use_sliding_window is False" in off.cause
    no_window = with_config(lambda c: c.update(use_sliding_window=True, layer_types=sliding))
    assert "sliding_window is not set" in no_window.cause
    swa = with_config(lambda c: c["dflash_config"].update(use_swa=True))
    assert "use_swa is true but neither swa_window_size nor sliding_window is set" in swa.cause
    huge = with_config(lambda c: c["dspine_config"].update(top_k=300))  # the golden vocabulary is 256
    assert "more than the vocabulary's 256 tokens" in huge.cause
    config = json.loads(json.dumps(raw))
    config.update(use_sliding_window=True, sliding_window=8, layer_types=sliding)
    (folder / "config.json").write_text(json.dumps(config))
    spec, *_ = prepare(folder / "config.json", [folder / "model.safetensors"], golden_tgt)
    keys = {k.name: k.value for k in spec.keys}
    assert (
        keys["dflash.attention.sliding_window"] == 8
        and keys["dflash.attention.sliding_window_pattern"] == [True] * n_layer
    )


def test_old_guessed_dspine_names_are_no_longer_read():
    for old in ("layers.0.injection.read.weight", "injection.gates.0.weight", "injection.norms.0.weight"):
        assert convert.gguf_name(old) is None
    assert convert.gguf_name("injection.readouts.3.weight") == "blk.3.dspine_readout.weight"
    assert convert.gguf_name("model.transfer_codes") == "dspine_codes.weight"
    assert convert.gguf_name("transfer_ready") == ""


def test_a_reduced_vocabulary_writes_absolute_d2t_ids(tmp_path, target):
    reader = convert_to_bf16(tmp_path, target, Drafter(family="dspark", draft_vocab=100))
    tensors = {t.name: t for t in reader.tensors}
    assert "t2d" not in tensors
    assert np.array_equal(np.asarray(tensors["d2t"].data), np.arange(100) * 2)
    assert list(tensors["output.weight"].shape) == [64, 100]


def refused(tmp_path: Path, target: Path, drafter: Drafter) -> ConversionError:
    return golden_refused(tmp_path, target, write_checkpoint(tmp_path / "bad", drafter))


def test_unknown_config_fields_are_refused_with_their_names(tmp_path, target):
    error = refused(
        tmp_path,
        target,
        Drafter(extra_config={"markov_temperature": 0.5, "dflash_config": {"target_layer_ids": [0], "tree": 1}}),
    )
    assert "markov_temperature" in error.cause and "dflash_config.tree" in error.cause


def test_a_missing_tensor_is_refused_by_name(tmp_path, target):
    error = refused(tmp_path, target, Drafter(family="dspark", leave_out=("layers.1.mlp.down_proj.weight",)))
    assert "blk.1.ffn_down.weight" in error.cause
    error = refused(tmp_path, target, Drafter(family="dspark", leave_out=("markov_head.markov_w2.weight",)))
    assert "markov_w2.weight" in error.cause


def test_tensors_the_table_does_not_know_are_listed_and_nothing_is_converted(tmp_path, target):
    extra = {"injection.bridges.0.weight": ("F32", np.zeros((4, 4), np.float32))}
    extra |= {"tree_head.weight": ("F32", np.zeros((4,), np.float32))}
    error = refused(tmp_path, target, Drafter(family="dspine", extra_tensors=extra))
    assert "2 tensor(s)" in error.cause
    assert "injection.bridges.0.weight" in error.cause and "tree_head.weight" in error.cause


def test_a_vocabulary_that_differs_from_the_targets_is_refused(tmp_path, target):
    assert "300" in refused(tmp_path, target, Drafter(vocab=320)).cause
    mask = refused(tmp_path, target, Drafter(mask_token_id=300, vocab=300)).cause
    assert "mask token 300 is outside" in mask
    assert "hidden size is 32" in refused(tmp_path, target, Drafter(hidden=32, head_dim=8)).cause
    assert "target layer(s) [7]" in refused(tmp_path, target, Drafter(target_layer_ids=[0, 7])).cause
    assert "target layer(s) [3]" in refused(tmp_path, target, Drafter(target_layer_ids=[0, 3])).cause


def test_embedding_rows_and_d2t_beyond_the_vocabulary_are_refused(tmp_path, target):
    wide = {"embed_tokens.weight": ("F32", np.zeros((320, 64), np.float32))}
    shapes = refused(tmp_path, target, Drafter(extra_tensors=wide)).cause
    assert "embed_tokens.weight is [320, 64]" in shapes
    beyond = {"d2t": ("I64", np.full(100, 250, np.int64))}  # draft id 99 + 250 > 299
    assert (
        "beyond the target's vocabulary"
        in refused(tmp_path, target, Drafter(draft_vocab=100, extra_tensors=beyond)).cause
    )


def test_a_disk_too_small_is_refused_before_anything_is_written(tmp_path, target, monkeypatch):
    folder = write_checkpoint(tmp_path / "ck", Drafter())
    size = (folder / "model.safetensors").stat().st_size
    assert needed_bytes(size, "Q8_0") > size  # the staged GGUF and the quantized one
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage(10**9, 10**9, size // 2))  # no small disk here to fill
    with pytest.raises(DiskFullError, match="converting the drafter needs"):
        convert_checkpoint(folder / "config.json", [folder / "model.safetensors"], target, tmp_path / "d.gguf", "BF16")
    assert not list(tmp_path.glob("d.gguf*"))


def test_a_broken_safetensors_file_is_named(tmp_path, target):
    folder = write_checkpoint(tmp_path / "ck", Drafter())
    shards = folder / "model.safetensors"
    shards.write_bytes(shards.read_bytes()[:-100])  # cut short
    with pytest.raises(Exception, match="not a readable safetensors file") as caught:
        convert_checkpoint(folder / "config.json", [shards], target, tmp_path / "d.gguf", "BF16")
    assert str(shards) in str(caught.value)


def test_config_shapes_of_the_writer_are_what_the_converter_reads():
    """The checkpoint writer and the converter share one layout: every name maps."""
    for family in ("dflash", "dflash2", "dspark", "dspine"):
        drafter = Drafter(family=family)
        spec = convert.read_config(json.loads(json.dumps(config(drafter))))
        shapes = tensor_shapes(drafter)
        plans = convert.plan_tensors(spec, shapes)
        assert spec.family == family and len(plans) == len([n for n in shapes if convert.gguf_name(n)])


def staged(tmp_path: Path, target: Path):
    """A drafter converted to BF16 without the read-back, and what prepare planned for it."""
    folder = write_checkpoint(tmp_path / "ck", Drafter(family="dspark"))
    spec, tensors, plans, tokenizer, keys = prepare(folder / "config.json", [folder / "model.safetensors"], target)
    out = tmp_path / "d.gguf"
    write_stage(out, "d", spec, tensors, plans, tokenizer, keys, ConvertProgress())
    return out, plans, tensors, tokenizer


def test_the_read_back_checks_names_shapes_data_and_the_targets_tokens(tmp_path, target):
    out, plans, tensors, tokenizer = staged(tmp_path, target)
    assert verify(out, plans, tensors, tokenizer) == len(plans)
    other = write_model(tmp_path / "respelled.gguf", Shape(**{**vars(TARGET), "respelled": True}))
    _, other_tokenizer = _read_target(other)
    with pytest.raises(ConversionError, match="tokens other than the target's"):
        verify(out, plans, tensors, other_tokenizer)
    first = plans[0].source
    reshaped = {**tensors, first: dataclasses.replace(tensors[first], shape=(7, *tensors[first].shape))}
    with pytest.raises(ConversionError, match=f"tensors of other shapes: {plans[0].name}"):
        verify(out, plans, reshaped, tokenizer)
    with pytest.raises(ConversionError, match="tensors not planned: "):
        verify(out, plans[:1], tensors, tokenizer)
    with out.open("r+b") as handle:
        handle.truncate(out.stat().st_size - 1000)  # the last tensor's data cut short
    with pytest.raises(ConversionError, match="weights are missing"):
        verify(out, plans, tensors, tokenizer)


def _hostile_values():
    return [None, True, -1, 10**30, 2**40, "64", 1.5, float("nan"), [], {}, [1, 2], {"a": 1}, "x" * 10_000]


@pytest.mark.parametrize("family", ["dflash", "dflash2", "dspark", "dspine"])
def test_every_hostile_config_value_is_a_refusal_never_a_crash(family):
    """Fifth hostile trial (low): hostile converter inputs ended in "unexpected ... report it",
    one value allocated 8 GB, and `max_position_embeddings: 10^30` passed every check. Each field
    of a real config, and each field of its nested tables, set to each hostile value: either the
    config still reads (the value is one it takes) with every number in bounds, or the reading
    is a ConversionError, the converter's exit 12."""
    base = json.loads(json.dumps(config(Drafter(family=family))))
    places = [(base, key) for key in base] + [
        (base[key], sub) for key in base if isinstance(base[key], dict) for sub in base[key]
    ]
    tried = 0
    for table, key in places:
        original = table[key]
        for value in _hostile_values():
            table[key] = value
            try:
                spec = convert.read_config(json.loads(json.dumps(base)))
            except ConversionError:
                pass
            else:
                for found in spec.keys:
                    if found.kind == "u32":
                        assert 0 <= found.value <= convert.U32_MAX, (key, value, found)
                assert spec.hidden <= convert.LIMITS["hidden_size"] and spec.vocab <= convert.LIMITS["vocab_size"]
            tried += 1
        table[key] = original
    assert tried > 100


def test_a_context_length_of_ten_to_the_thirty_is_refused():
    raw = json.loads(json.dumps(config(Drafter(family="dspine"))))
    raw["max_position_embeddings"] = 10**30
    with pytest.raises(ConversionError, match="max_position_embeddings"):
        convert.read_config(raw)


@pytest.mark.parametrize(
    "header",
    [
        {"t": {"dtype": "F32", "shape": [-2, -2], "data_offsets": [0, 16]}},
        {"t": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}},
        {"t": {"dtype": ["F32"], "shape": [2], "data_offsets": [0, 8]}},
        {"t": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]}},
        {"t": {"dtype": "F32", "shape": [2], "data_offsets": ["0", "8"]}},
        # Two tensors over the same bytes, and a weight with no values: both converted before.
        {
            "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
        },
        {"t": {"dtype": "F32", "shape": [0, 4], "data_offsets": [0, 0]}},
    ],
)
def test_a_hostile_safetensors_header_is_a_refusal(tmp_path, header):
    raw = json.dumps(header).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + b"\0" * 16)
    with pytest.raises(ConversionError):
        read_header(path)


def test_a_shard_that_is_a_pipe_is_refused_at_once(tmp_path):
    """A FIFO named model.safetensors hung `dspine convert` for ever on its first read."""
    import os

    pipe = tmp_path / "model.safetensors"
    os.mkfifo(pipe)
    with pytest.raises(ConversionError, match="not a regular file"):
        read_header(pipe)


def test_a_safetensors_header_nested_without_end_is_a_refusal(tmp_path):
    raw = b"[" * 100_000 + b"]" * 100_000
    path = tmp_path / "model.safetensors"
    path.write_bytes(len(raw).to_bytes(8, "little") + raw)
    with pytest.raises(ConversionError):
        read_header(path)


@pytest.mark.parametrize("shape", [[2**70], [2**32, 2**32, 4]])
def test_a_shape_that_overflows_is_a_refusal(tmp_path, shape):
    raw = json.dumps({"t": {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}}).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(len(raw).to_bytes(8, "little") + raw)
    with pytest.raises(ConversionError):
        read_header(path)


def test_dspine_convert_converts_a_folder_on_disk(tmp_path, golden_tgt, capsys):
    from app.cli import run

    folder = golden_copy(tmp_path)
    assert run(["convert", str(folder), "--target", str(golden_tgt)]) == 0
    check_golden_gguf(tmp_path / "ckpt.gguf")
    assert "a dspine drafter" in capsys.readouterr().out
    out = tmp_path / "named.gguf"
    assert run(["convert", str(folder), "-t", str(golden_tgt), "-o", str(out), "--quant", "bf16"]) == 0
    check_golden_gguf(out)


def test_dspine_convert_refuses_in_two_lines_and_exits_12(tmp_path, golden_tgt, capsys):
    from app.cli import run

    folder = golden_copy(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config["dflash_config"]["target_layer_ids"] = [0, 3]
    (folder / "config.json").write_text(json.dumps(config))
    assert run(["convert", str(folder), "--target", str(golden_tgt), "-o", str(tmp_path / "x.gguf")]) == 12
    err = capsys.readouterr().err
    assert "error:" in err and "target_layer_ids [0, 3]" in err and "Traceback" not in err
    assert not list(tmp_path.glob("x.gguf*"))
    assert run(["convert", str(tmp_path / "nowhere"), "--target", str(golden_tgt)]) == 12
    assert "no config.json" in capsys.readouterr().err


def test_two_code_tables_that_disagree_or_two_codes_files_are_refused(tmp_path, golden_tgt):
    folder = golden_copy(tmp_path)
    codes = load(read_header(folder / "transfer.safetensors")["codes"])
    write_safetensors(folder / "transfer.safetensors", {"codes": ("F32", codes * 2)})
    error = golden_refused(tmp_path, golden_tgt, folder)
    assert "transfer_codes" in error.cause and "transfer.safetensors" in error.cause and "differ" in error.cause
    write_safetensors(folder / "transfer.safetensors", {"codes": ("F32", codes)})
    write_safetensors(folder / "transfer_codes.safetensors", {"codes": ("F32", codes)})
    assert "2 files hold a DSpine code table" in golden_refused(tmp_path, golden_tgt, folder).cause


def test_every_quant_the_converter_makes_is_listed_and_another_is_refused_first(tmp_path, golden_tgt):
    """Issue 67: F32 worked and --help did not list it; an unknown quant failed only after the
    whole conversion, in llama-quantize."""
    from typer.main import get_command

    from app.cli import app
    from app.errors import ConfigError
    from app.hub.convert_run import QUANT_BITS, convert_checkpoint

    option = next(p for p in get_command(app).commands["convert"].params if p.name == "quant")  # type: ignore[attr-defined]
    assert all(name in (option.help or "") for name in QUANT_BITS)
    folder = golden_copy(tmp_path)
    with pytest.raises(ConfigError, match="--quant 'Q3_K_S' is not a type the converter makes") as caught:
        convert_checkpoint(
            folder / "config.json", [folder / "model.safetensors"], golden_tgt, tmp_path / "o.gguf", "Q3_K_S"
        )
    assert "Q4_K_M" in caught.value.fix and not list(tmp_path.glob("o.gguf*"))
