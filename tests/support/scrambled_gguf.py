"""A random drafter of a real drafter's exact shape: the same file with every tensor's values
shuffled (a quantised tensor's blocks shuffled whole, so every block stays valid). It keeps
the weights' statistics and loses everything training put in them: the baseline a trained
drafter's acceptance is measured against."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np


def scrambled_copy(source: Path, out: Path, seed: int = 0) -> Path:
    reader = gguf.GGUFReader(str(source))
    arch = str(reader.fields[gguf.Keys.General.ARCHITECTURE].contents())
    writer = gguf.GGUFWriter(str(out), arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)
    rng = np.random.default_rng(seed)
    shuffled = []
    for tensor in reader.tensors:
        data = np.array(tensor.data)
        if tensor.tensor_type in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            flat = data.reshape(-1)
            data = flat[rng.permutation(flat.size)].reshape(data.shape)
        else:
            block_bytes = gguf.GGML_QUANT_SIZES[tensor.tensor_type][1]
            blocks = data.reshape(-1, block_bytes)
            data = blocks[rng.permutation(len(blocks))].reshape(data.shape)
        shuffled.append(data)
        writer.add_tensor_info(tensor.name, data.shape, data.dtype, data.nbytes, tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for data in shuffled:
        writer.write_tensor_data(data)
    writer.close()
    return out
