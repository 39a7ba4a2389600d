"""A converted drafter read back as training's start (issue 70).

What a session trains outlives its machine only as what the repository keeps: the drafter that
ships (`assets/drafters/smollm2-135m-dspine.Q8_0.gguf`, dspine's converter's output). `train
--init-from` starts there instead of from the target's blocks, so the next session trains on
rather than again. Each GGUF tensor goes back under the reference's state-dict name the trainer
uses (the inverse of `app/hub/convert.py`'s tables, for the tensors this trainer makes: NeoX
rope, so nothing was permuted), dequantised to float32; the code table comes with them, since
it is the one the drafter was trained against. Numpy and gguf only: no JAX."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

# Reference name after `layers.N.` -> GGUF name after `blk.N.` (app/hub/convert.py's BLOCK_NAMES).
_BLOCK = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
_INJECTION_LISTS = {"readouts": "dspine_readout.weight", "writes": "dspine_write.weight"}
_ROOT = {
    "fc.weight": "fc.weight",
    "hidden_norm.weight": "enc.output_norm.weight",
    "norm.weight": "output_norm.weight",
    "injection.message.weight": "dspine_message.weight",
    "injection.receiver_gate.weight": "dspine_receiver_gate.weight",
    "injection.predecessor_gate.weight": "dspine_predecessor_gate.weight",
    "injection.bias": "dspine_gate.bias",
}
CODES = "dspine_codes.weight"


class NotThisDrafter(Exception):
    """The GGUF does not carry the drafter the trainer was asked to go on with."""


def gguf_name(name: str) -> str:
    """The converter's GGUF name of one of the trainer's parameters."""
    if name in _ROOT:
        return _ROOT[name]
    parts = name.split(".")
    if parts[0] == "layers":
        return f"blk.{parts[1]}.{_BLOCK['.'.join(parts[2:])]}"
    if parts[0] == "injection" and parts[1] in _INJECTION_LISTS:
        return f"blk.{parts[2]}.{_INJECTION_LISTS[parts[1]]}"
    raise KeyError(name)


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
