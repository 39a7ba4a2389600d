"""Tiny block drafters (upstream's `dflash` architecture: DFlash, DFlash2's selector, DSpine's
code table and injection) written as f32 GGUFs in well under a second, for llama-server to load next to a tiny
target from tests/support/gguf_models.py.

The drafter shares the target's vocabulary (gguf_models.vocabulary) and carries its own token
embeddings and head, so a NumPy reference needs nothing of the target but its tapped hidden
states. `target_layers=(0,)` taps the target's layer-0 input, which is its token embedding:
the features are then a table lookup, with no target forward pass to reproduce.
DSpine's names and keys are the patched llama.cpp's (docs/dspine-variant.md, the one table).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import gguf
import numpy as np

from tests.support.gguf_models import vocabulary

F32 = gguf.GGMLQuantizationType.F32


@dataclass(frozen=True)
class BlockDrafter:
    n_vocab: int = 300  # the target's
    n_embd_target: int = 64  # the target's hidden size
    target_layers: tuple[int, ...] = (0,)  # target layer inputs tapped (0: its token embedding)
    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 16
    n_ff: int = 128
    rms_eps: float = 1e-6
    rope_base: float = 10000.0
    block_size: int | None = 16  # None: the key is left out
    causal: bool | None = None  # dflash.attention.causal; None: left out
    sliding_window: int | None = None
    swa_pattern: tuple[bool, ...] | None = None  # per layer; None: left out
    sample_from_anchor: bool | None = None
    # DSpine (its code table, the injection after every layer); transfer_rank 0: a plain DFlash file
    transfer_rank: int = 0
    message_size: int = 8
    top_k: int | None = 4  # dflash.dspine.top_k (0: no refinement); None: left out (16)
    drop: tuple[str, ...] = ()  # tensors left out (a damaged file)
    # DFlash2's lattice: rank 0 is none
    selector_rank: int = 0
    selector_top_k: int = 4
    scale: float = 0.3
    # Tokens whose head rows are scaled up 3x: often among the drafter's likeliest, so a request
    # biased towards them gets drafts a target biased the same way sometimes keeps.
    favoured: tuple[int, ...] = ()
    extra_kv: dict = field(default_factory=dict)

    @property
    def mask_token_id(self) -> int:
        return self.n_vocab - 1

    @property
    def is_dspine(self) -> bool:
        return self.transfer_rank > 0


def tensors(d: BlockDrafter, seed: int) -> dict[str, np.ndarray]:
    """Every tensor, in NumPy order (ggml's dims reversed): a weight is (out, in). The DFlash
    tensors come from `seed` alone, the injection's and the selector's from a stream of their
    own: a DSpine file and a DFlash file of the same seed share every DFlash weight."""
    rng = np.random.default_rng(seed)
    extra_rng = np.random.default_rng([seed, 1])

    def w(*shape: int, scale: float = d.scale, source: np.random.Generator | None = None) -> np.ndarray:
        return ((source or rng).standard_normal(shape) * scale).astype(np.float32)

    def norm(n: int) -> np.ndarray:
        return (1.0 + rng.standard_normal(n) * 0.1).astype(np.float32)

    e, hd = d.n_embd, d.head_dim
    out: dict[str, np.ndarray] = {
        "token_embd.weight": w(d.n_vocab, e, scale=1.0),
        "output.weight": w(d.n_vocab, e, scale=1.0),
        "output_norm.weight": norm(e),
        "fc.weight": w(e, len(d.target_layers) * d.n_embd_target),
        "enc.output_norm.weight": norm(e),
    }
    for il in range(d.n_layer):
        p = f"blk.{il}."
        out |= {
            p + "attn_norm.weight": norm(e),
            p + "attn_q.weight": w(d.n_head * hd, e),
            p + "attn_k.weight": w(d.n_head_kv * hd, e),
            p + "attn_v.weight": w(d.n_head_kv * hd, e),
            p + "attn_output.weight": w(e, d.n_head * hd),
            p + "attn_q_norm.weight": norm(hd),
            p + "attn_k_norm.weight": norm(hd),
            p + "ffn_norm.weight": norm(e),
            p + "ffn_gate.weight": w(d.n_ff, e),
            p + "ffn_up.weight": w(d.n_ff, e),
            p + "ffn_down.weight": w(e, d.n_ff),
        }
    out["output.weight"][list(d.favoured)] *= 3.0
    x = extra_rng
    if d.is_dspine:
        r, m = d.transfer_rank, d.message_size
        codes = x.standard_normal((d.n_vocab, r))
        out["dspine_codes.weight"] = (codes / np.linalg.norm(codes, axis=1, keepdims=True)).astype(np.float32)
        out["dspine_message.weight"] = w(m, r, source=x)
        out["dspine_receiver_gate.weight"] = w(m, r, source=x)
        out["dspine_predecessor_gate.weight"] = w(m, r, source=x)
        out["dspine_gate.bias"] = w(m, source=x)
        for il in range(d.n_layer):
            out[f"blk.{il}.dspine_readout.weight"] = w(r, d.n_embd, source=x)
            out[f"blk.{il}.dspine_write.weight"] = w(d.n_embd, m, source=x)
    for name in d.drop:
        del out[name]
    if d.selector_rank:
        out["selector_hidden.weight"] = w(d.selector_rank, d.n_embd, source=x)
        out["selector_predecessor.weight"] = w(d.n_vocab, d.selector_rank, scale=1.0, source=x)
        out["selector_successor.weight"] = w(d.n_vocab, d.selector_rank, scale=1.0, source=x)
    return out


def write_block_drafter(path: Path, d: BlockDrafter, seed: int = 0) -> Path:
    writer = gguf.GGUFWriter(str(path), "dflash")
    writer.add_name("tiny-block-drafter")
    writer.add_context_length(4096)
    writer.add_embedding_length(d.n_embd)
    writer.add_block_count(d.n_layer)
    writer.add_feed_forward_length(d.n_ff)
    writer.add_head_count(d.n_head)
    writer.add_head_count_kv(d.n_head_kv)
    writer.add_key_length(d.head_dim)
    writer.add_value_length(d.head_dim)
    writer.add_layer_norm_rms_eps(d.rms_eps)
    writer.add_rope_dimension_count(d.head_dim)
    writer.add_rope_freq_base(d.rope_base)
    writer.add_array("dflash.target_layers", list(d.target_layers))
    if d.block_size is not None:
        writer.add_uint32("dflash.block_size", d.block_size)
    if d.causal is not None:
        writer.add_bool("dflash.attention.causal", d.causal)
    if d.sliding_window is not None:
        writer.add_uint32("dflash.attention.sliding_window", d.sliding_window)
    if d.swa_pattern is not None:
        writer.add_array("dflash.attention.sliding_window_pattern", list(d.swa_pattern))
    if d.sample_from_anchor is not None:
        writer.add_bool("dflash.sample_from_anchor", d.sample_from_anchor)
    if d.is_dspine and d.top_k is not None:
        writer.add_uint32("dflash.dspine.top_k", d.top_k)
    if d.selector_rank:
        writer.add_uint32("dflash.selector_rank", d.selector_rank)
        writer.add_uint32("dflash.selector_top_k", d.selector_top_k)
    for key, value in d.extra_kv.items():
        writer.add_uint32(key, value) if isinstance(value, int) else writer.add_string(key, str(value))
    tokens, types, merges = vocabulary(d.n_vocab)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_bos_token_id(tokens.index("<|endoftext|>"))
    writer.add_add_bos_token(False)
    writer.add_uint32("tokenizer.ggml.mask_token_id", d.mask_token_id)
    for name, values in tensors(d, seed).items():
        writer.add_tensor(name, values, raw_dtype=F32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
