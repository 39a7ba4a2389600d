"""The DSpine drafter (docs/dspine-variant.md) as llama.cpp's dflash graph computes it, in JAX.

Parameters are kept under the HF/safetensors names of the checkpoint (PyTorch order,
[out, in]), so export is a rename-free write. The draft pass, for a block
[anchor token, MASK x 15] at positions a .. a+15 over the target features of positions < a:

- context K/V per layer: k_norm(wk . ctx) roped at its position, wv . ctx, with
  ctx = enc_norm(fc . features) (`hidden_norm` here), no attn_norm (dflash.cpp's embd branch);
- the block: the target's token embeddings, then Qwen3-style layers (attn_norm, q/k norms,
  NeoX rope, GQA, causal inside the block), each followed by the adjacent causal injection;
- output_norm and the target's tied head."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .target import TargetShape, rms_norm, rope_angles


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
    transfer_dim: int
    injection: bool
    causal: bool = True
    write_init_std: float = 0.0


def rope_neox(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """llama.cpp's NEOX rope (the dflash arch's): rotates (x[i], x[i + D/2]); x: [..., T, H, D]."""
    half = x.shape[-1] // 2
    x0, x1 = x[..., :half], x[..., half:]
    c, s = cos[..., None, :], sin[..., None, :]
    return jnp.concatenate([x0 * c - x1 * s, x0 * s + x1 * c], axis=-1)


def _gguf_qk_to_neox(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's converter permutation of a llama Q/K weight (NORM rope) so that the
    NeoX rope of a dflash-arch layer computes the same attention."""
    out_dim = w.shape[0]
    hd = out_dim // n_head
    return w.reshape(n_head, hd // 2, 2, -1).swapaxes(1, 2).reshape(w.shape)


def init_params(
    shape: DrafterShape, target: TargetShape, tw: dict[str, np.ndarray], rng: np.random.Generator, from_target: bool
) -> dict[str, np.ndarray]:
    """A new drafter. `from_target`: its layers start as copies of the target's last blocks and
    `fc` picks the deepest tap (a warm start for a short budget); otherwise all random
    (the random baseline of the same shape)."""

    def normal(*dims: int, std: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(dims) * std).astype(np.float32)

    d, hd = shape.n_embd, shape.head_dim
    p: dict[str, np.ndarray] = {}
    p["fc.weight"] = normal(d, shape.n_taps * d)
    p["hidden_norm.weight"] = np.ones(d, np.float32)
    p["norm.weight"] = np.ones(d, np.float32)
    if from_target:
        p["fc.weight"][:, (shape.n_taps - 1) * d :] += np.eye(d, dtype=np.float32)
        p["norm.weight"] = tw["output_norm.weight"].copy()
    first = target.n_layer - shape.n_layer
    for i in range(shape.n_layer):
        pre = f"layers.{i}."
        if from_target:
            t = f"blk.{first + i}."
            p[pre + "input_layernorm.weight"] = tw[t + "attn_norm.weight"].copy()
            p[pre + "self_attn.q_proj.weight"] = _gguf_qk_to_neox(tw[t + "attn_q.weight"], shape.n_head)
            p[pre + "self_attn.k_proj.weight"] = _gguf_qk_to_neox(tw[t + "attn_k.weight"], shape.n_head_kv)
            p[pre + "self_attn.v_proj.weight"] = tw[t + "attn_v.weight"].copy()
            p[pre + "self_attn.o_proj.weight"] = tw[t + "attn_output.weight"].copy()
            p[pre + "post_attention_layernorm.weight"] = tw[t + "ffn_norm.weight"].copy()
            p[pre + "mlp.gate_proj.weight"] = tw[t + "ffn_gate.weight"].copy()
            p[pre + "mlp.up_proj.weight"] = tw[t + "ffn_up.weight"].copy()
            p[pre + "mlp.down_proj.weight"] = tw[t + "ffn_down.weight"].copy()
            if i == 0:
                p["hidden_norm.weight"] = tw[t + "attn_norm.weight"].copy()
        else:
            p[pre + "input_layernorm.weight"] = np.ones(d, np.float32)
            p[pre + "self_attn.q_proj.weight"] = normal(shape.n_head * hd, d)
            p[pre + "self_attn.k_proj.weight"] = normal(shape.n_head_kv * hd, d)
            p[pre + "self_attn.v_proj.weight"] = normal(shape.n_head_kv * hd, d)
            p[pre + "self_attn.o_proj.weight"] = normal(d, shape.n_head * hd)
            p[pre + "post_attention_layernorm.weight"] = np.ones(d, np.float32)
            p[pre + "mlp.gate_proj.weight"] = normal(shape.n_ff, d)
            p[pre + "mlp.up_proj.weight"] = normal(shape.n_ff, d)
            p[pre + "mlp.down_proj.weight"] = normal(d, shape.n_ff)
        p[pre + "self_attn.q_norm.weight"] = np.ones(hd, np.float32)
        p[pre + "self_attn.k_norm.weight"] = np.ones(hd, np.float32)
        if shape.injection:
            p[f"injection.norms.{i}.weight"] = np.ones(d, np.float32)
            p[f"injection.readouts.{i}.weight"] = normal(shape.transfer_dim, d)
            # The write starts small, not zero: at zero the first session's run (271 steps) left
            # the bridge almost shut (norm ~1 against ~117 for an attention output), so DSpine
            # computed what its twin did. Small keeps the warm start's drafts nearly intact.
            p[f"injection.writes.{i}.weight"] = normal(d, shape.transfer_dim, std=shape.write_init_std)
            p[f"injection.gates.{i}.weight"] = normal(1, d)
            p[f"injection.gates.{i}.bias"] = np.zeros(1, np.float32)
    return p


def context_kv(shape: DrafterShape, p: dict[str, jax.Array], features: jax.Array) -> list[tuple[jax.Array, jax.Array]]:
    """features [S, L, taps*n_embd] -> per layer (K [S, L, Hkv, D] roped at 0..L-1, V [S, L, Hkv, D])."""
    s, n, _ = features.shape
    ctx = rms_norm(features @ p["fc.weight"].T, p["hidden_norm.weight"], shape.rms_eps)
    cos, sin = rope_angles(jnp.arange(n), shape.head_dim, shape.rope_theta)
    out = []
    for i in range(shape.n_layer):
        pre = f"layers.{i}.self_attn."
        k = (ctx @ p[pre + "k_proj.weight"].T).reshape(s, n, shape.n_head_kv, shape.head_dim)
        v = (ctx @ p[pre + "v_proj.weight"].T).reshape(s, n, shape.n_head_kv, shape.head_dim)
        k = rope_neox(rms_norm(k, p[pre + "k_norm.weight"], shape.rms_eps), cos, sin)
        out.append((k, v))
    return out


def _inject(shape: DrafterShape, p: dict[str, jax.Array], i: int, h: jax.Array) -> jax.Array:
    """h [S, A, T, n_embd]: each block position t receives position t-1's code (the anchor, 0)."""
    x = rms_norm(h, p[f"injection.norms.{i}.weight"], shape.rms_eps)
    code = x @ p[f"injection.readouts.{i}.weight"].T
    message = jnp.pad(code[:, :, :-1], ((0, 0), (0, 0), (1, 0), (0, 0)))
    gate = jax.nn.sigmoid(x @ p[f"injection.gates.{i}.weight"].T + p[f"injection.gates.{i}.bias"])
    return h + gate * (message @ p[f"injection.writes.{i}.weight"].T)


def draft_hidden(
    shape: DrafterShape,
    p: dict[str, jax.Array],
    embed: jax.Array,
    kv: list[tuple[jax.Array, jax.Array]],
    block_tokens: jax.Array,
    anchors: jax.Array,
) -> jax.Array:
    """block_tokens [S, A, T] at positions anchors[S, A] + t, over context positions < anchor.

    Returns the normed final hidden state [S, A, T, n_embd] (the head is applied by the caller)."""
    s, a, t = block_tokens.shape
    n_ctx = kv[0][0].shape[1]
    h = embed[block_tokens]
    positions = anchors[..., None] + jnp.arange(t)
    cos, sin = rope_angles(positions, shape.head_dim, shape.rope_theta)
    ctx_mask = jnp.arange(n_ctx)[None, None, :] < anchors[..., None]  # [S, A, L]
    blk_mask = jnp.tril(jnp.ones((t, t), bool)) if shape.causal else jnp.ones((t, t), bool)
    rep = shape.n_head // shape.n_head_kv
    scale = 1.0 / np.sqrt(shape.head_dim)
    for i in range(shape.n_layer):
        pre = f"layers.{i}."
        x = rms_norm(h, p[pre + "input_layernorm.weight"], shape.rms_eps)
        q = (x @ p[pre + "self_attn.q_proj.weight"].T).reshape(s, a, t, shape.n_head, shape.head_dim)
        k = (x @ p[pre + "self_attn.k_proj.weight"].T).reshape(s, a, t, shape.n_head_kv, shape.head_dim)
        v = (x @ p[pre + "self_attn.v_proj.weight"].T).reshape(s, a, t, shape.n_head_kv, shape.head_dim)
        q = rope_neox(rms_norm(q, p[pre + "self_attn.q_norm.weight"], shape.rms_eps), cos, sin)
        k = rope_neox(rms_norm(k, p[pre + "self_attn.k_norm.weight"], shape.rms_eps), cos, sin)
        # GQA as ggml broadcasts it: query head h reads KV head h // rep
        qg = q.reshape(s, a, t, shape.n_head_kv, rep, shape.head_dim)
        kc, vc = kv[i]
        sc = jnp.einsum("satgrd,slgd->sagrtl", qg, kc) * scale
        sc = jnp.where(ctx_mask[:, :, None, None, None, :], sc, -jnp.inf)
        sb = jnp.einsum("satgrd,saugd->sagrtu", qg, k) * scale
        sb = jnp.where(blk_mask, sb, -jnp.inf)
        probs = jax.nn.softmax(jnp.concatenate([sc, sb], axis=-1), axis=-1)
        pc, pb = probs[..., :n_ctx], probs[..., n_ctx:]
        o = jnp.einsum("sagrtl,slgd->satgrd", pc, vc) + jnp.einsum("sagrtu,saugd->satgrd", pb, v)
        h = h + o.reshape(s, a, t, -1) @ p[pre + "self_attn.o_proj.weight"].T
        x = rms_norm(h, p[pre + "post_attention_layernorm.weight"], shape.rms_eps)
        ff = jax.nn.silu(x @ p[pre + "mlp.gate_proj.weight"].T) * (x @ p[pre + "mlp.up_proj.weight"].T)
        h = h + ff @ p[pre + "mlp.down_proj.weight"].T
        if shape.injection:
            h = _inject(shape, p, i, h)
    return rms_norm(h, p["norm.weight"], shape.rms_eps)
