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
