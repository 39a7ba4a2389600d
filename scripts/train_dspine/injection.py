"""DSpine's adjacent injection and its last-write refinement (../shared/DSPINE.md), in JAX.

After every layer l, for block rows t >= 1 (the anchor row t = 0 is untouched):
  f_t = sqrt(r) * normalize(R_l h_t)                        the row's feature
  p_1 = sqrt(r) * codes[anchor],  p_t = f_{t-1} (t >= 2)      its predecessor
  g_t = sigmoid(G_recv f_t + G_pred p_t + b)                  a gate vector of s
  h_t <- h_t + (||h_t|| / sqrt(H)) * W_l (g_t * (M p_t))      the write, relative to rms(h)
M, G_recv, G_pred and b are shared by all layers; R_l and W_l are per layer; codes [V, r]
are fixed (never trained).

Refinement redoes the last layer's write on its pre-write rows with the code of each
predecessor candidate instead of a feature, final-norms, and scores the candidates."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .norms import rms_norm


def l2_normalise(x: jax.Array) -> jax.Array:
    return x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def code(codes: jax.Array, ids: jax.Array, rank: int) -> jax.Array:
    return np.float32(np.sqrt(rank)) * codes[ids]


def feature(p: dict, layer: int, h: jax.Array, rank: int) -> jax.Array:
    return np.float32(np.sqrt(rank)) * l2_normalise(h.astype(jnp.float32) @ p[f"injection.readouts.{layer}.weight"].T)


def gate(p: dict, receiver: jax.Array, predecessor: jax.Array) -> jax.Array:
    """The gate vector (one value per message entry, not a scalar)."""
    return jax.nn.sigmoid(
        receiver @ p["injection.receiver_gate.weight"].T
        + predecessor @ p["injection.predecessor_gate.weight"].T
        + p["injection.bias"]
    )


def write(p: dict, layer: int, h: jax.Array, receiver: jax.Array, predecessor: jax.Array) -> jax.Array:
    message = gate(p, receiver, predecessor) * (predecessor @ p["injection.message.weight"].T)
    scale = jnp.linalg.norm(h.astype(jnp.float32), axis=-1, keepdims=True) / np.float32(np.sqrt(h.shape[-1]))
    return h + scale * (message @ p[f"injection.writes.{layer}.weight"].T)


def inject(shape, p: dict, layer: int, h: jax.Array, anchor_code, true_codes=None, replace=None) -> jax.Array:
    """h [..., T, H] after layer `layer`; anchor_code [..., r]. `true_codes` [..., T-1, r] and
    `replace` [...] (bool): the predecessors of a replaced block are the true codes (training)."""
    f = feature(p, layer, h, shape.transfer_rank)
    predecessors = jnp.concatenate([anchor_code[..., None, :], f[..., 1:-1, :]], axis=-2)
    if replace is not None:
        predecessors = jnp.where(replace[..., None, None], true_codes, predecessors)
    written = write(p, layer, h[..., 1:, :], f[..., 1:, :], predecessors)
    return jnp.concatenate([h[..., :1, :], written], axis=-2)


def _refined(shape, p: dict, codes, pre_write: jax.Array, predecessor_ids: jax.Array) -> jax.Array:
    """final_norm(last write on pre_write with p = code(predecessor)): pre_write [..., H] broadcast
    against predecessor_ids [...]."""
    last = shape.n_layer - 1
    receiver = feature(p, last, pre_write, shape.transfer_rank)
    predecessor = code(codes, predecessor_ids, shape.transfer_rank)
    return rms_norm(write(p, last, pre_write, receiver, predecessor), p["norm.weight"], shape.rms_eps)


def lattice(shape, p: dict, codes, head, pre_write: jax.Array, candidates: jax.Array, anchors: jax.Array):
    """Inference's [.., n-1, k, k] scores: pre_write [..., n-1, H] (rows 1..n-1), candidates
    [..., n-1, k], anchors [...]. scores[i, a, b] = refined(row i+1, predecessor a) . head[C_i[b]],
    predecessor a = the anchor for i = 0, else candidate a of position i-1."""
    k = candidates.shape[-1]
    first = jnp.broadcast_to(anchors[..., None, None], (*anchors.shape, 1, k))
    before = jnp.concatenate([first, candidates[..., :-1, :]], axis=-2)  # [..., n-1, k]
    rows = jnp.broadcast_to(pre_write[..., None, :], (*before.shape, pre_write.shape[-1]))
    refined = _refined(shape, p, codes, rows, before)  # [..., n-1, k(a), H]
    return jnp.einsum("...ah,...bh->...ab", refined, head[candidates])


def teacher_scores(shape, p: dict, codes, head, pre_write, candidates, predecessor_ids):
    """Training's refined scores [..., n-1, k]: each row's write redone with its TRUE predecessor's
    code (the anchor's, then the labels'), scored against that row's own candidates."""
    refined = _refined(shape, p, codes, pre_write, predecessor_ids)
    return jnp.einsum("...h,...bh->...b", refined, head[candidates])


def walk(scores: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Greedy from the anchor: the row of position i is the slot chosen at i-1. [..., n-1, k, k]."""
    scores, candidates = np.asarray(scores), np.asarray(candidates)
    lead = scores.shape[:-3]
    index = np.zeros(lead, np.int64)
    chosen = np.zeros((*lead, scores.shape[-3]), np.int64)
    for i in range(scores.shape[-3]):
        row = np.take_along_axis(scores[..., i, :, :], index[..., None, None], axis=-2)[..., 0, :]
        index = np.argmax(row, axis=-1)
        chosen[..., i] = np.take_along_axis(candidates[..., i, :], index[..., None], axis=-1)[..., 0]
    return chosen
