"""Copies of a GGUF: with some keys set (a file that differs in one key), or scrambled: every
tensor's values shuffled (a quantised tensor's blocks shuffled whole, so every block stays
valid), which keeps the weights' statistics and loses everything training put in them, the
baseline a trained drafter's acceptance is measured against (issue 48)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gguf
import numpy as np


def rewritten_copy(
    source: Path,
    out: Path,
    keys: dict[str, tuple[Any, gguf.GGUFValueType]] | None = None,
    values: Callable[[Any], np.ndarray] = lambda tensor: np.array(tensor.data),
) -> Path:
    """A copy of a GGUF with `keys` set (name -> value, type) and each tensor's data from `values`."""
    keys = keys or {}
    reader = gguf.GGUFReader(str(source))
    arch = str(reader.fields[gguf.Keys.General.ARCHITECTURE].contents())
    writer = gguf.GGUFWriter(str(out), arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF.") or field.name in keys:
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)
    for name, (value, kind) in keys.items():
        writer.add_key_value(name, value, kind)
    written = []
    for tensor in reader.tensors:
        data = values(tensor)
        written.append(data)
        writer.add_tensor_info(tensor.name, data.shape, data.dtype, data.nbytes, tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for data in written:
        writer.write_tensor_data(data)
    writer.close()
    return out


def scrambled_copy(source: Path, out: Path, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)

    def shuffled(tensor: Any) -> np.ndarray:
        data = np.array(tensor.data)
        if tensor.tensor_type in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            flat = data.reshape(-1)
            return flat[rng.permutation(flat.size)].reshape(data.shape)
        block_bytes = gguf.GGML_QUANT_SIZES[tensor.tensor_type][1]
        blocks = data.reshape(-1, block_bytes)
        return blocks[rng.permutation(len(blocks))].reshape(data.shape)

    return rewritten_copy(source, out, values=shuffled)
