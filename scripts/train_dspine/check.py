"""Self-checks of the JAX drafter against properties the llama.cpp side must share
(docs/dspine-variant.md), on small random inputs:

- prefix consistency: with causal block attention and the forward-only injection, a block of
  k positions drafts exactly the first k positions of the full block;
- a DSpine drafter whose `inj_write` is zero computes what the injection-off twin computes;
- a drafter layer copied from a target block (Q/K un-permuted to NeoX order) attends exactly
  as the target block does with llama.cpp's NORM rope on the GGUF weights."""

from __future__ import annotations

from dataclasses import replace

import jax.numpy as jnp
import numpy as np

from .drafter import DrafterShape, _gguf_qk_to_neox, context_kv, draft_hidden, rope_neox
from .target import TargetShape, rope_angles, rope_norm


def _shape(injection: bool) -> DrafterShape:
    return DrafterShape(n_layer=2, n_embd=32, n_ff=48, n_head=4, n_head_kv=2, head_dim=8, rope_theta=10000.0,
                        rms_eps=1e-5, n_taps=3, block_size=8, transfer_dim=6, injection=injection)  # fmt: skip


def _random_params(shape: DrafterShape, rng: np.random.Generator) -> dict:
    from .drafter import init_params

    target = TargetShape(4, shape.n_embd, shape.n_ff, shape.n_head, shape.n_head_kv, shape.head_dim, 1e4, 1e-5, 50)
    p = init_params(shape, target, {}, rng, from_target=False)
    return {k: (v + rng.standard_normal(v.shape).astype(np.float32) * 0.3) for k, v in p.items()}


def _draft(shape, p, embed, feats, toks, anchors):
    kv = context_kv(shape, p, feats)
    return np.asarray(draft_hidden(shape, p, embed, kv, toks, anchors))


def run_checks() -> list[str]:
    rng = np.random.default_rng(0)
    shape = _shape(True)
    p = {k: jnp.asarray(v) for k, v in _random_params(shape, rng).items()}
    embed = jnp.asarray(rng.standard_normal((50, shape.n_embd)).astype(np.float32))
    feats = jnp.asarray(rng.standard_normal((1, 20, shape.n_taps * shape.n_embd)).astype(np.float32))
    toks = jnp.asarray(rng.integers(0, 50, (1, 2, shape.block_size)).astype(np.int32))
    anchors = jnp.asarray(np.array([[5, 12]], np.int32))
    done = []

    full = _draft(shape, p, embed, feats, toks, anchors)
    for k in (1, 3, 5):
        short = _draft(replace(shape, block_size=k), p, embed, feats, toks[..., :k], anchors)
        assert np.allclose(short, full[..., :k, :], atol=1e-5), f"prefix consistency fails at k={k}"
    done.append("prefix consistency (k = 1, 3, 5 of 8)")

    zeroed = {k: (jnp.zeros_like(v) if ".writes." in k else v) for k, v in p.items()}
    off = {k: v for k, v in p.items() if not k.startswith("injection.")}
    a = _draft(shape, zeroed, embed, feats, toks, anchors)
    b = _draft(_shape(False), off, embed, feats, toks, anchors)
    assert np.allclose(a, b, atol=1e-6), "zeroed writes differ from the injection-off drafter"
    done.append("zeroed inj_write == injection off")

    wq = rng.standard_normal((shape.n_head * shape.head_dim, shape.n_embd)).astype(np.float32)
    x = rng.standard_normal((1, 7, shape.n_embd)).astype(np.float32)
    cos, sin = rope_angles(jnp.arange(7) + 3, shape.head_dim, 1e4)
    q_norm = rope_norm(jnp.asarray(x @ wq.T).reshape(1, 7, shape.n_head, shape.head_dim), cos, sin)
    q_neox = rope_neox(jnp.asarray(x @ _gguf_qk_to_neox(wq, shape.n_head).T).reshape(1, 7, shape.n_head, -1), cos, sin)
    # the same vectors up to a fixed permutation inside each head: dot products (attention) agree
    gram_norm = np.einsum("bthd,bshd->bhts", np.asarray(q_norm), np.asarray(q_norm))
    gram_neox = np.einsum("bthd,bshd->bhts", np.asarray(q_neox), np.asarray(q_neox))
    assert np.allclose(gram_norm, gram_neox, atol=1e-3), "un-permuted Q/K under NeoX rope differ from NORM rope"
    done.append("target Q/K under NORM rope == un-permuted Q/K under NeoX rope")
    return done
