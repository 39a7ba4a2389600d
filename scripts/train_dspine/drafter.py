"""The DSpine drafter as its authors define it (SpecForge's `DSpineDraftModel`;
../shared/DSPINE.md "DSpine as its authors define it"), in JAX, written from those equations.

Parameters carry the reference's state-dict names and PyTorch's [out, in] layout, so the
export is a rename-free SpecForge-layout checkpoint. One block `[anchor, MASK x (n-1)]` at
positions a .. a+n-1 sees the target's tapped features of the positions before a:

- context: C = hidden_norm(fc(taps)), each layer's own k_proj/v_proj of it (k_norm, rope);
- the block: the target's embeddings, Qwen3 layers (q/k norms, NeoX rope, GQA, causal
  inside the block), each followed by the adjacent injection (`injection.py`);
- the final norm and the target's head give the base logits of rows 1..n-1.

`shape.injection` False is the DFlash twin: the same backbone with no injection."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from . import injection as inj
from .norms import rms_norm


@dataclass(frozen=True)
class DrafterShape:
    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim: int
    rope_theta: float
    rms_eps: float
    n_taps: int
    block_size: int
    transfer_rank: int
    message_size: int
    top_k: int
    injection: bool


def rope(x: jax.Array, positions: jax.Array, theta: float) -> jax.Array:
    """Qwen3/NeoX rotary on the whole head: halves, not pairs. x [..., T, heads, D], positions [..., T]."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (jnp.arange(0, d, 2, dtype=jnp.float32) / d)
    ang = positions[..., None].astype(jnp.float32) * inv
    ang = jnp.concatenate([ang, ang], axis=-1)[..., None, :]
    half = d // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * jnp.cos(ang) + rotated * jnp.sin(ang)


def context_kv(shape: DrafterShape, p: dict, taps: jax.Array) -> list[tuple[jax.Array, jax.Array]]:
    """taps [S, L, n_taps*H] -> per layer (K [S, L, kv, D] roped at 0..L-1, V [S, L, kv, D])."""
    s, n, _ = taps.shape
    ctx = rms_norm(taps @ p["fc.weight"].T, p["hidden_norm.weight"], shape.rms_eps)
    out = []
    for i in range(shape.n_layer):
        pre = f"layers.{i}.self_attn."
        k = (ctx @ p[pre + "k_proj.weight"].T).reshape(s, n, shape.n_head_kv, shape.head_dim)
        v = (ctx @ p[pre + "v_proj.weight"].T).reshape(s, n, shape.n_head_kv, shape.head_dim)
        k = rope(rms_norm(k, p[pre + "k_norm.weight"], shape.rms_eps), jnp.arange(n), shape.rope_theta)
        out.append((k, v))
    return out


def _layer(shape: DrafterShape, p: dict, i: int, h, kv, positions, ctx_allowed):
    """One Qwen3 decoder layer on block rows h [S, A, T, H] over its context K/V and the block's own."""
    s, a, t, _ = h.shape
    pre = f"layers.{i}."
    x = rms_norm(h, p[pre + "input_layernorm.weight"], shape.rms_eps)
    q = (x @ p[pre + "self_attn.q_proj.weight"].T).reshape(s, a, t, shape.n_head, shape.head_dim)
    k = (x @ p[pre + "self_attn.k_proj.weight"].T).reshape(s, a, t, shape.n_head_kv, shape.head_dim)
    v = (x @ p[pre + "self_attn.v_proj.weight"].T).reshape(s, a, t, shape.n_head_kv, shape.head_dim)
    q = rope(rms_norm(q, p[pre + "self_attn.q_norm.weight"], shape.rms_eps), positions, shape.rope_theta)
    k = rope(rms_norm(k, p[pre + "self_attn.k_norm.weight"], shape.rms_eps), positions, shape.rope_theta)
    rep = shape.n_head // shape.n_head_kv  # query head hh reads kv head hh // rep (repeat_interleave)
    qg = q.reshape(s, a, t, shape.n_head_kv, rep, shape.head_dim)
    kc, vc = kv
    scale = shape.head_dim**-0.5
    sc = jnp.einsum("satgrd,slgd->sagrtl", qg, kc) * scale
    sc = jnp.where(ctx_allowed[:, :, None, None, None, :], sc, -jnp.inf)
    sb = jnp.einsum("satgrd,saugd->sagrtu", qg, k) * scale
    sb = jnp.where(jnp.tril(jnp.ones((t, t), bool)), sb, -jnp.inf)  # causal inside the block
    probs = jax.nn.softmax(jnp.concatenate([sc, sb], axis=-1), axis=-1)
    n_ctx = kc.shape[1]
    o = jnp.einsum("sagrtl,slgd->satgrd", probs[..., :n_ctx], vc)
    o = o + jnp.einsum("sagrtu,saugd->satgrd", probs[..., n_ctx:], v)
    h = h + o.reshape(s, a, t, -1) @ p[pre + "self_attn.o_proj.weight"].T
    x = rms_norm(h, p[pre + "post_attention_layernorm.weight"], shape.rms_eps)
    ff = jax.nn.silu(x @ p[pre + "mlp.gate_proj.weight"].T) * (x @ p[pre + "mlp.up_proj.weight"].T)
    return h + ff @ p[pre + "mlp.down_proj.weight"].T


