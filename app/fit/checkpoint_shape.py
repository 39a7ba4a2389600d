"""A DSpine (or DFlash) drafter checkpoint's shape from its config.json alone, as `dspine pull`
will convert it: the GGUF header the converter would write (its keys, every tensor's dims and
the type llama-quantize gives it), read by the same code that reads a real header. So
`dspine fit` sizes the authors' drafter (weights, code table, the window's KV cache) before
anything is pulled. Pure, but for `remote_config`."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from huggingface_hub.utils import hf_raise_for_status

from backends.gguf_header import ArrayInfo, GgufHeader, TensorInfo

from ..hub import client as hub
from ..hub.convert import ARCH, DrafterSpec, read_config
from ..hub.quant_mix import quantized_types
from ..models.selection import RemoteFile
from .shape import ModelShape, shape_from_header

_GGUF_TYPE_STRING = 8  # gguf's value type of a string array's items (the tokenizer's tokens)


def _key(spec: DrafterSpec, suffix: str, default: int = 0) -> int:
    return next((int(k.value) for k in spec.keys if k.name == f"{ARCH}.{suffix}"), default)


def gguf_dims(spec: DrafterSpec) -> dict[str, tuple[int, ...]]:
    """Every tensor of the converted file, by GGUF name, as ggml dims (a row's length first),
    in the order the converter writes them (the checkpoint's, sorted by name as safetensors
    files are: it decides which layers' attn_v and ffn_down llama-quantize's Q4_K_M keeps finer)."""
    e, hd = spec.hidden, spec.head_dim
    heads, kv_heads = _key(spec, "attention.head_count"), _key(spec, "attention.head_count_kv")
    ff = _key(spec, "feed_forward_length")
    dims: dict[str, tuple[int, ...]] = {
        "fc.weight": (len(spec.target_layer_ids) * e, e),
        "enc.output_norm.weight": (e,),
        "output_norm.weight": (e,),
    }
    if spec.draft_vocab < spec.vocab:
        dims["output.weight"] = (e, spec.draft_vocab)
    if spec.family == "dspine":
        r, s = spec.dspine["transfer_rank"], spec.dspine["message_size"]
        dims |= {
            "dspine_message.weight": (r, s),
            "dspine_receiver_gate.weight": (r, s),
            "dspine_predecessor_gate.weight": (r, s),
            "dspine_gate.bias": (s,),
            "dspine_codes.weight": (r, spec.vocab),
        }
    for il in range(spec.n_layer):
        block = {
            "attn_norm.weight": (e,),
            "attn_q.weight": (e, heads * hd),
            "attn_k.weight": (e, kv_heads * hd),
            "attn_v.weight": (e, kv_heads * hd),
            "attn_output.weight": (heads * hd, e),
            "attn_q_norm.weight": (hd,),
            "attn_k_norm.weight": (hd,),
            "ffn_norm.weight": (e,),
            "ffn_gate.weight": (e, ff),
            "ffn_up.weight": (e, ff),
            "ffn_down.weight": (ff, e),
        }
        if spec.family == "dspine":
            r, s = spec.dspine["transfer_rank"], spec.dspine["message_size"]
            block |= {"dspine_readout.weight": (e, r), "dspine_write.weight": (s, e)}
        dims |= {f"blk.{il}.{name}": shape for name, shape in block.items()}
    return dict(sorted(dims.items()))


def header_from_config(raw: dict[str, Any], quant: str, source: str) -> GgufHeader:
    """The header `dspine convert` would write for this config.json at `quant`."""
    spec = read_config(raw, source)
    if spec.family not in ("dspine", "dflash"):
        raise ValueError(f"{spec.family} drafters are sized from their GGUF, not their config")
    metadata: dict[str, Any] = {"general.architecture": ARCH, "general.name": source}
    metadata |= {key.name: key.value for key in spec.keys}
    metadata["tokenizer.ggml.tokens"] = ArrayInfo(item_type=_GGUF_TYPE_STRING, length=spec.vocab)
    dims = gguf_dims(spec)
    types = quantized_types(dims, quant)
    tensors = [TensorInfo(name, shape, _type_id(types[name]), 0) for name, shape in dims.items()]
    return GgufHeader(source=source, version=3, metadata=metadata, tensors=tensors, header_bytes=0)


def _type_id(name: str) -> int:
    from gguf import GGMLQuantizationType

    return int(GGMLQuantizationType[name])


def shape_from_config(raw: dict[str, Any], quant: str, source: str) -> ModelShape:
    return shape_from_header(header_from_config(raw, quant, source))


def remote_config(remote: RemoteFile, folder: Path) -> dict[str, Any]:
    """A checkpoint's config.json from the hub (a few KB), kept in `folder` by its commit."""
    key = hashlib.sha256(f"{remote.repo}/{remote.path}@{remote.commit}".encode()).hexdigest()
    cached = folder / f"{key}.config.json"
    if cached.exists():
        return json.loads(cached.read_text())
    with hub.hub_errors(remote.repo):
        try:
            response = hub.http_client().get(
                hub.download_url(remote), headers=hub.request_headers(), follow_redirects=True, timeout=60
            )
        except hub.TRANSPORT_ERRORS as exc:
            raise hub.unreachable(exc) from exc
        hf_raise_for_status(response)
    raw = json.loads(response.content)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(".tmp")
    tmp.write_text(json.dumps(raw))
    os.replace(tmp, cached)
    return raw
