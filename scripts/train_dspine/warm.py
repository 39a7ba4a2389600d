"""A converted drafter read back as training's start (issue 70).

What a session trains outlives its machine only as what the repository keeps: the drafter that
ships (`assets/drafters/smollm2-135m-dspine.Q8_0.gguf`, dspine's converter's output). `train
--init-from` starts there instead of from the target's blocks, so the next session trains on
rather than again. Each GGUF tensor goes back under the reference's state-dict name the trainer
uses (named as `app/hub/convert.py` names them; this trainer's tensors are NeoX rope, so nothing
was permuted), dequantised to float32; the code table comes with them, since
it is the one the drafter was trained against. Numpy and gguf only: no JAX."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

# The GGUF names are the converter's (one home for them): its module needs the standard
# library and dspine's error types only, so the trainer's own venv imports it from the repository.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from app.hub.convert import gguf_name as _converter_name

CODES = _converter_name("transfer_codes")


class NotThisDrafter(Exception):
    """The GGUF does not carry the drafter the trainer was asked to go on with."""


def gguf_name(name: str) -> str:
    """The converter's GGUF name of one of the trainer's parameters (the reference's names)."""
    found = _converter_name(name)
    if not found:
        raise KeyError(name)
    return found


def read_tensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a GGUF file as float32, numpy order ([out, in])."""
    reader = GGUFReader(path)
    return {t.name: dequantize(t.data, t.tensor_type).astype(np.float32) for t in reader.tensors}


def params_from_gguf(path: Path, wanted: dict[str, tuple[int, ...]]) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """The trainer's parameters named in `wanted` (name -> shape) from a converted drafter, and
    its code table (None where it has none). Every wanted tensor must be there at its shape."""
    tensors = read_tensors(path)
    params, wrong = {}, []
    for name, shape in wanted.items():
        found = tensors.get(gguf_name(name))
        if found is None or found.shape != tuple(shape):
            got = "missing" if found is None else f"shape {list(found.shape)}"
            wrong.append(f"{gguf_name(name)} ({name}): {got}, the trainer's is {list(shape)}")
        else:
            params[name] = found
    if wrong:
        listed = "; ".join(wrong[:4]) + (f"; and {len(wrong) - 4} more" if len(wrong) > 4 else "")
        raise NotThisDrafter(f"{path} is not the drafter this run trains: {listed}")
    return params, tensors.get(CODES)