def block_forward(
    shape: DrafterShape,
    p: dict,
    codes: jax.Array,
    embed: jax.Array,
    kv: list,
    block_tokens: jax.Array,
    anchors: jax.Array,
    true_tokens: jax.Array | None = None,
    replace: jax.Array | None = None,
    replacement_layers: int = 3,
) -> dict[str, jax.Array]:
    """block_tokens [S, A, T] at positions anchors[S, A] + t over context positions < anchor.

    `true_tokens` [S, A, T] and `replace` [S, A] (bool): training's predecessor replacement, the
    true code of row t-1 instead of its feature in the first `replacement_layers` layers.
    Returns `final` (final-normed rows [S, A, T, H]), `pre_write` (the last layer's output before
    its write) and `features` ([L, S, A, T, r] of the written rows: the alignment loss's)."""
    s, a, t = block_tokens.shape
    h = embed[block_tokens]
    positions = anchors[..., None] + jnp.arange(t)
    n_ctx = kv[0][0].shape[1]
    ctx_allowed = jnp.arange(n_ctx)[None, None, :] < anchors[..., None]
    # the twin has no code table (codes may be None): only DSpine gathers from it
    anchor_code = inj.code(codes, block_tokens[..., 0], shape.transfer_rank) if shape.injection else None
    true_codes = None
    if shape.injection and true_tokens is not None:
        true_codes = inj.code(codes, true_tokens[..., :-1], shape.transfer_rank)
    features = []
    pre_write = h
    for i in range(shape.n_layer):
        h = _layer(shape, p, i, h, kv[i], positions, ctx_allowed)
        pre_write = h
        if shape.injection:
            swap = replace if (true_codes is not None and replace is not None and i < replacement_layers) else None
            h = inj.inject(shape, p, i, h, anchor_code, true_codes if swap is not None else None, swap)
            features.append(inj.feature(p, i, h, shape.transfer_rank))
    return {
        "final": rms_norm(h, p["norm.weight"], shape.rms_eps),
        "pre_write": pre_write,
        "features": jnp.stack(features) if features else jnp.zeros((0,)),
    }


def shape_of_golden(config: dict, block: int) -> DrafterShape:
    """The shape of a reference config.json (a golden file's or an exported checkpoint's)."""
    d = config["dspine_config"]
    return DrafterShape(
        n_layer=config["num_hidden_layers"], n_embd=config["hidden_size"], n_ff=config["intermediate_size"],
        n_head=config["num_attention_heads"], n_head_kv=config["num_key_value_heads"], head_dim=config["head_dim"],
        rope_theta=float(config.get("rope_theta") or config["rope_parameters"]["rope_theta"]),
        rms_eps=config["rms_norm_eps"], n_taps=len(config["dflash_config"]["target_layer_ids"]), block_size=block,
        transfer_rank=d["transfer_rank"], message_size=d["message_size"], top_k=d["top_k"], injection=True,
    )  # fmt: skip


def as_jax(params: dict) -> dict:
    return {k: jnp.asarray(np.asarray(v, np.float32)) for k, v in params.items()}
