"""Tiny safetensors block-drafter checkpoints (DFlash, DFlash2, DSpark, DSpine), written
with numpy alone in the layout their publishers use: `config.json` (with a nested
`dflash_config`, and `dspine_config` for DSpine) and `model.safetensors` holding the
PyTorch-named tensors (`layers.N.self_attn.q_proj.weight`, `fc.weight`, ...).

`write_safetensors` is the format alone (an 8-byte header length, a JSON header, raw
little-endian data); `write_checkpoint` a whole drafter for a target of `hidden` width
and `vocab` tokens. The DSpine trainer can write its output with `write_safetensors`
and `dspine_config` from here, so the converter and the DSpine tests read one layout.
DSpine's tensors are SpecForge's `DSpineDraftModel` names (`injection.readouts.N.weight`,
`injection.writes.N.weight`, the shared `injection.{message,receiver_gate,predecessor_gate}`
and `injection.bias`, `transfer_codes`, `transfer_ready`), as in
tests/engines/golden/dspine/ckpt-s0-b16.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

_DTYPE_NAMES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.int64): "I64"}


def bf16(values: np.ndarray) -> np.ndarray:
    """f32 -> BF16 bit patterns (uint16), rounded to nearest even as PyTorch does."""
    bits = values.astype(np.float32).view(np.uint32)
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)
    return (rounded >> 16).astype(np.uint16)


def write_safetensors(path: Path, tensors: dict[str, tuple[str, np.ndarray]], sparse_size: bool = False) -> Path:
    """`tensors`: name -> (dtype name, values as that dtype's bytes: BF16 as uint16).
    `sparse_size`: write the header only and extend the file to its full size without
    writing the data (a sparse file of zeros: a checkpoint of any size in no time)."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, values) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(values.shape), "data_offsets": [offset, offset + values.nbytes]}
        offset += values.nbytes
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", len(raw)))
        handle.write(raw)
        if sparse_size:
            handle.truncate(8 + len(raw) + offset)
            return path
        for _, values in tensors.values():
            handle.write(np.ascontiguousarray(values).tobytes())
    return path


@dataclass
class Drafter:
    """One tiny drafter's shape. `family`: dflash, dflash2, dspark or dspine."""

    family: str = "dflash"
    hidden: int = 64
    vocab: int = 300
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 16
    n_ff: int = 128
    target_layer_ids: list[int] = field(default_factory=lambda: [0, 1, 2])
    block_size: int = 16
    mask_token_id: int = 261  # <|endoftext|> in tests/support/gguf_models.vocabulary
    sliding_window: int | None = None  # DFlash: the first layer sliding, the rest full
    markov_rank: int = 16  # DSpark
    confidence_head: bool = True  # DSpark
    draft_vocab: int | None = None  # a reduced vocabulary (with d2t)
    embeddings: bool = False  # ship its own embed_tokens
    dtype: str = "BF16"
    extra_config: dict = field(default_factory=dict)
    extra_tensors: dict = field(default_factory=dict)
    leave_out: tuple[str, ...] = ()
    # SpecForge's dspine_config (the drafter's fields; the training-only ones are accepted too).
    dspine: dict = field(default_factory=lambda: {"transfer_rank": 16, "message_size": 8, "top_k": 4})
    # DSpine's code table as a file of its own (transfer.safetensors, one tensor `codes`) instead
    # of `transfer_codes` in model.safetensors: SpecForge's independent layout.
    codes_file: bool = False


ARCHITECTURES = {
    "dflash": "DFlashDraftModel",
    "dflash2": "DFlash2DraftModel",
    "dspark": "DSparkDraftModel",
    "dspine": "DSpineDraftModel",
}


def config(d: Drafter) -> dict:
    dflash: dict = {
        "target_layer_ids": d.target_layer_ids,
        "mask_token_id": d.mask_token_id,
        "block_size": d.block_size,
    }
    if d.family == "dflash2":
        dflash.update(conv_kernel_size=4, conv_group_size=16, selector_rank=8, selector_top_k=4)
    out: dict = {
        "architectures": [ARCHITECTURES[d.family]],
        "model_type": "qwen3",
        "hidden_size": d.hidden,
        "num_hidden_layers": d.n_layer,
        "num_attention_heads": d.n_head,
        "num_key_value_heads": d.n_head_kv,
        "head_dim": d.head_dim,
        "intermediate_size": d.n_ff,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "vocab_size": d.vocab,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "dflash_config": dflash,
    }
    if d.sliding_window:
        out["use_sliding_window"] = True
        out["sliding_window"] = d.sliding_window
        out["layer_types"] = ["sliding_attention"] + ["full_attention"] * (d.n_layer - 1)
    if d.draft_vocab:
        out["draft_vocab_size"] = d.draft_vocab
    if d.family == "dspine":
        out["dspine_config"] = dict(d.dspine)
    out.update(d.extra_config)
    return out


def tensor_shapes(d: Drafter) -> dict[str, tuple[int, ...]]:
    """Every tensor's PyTorch shape, by its checkpoint name."""
    e, hd = d.hidden, d.head_dim
    shapes: dict[str, tuple[int, ...]] = {
        "fc.weight": (e, len(d.target_layer_ids) * e),
        "hidden_norm.weight": (e,),
        "norm.weight": (e,),
    }
    for il in range(d.n_layer):
        p = f"layers.{il}."
        shapes |= {
            p + "input_layernorm.weight": (e,),
            p + "self_attn.q_proj.weight": (d.n_head * hd, e),
            p + "self_attn.k_proj.weight": (d.n_head_kv * hd, e),
            p + "self_attn.v_proj.weight": (d.n_head_kv * hd, e),
            p + "self_attn.o_proj.weight": (e, d.n_head * hd),
            p + "self_attn.q_norm.weight": (hd,),
            p + "self_attn.k_norm.weight": (hd,),
            p + "post_attention_layernorm.weight": (e,),
            p + "mlp.gate_proj.weight": (d.n_ff, e),
            p + "mlp.up_proj.weight": (d.n_ff, e),
            p + "mlp.down_proj.weight": (e, d.n_ff),
        }
        if d.family == "dflash2":
            kernel, groups = 4, e // 16
            shapes |= {
                p + "attention_conv.base_kernel": (2, kernel, e),
                p + "attention_conv.kernel_projection.weight": (2 * kernel * groups, e),
                p + "mlp_conv.base_kernel": (2, kernel, e),
                p + "mlp_conv.kernel_projection.weight": (2 * kernel * groups, e),
            }
        if d.family == "dspine":
            r, s = d.dspine.get("transfer_rank", 16), d.dspine.get("message_size", 8)
            shapes |= {f"injection.readouts.{il}.weight": (r, e), f"injection.writes.{il}.weight": (e, s)}
    draft_vocab = d.draft_vocab or d.vocab
    if d.family == "dflash2":
        shapes |= {
            "candidate_selector.predecessor_codebook": (d.vocab, 8),
            "candidate_selector.successor_codebook": (d.vocab, 8),
            "candidate_selector.hidden_projection.weight": (8, e),
        }
    if d.family == "dspark":
        shapes |= {
            "markov_head.markov_w1.weight": (d.vocab, d.markov_rank),
            "markov_head.markov_w2.weight": (draft_vocab, d.markov_rank),
        }
        if d.confidence_head:
            shapes |= {"confidence_head.proj.weight": (1, e + d.markov_rank), "confidence_head.proj.bias": (1,)}
    if d.family == "dspine":
        r, s = d.dspine.get("transfer_rank", 16), d.dspine.get("message_size", 8)
        shapes |= {
            "injection.message.weight": (s, r),
            "injection.receiver_gate.weight": (s, r),
            "injection.predecessor_gate.weight": (s, r),
            "injection.bias": (s,),
            "transfer_codes": (d.vocab, r),
            "transfer_ready": (),
        }
    if d.embeddings:
        shapes["embed_tokens.weight"] = (d.vocab, e)
    if d.draft_vocab:
        shapes |= {"lm_head.weight": (draft_vocab, e), "d2t": (draft_vocab,), "t2d": (d.vocab,)}
    for name in d.leave_out:
        shapes.pop(name, None)
    return shapes


def write_checkpoint(folder: Path, d: Drafter, seed: int = 0, scale: float = 0.05, sparse_size: bool = False) -> Path:
    """config.json and model.safetensors for drafter `d` in `folder`; norms are 1, weights
    random of standard deviation `scale`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config(d), indent=2))
    rng = np.random.default_rng(seed)
    tensors: dict[str, tuple[str, np.ndarray]] = {}
    for name, shape in tensor_shapes(d).items():
        if name == "d2t":
            # offsets: draft id i is target id i + d2t[i] (every other token of the target)
            draft = np.arange(shape[0], dtype=np.int64)
            tensors[name] = ("I64", draft * 2 % d.vocab - draft if not sparse_size else np.zeros(shape, np.int64))
            continue
        if name in ("t2d", "transfer_ready"):
            tensors[name] = ("BOOL", np.full(shape, name == "transfer_ready", dtype=np.uint8))
            continue
        if sparse_size:
            values = np.zeros(shape, dtype=np.uint16 if d.dtype == "BF16" else np.float32)
        elif name.endswith("norm.weight"):
            values = np.ones(shape, dtype=np.float32)
        else:
            values = (rng.standard_normal(shape) * scale).astype(np.float32)
        if sparse_size:
            tensors[name] = (d.dtype, values)
        elif d.dtype == "BF16":
            tensors[name] = ("BF16", bf16(values))
        else:
            tensors[name] = (d.dtype, values.astype(np.float16 if d.dtype == "F16" else np.float32))
    for name, (dtype, values) in d.extra_tensors.items():
        tensors[name] = (dtype, values)
    if d.codes_file and "transfer_codes" in tensors:
        write_safetensors(folder / "transfer.safetensors", {"codes": tensors.pop("transfer_codes")})
    write_safetensors(folder / "model.safetensors", tensors, sparse_size=sparse_size)
    return folder


def real_dspark(**overrides) -> Drafter:
    """RadixArk/Qwen3.8-27B-DSpark's shape as SpecForge's qwen3.6-27b-dspark.json gives it
    (shared DSPINE.md: hidden 5120, 5 layers, 32/8 heads of 128, FFN 17408, Markov rank
    256, confidence head, taps [2, 17, 32, 47, 62], mask 248070): about 3.7 GB in BF16."""
    values = {
        "family": "dspark",
        "hidden": 5120,
        "vocab": 248320,
        "n_layer": 5,
        "n_head": 32,
        "n_head_kv": 8,
        "head_dim": 128,
        "n_ff": 17408,
        "target_layer_ids": [2, 17, 32, 47, 62],
        "mask_token_id": 248070,
        "markov_rank": 256,
    }
    values.update(overrides)
    return Drafter(**values)  # type: ignore[arg-type]


def real_dspine(**overrides) -> Drafter:
    """The authors' Qwen3.8-27B DSpine drafter at its published shape (about 2.03B parameters:
    five layers of 5120, the target's 248,320-token vocabulary, an 8,192-token window); heads,
    FFN width and taps as its DSpark sibling's, DSpine's ranks as SpecForge's defaults
    (transfer rank 1,024, message 512, top_k 16): about 4.05 GB in BF16."""
    values = {
        "family": "dspine",
        "hidden": 5120,
        "vocab": 248320,
        "n_layer": 5,
        "n_head": 32,
        "n_head_kv": 8,
        "head_dim": 128,
        "n_ff": 17408,
        "target_layer_ids": [1, 16, 31, 46, 61],
        "mask_token_id": 248070,
        "sliding_window": 8192,
        "dspine": {"transfer_rank": 1024, "message_size": 512, "top_k": 16},
    }
    values.update(overrides)
    return Drafter(**values)  # type: ignore[arg-type]


# The checkpoint family each drafter kind is made from here (DFlash2 for `dflash`: the drafter
# Qwen3.8-27B has). "dspine": "dspine" joins once dspine's DSpine patch lets the pinned
# llama-server run it.
FAMILY_OF_KIND = {"dflash": "dflash2", "dspark": "dspark", "dspine": "dspine"}


def converted_drafter(kind: str, target: Path, folder: Path) -> Path:
    """A tiny drafter of `kind` for the generated GGUF `target`, as `dspine pull` makes one: a
    checkpoint in its publisher's layout through the converter (BF16: no llama-quantize). It
    shares the target's width and vocabulary and taps its first three blocks."""
    from app.hub.convert_run import convert_checkpoint
    from backends.gguf_header import read_local

    header = read_local(target)
    drafter = Drafter(
        family=FAMILY_OF_KIND[kind],
        hidden=int(header.arch_key("embedding_length")),
        vocab=len(header.get("tokenizer.ggml.tokens")),
        n_head=4,
        n_head_kv=2,
        head_dim=32,
        n_ff=256,
    )
    checkpoint = write_checkpoint(folder / f"{kind}-checkpoint", drafter)
    converted = convert_checkpoint(
        checkpoint / "config.json", [checkpoint / "model.safetensors"], target, folder / f"{kind}.gguf", "BF16"
    )
    assert converted.kind == kind, converted
    return converted.path
