"""The target (SmolLM2, llama architecture) as llama.cpp computes it, in JAX.

Weights come dequantised from the very GGUF the server runs (Q8_0 here), in the GGUF's
own layout: llama.cpp's converter permutes Q and K for its NORM rope (adjacent pairs), so
this forward ropes adjacent pairs too. It gives the logits (to check that its greedy tokens
are the server's) and the residual stream after the tapped blocks, which is what
llama.cpp hands a DFlash-family drafter: `dflash.target_layers` = HF id + 1 names a
block's *input*, the output of block HF id."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


@dataclass(frozen=True)
class TargetShape:
    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim: int
    rope_theta: float
    rms_eps: float
    n_vocab: int


def _field(reader: GGUFReader, key: str):
    field = reader.fields[key]
    return field.parts[field.data[0]][0]


def load_target(path: Path) -> tuple[TargetShape, dict[str, np.ndarray]]:
    """The shape and every tensor as float32, numpy order ([out, in] for matrices)."""
    reader = GGUFReader(path)
    arch = "llama"
    n_embd = int(_field(reader, f"{arch}.embedding_length"))
    n_head = int(_field(reader, f"{arch}.attention.head_count"))
    weights = {t.name: dequantize(t.data, t.tensor_type).astype(np.float32) for t in reader.tensors}
    shape = TargetShape(
        n_layer=int(_field(reader, f"{arch}.block_count")),
        n_embd=n_embd,
        n_ff=int(_field(reader, f"{arch}.feed_forward_length")),
        n_head=n_head,
        n_head_kv=int(_field(reader, f"{arch}.attention.head_count_kv")),
        head_dim=n_embd // n_head,
        rope_theta=float(_field(reader, f"{arch}.rope.freq_base")),
        # GGUF keeps it as float32: 1e-05 reads back as 9.99999974e-06
        rms_eps=float(str(_field(reader, f"{arch}.attention.layer_norm_rms_epsilon"))),
        n_vocab=weights["token_embd.weight"].shape[0],
    )
    return shape, weights


def rms_norm(x: jax.Array, weight: jax.Array | None, eps: float) -> jax.Array:
    x = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps)
    return x if weight is None else x * weight


def rope_angles(positions: jax.Array, head_dim: int, theta: float) -> tuple[jax.Array, jax.Array]:
    inv = theta ** (-jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim)
    angles = positions[..., None].astype(jnp.float32) * inv
    return jnp.cos(angles), jnp.sin(angles)


def rope_norm(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """llama.cpp's NORM rope: rotates adjacent pairs (x0, x1), (x2, x3), ...; x: [..., T, H, D]."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    c, s = cos[..., None, :], sin[..., None, :]
    return jnp.stack([x0 * c - x1 * s, x0 * s + x1 * c], axis=-1).reshape(x.shape)


def target_forward(
    shape: TargetShape, w: dict[str, jax.Array], tokens: jax.Array, taps: tuple[int, ...]
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """tokens [B, T] -> (logits [B, T, V], tapped residual streams [B, T, len(taps) * n_embd],
    the final-normed hidden [B, T, n_embd] whose head product is the logits: the teacher's).

    `taps` are HF layer ids: the output of block i is tap i."""
    b, t = tokens.shape
    h = w["token_embd.weight"][tokens]
    cos, sin = rope_angles(jnp.arange(t), shape.head_dim, shape.rope_theta)
    causal = jnp.tril(jnp.ones((t, t), dtype=bool))
    rep = shape.n_head // shape.n_head_kv
    tapped = {}
    for il in range(shape.n_layer):
        p = f"blk.{il}."
        x = rms_norm(h, w[p + "attn_norm.weight"], shape.rms_eps)
        q = (x @ w[p + "attn_q.weight"].T).reshape(b, t, shape.n_head, shape.head_dim)
        k = (x @ w[p + "attn_k.weight"].T).reshape(b, t, shape.n_head_kv, shape.head_dim)
        v = (x @ w[p + "attn_v.weight"].T).reshape(b, t, shape.n_head_kv, shape.head_dim)
        q, k = rope_norm(q, cos, sin), rope_norm(k, cos, sin)
        k, v = jnp.repeat(k, rep, axis=2), jnp.repeat(v, rep, axis=2)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(shape.head_dim)
        scores = jnp.where(causal, scores, -jnp.inf)
        attn = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, axis=-1), v).reshape(b, t, -1)
        h = h + attn @ w[p + "attn_output.weight"].T
        x = rms_norm(h, w[p + "ffn_norm.weight"], shape.rms_eps)
        ff = jax.nn.silu(x @ w[p + "ffn_gate.weight"].T) * (x @ w[p + "ffn_up.weight"].T)
        h = h + ff @ w[p + "ffn_down.weight"].T
        if il in taps:
            tapped[il] = h
    out = rms_norm(h, w["output_norm.weight"], shape.rms_eps)
    head = w["output.weight"] if "output.weight" in w else w["token_embd.weight"]
    logits = out @ head.T
    return logits, jnp.concatenate([tapped[i] for i in taps], axis=-1), out


def default_taps(n_layer: int, n_taps: int = 5) -> tuple[int, ...]:
    """Evenly from block 1 to block n_layer - 3, as SpecForge picks a DFlash drafter's taps
    (Qwen3.6-27B's [1, 16, 31, 46, 61]); every tap + 1 stays a block input llama.cpp can hand out."""
    start, end = 1, n_layer - 3
    return tuple(int(round(start + i * (end - start) / (n_taps - 1))) for i in range(n_taps))
