import time

import pytest

from app.fit.shape import shape_from_header
from backends.gguf_header import ArrayInfo, GgufError, RangeSource, parse_header, read_local
from tests.support.gguf_models import Shape, corrupt_header, write_model


@pytest.fixture
def model(tmp_path):
    return write_model(tmp_path / "m.gguf", Shape(n_layer=3, n_vocab=5000))


def test_reads_metadata_and_tensor_table(model):
    header = read_local(model)
    assert header.architecture == "llama" and header.version == 3
    assert header.get("llama.block_count") == 3
    assert isinstance(header.get("tokenizer.ggml.tokens"), ArrayInfo)  # long arrays are counted, not kept
    assert len(header.get("tokenizer.ggml.tokens")) == 5000
    data = model.stat().st_size - header.header_bytes
    assert (
        sum(t.n_bytes for t in header.tensors)
        <= data
        < sum(t.n_bytes for t in header.tensors) + 32 * len(header.tensors)
    )
    assert header.notes == []


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("magic", "is not a GGUF file"),
        ("tensor_count", "tensors"),
        ("truncate", "is truncated"),
    ],
)
def test_bad_files_fail_fast_with_a_reason(model, damage, message):
    corrupt_header(model, damage)
    started = time.monotonic()
    with pytest.raises(GgufError, match=message):
        read_local(model)
    assert time.monotonic() - started < 2


def test_missing_weights_are_noted_not_fatal(model):
    corrupt_header(model, "truncate_data")
    header = read_local(model)
    assert header.notes and "weights are missing" in header.notes[0]


def test_text_file_and_missing_file(tmp_path):
    text = tmp_path / "notes.gguf"
    text.write_text("hello, this is not a model")
    with pytest.raises(GgufError, match="not a GGUF file"):
        read_local(text)
    with pytest.raises(GgufError, match="cannot open"):
        read_local(tmp_path / "missing.gguf")


def test_absurd_string_length_is_refused_before_allocating(model):
    data = bytearray(model.read_bytes())
    # The first key's length field sits right after magic, version and the two counts.
    data[24:32] = (1 << 60).to_bytes(8, "little")
    model.write_bytes(bytes(data))
    with pytest.raises(GgufError, match="not a sane GGUF"):
        read_local(model)


def test_range_source_reads_only_the_header(model):
    blob = model.read_bytes()
    calls = []

    def fetch(offset, size):
        calls.append((offset, size))
        return blob[offset : offset + size]

    source = RangeSource("remote", len(blob), fetch)
    header = parse_header(source)
    assert shape_from_header(header).n_layer == 3
    assert len(source.fetched) < len(blob)
    assert len(calls) <= 3


def test_keys_asked_for_are_kept_whole_with_their_types_and_raw_bytes(tmp_path):
    """What the converter copies from a target: a long vocabulary (one token not UTF-8, as
    byte-level tokens can be), its scalar arrays and scalars, written again byte for byte."""
    import gguf

    tokens = [f"t{i}".encode() for i in range(5000)]
    tokens[7] = b"\xff\xfe"
    source = gguf.GGUFWriter(str(tmp_path / "src.gguf"), "llama")
    source.add_key_value("tokenizer.ggml.tokens", tokens, gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.STRING)
    source.add_key_value("tokenizer.ggml.token_type", [1] * 5000, gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT32)
    source.add_uint32("tokenizer.ggml.eos_token_id", 3)
    source.add_uint32("llama.block_count", 2)
    for step in (source.write_header_to_file, source.write_kv_data_to_file, source.write_ti_data_to_file, source.close):
        step()
    header = read_local(tmp_path / "src.gguf", copy=lambda key: key.startswith("tokenizer."))
    assert set(header.copied) == {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.eos_token_id"}
    assert header.copied["tokenizer.ggml.tokens"].value[7] == b"\xff\xfe"
    assert header.copied["tokenizer.ggml.token_type"].item_type == gguf.GGUFValueType.INT32
    assert header.copied["tokenizer.ggml.eos_token_id"].value_type == gguf.GGUFValueType.UINT32
    # metadata as ever: the long array counted, with the digest an uncopied read gives
    assert header.get("tokenizer.ggml.tokens") == read_local(tmp_path / "src.gguf").get("tokenizer.ggml.tokens")
    copy = gguf.GGUFWriter(str(tmp_path / "copy.gguf"), "llama")
    for name, raw in header.copied.items():
        sub = gguf.GGUFValueType(raw.item_type) if raw.item_type is not None else None
        copy.add_key_value(name, raw.value, gguf.GGUFValueType(raw.value_type), sub_type=sub)
    copy.add_uint32("llama.block_count", 2)
    for step in (copy.write_header_to_file, copy.write_kv_data_to_file, copy.write_ti_data_to_file, copy.close):
        step()
    assert (tmp_path / "copy.gguf").read_bytes() == (tmp_path / "src.gguf").read_bytes()
