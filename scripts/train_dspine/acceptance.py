"""Held-out acceptance length in JAX: tokens per verify step under greedy verification,
tau = 1 + the leading drafted tokens equal to the target's greedy tokens, block 16.

Modes: `refined` (DSpine as it drafts: the lattice walk over the base top-k), `base` (the
same DSpine drafter without refinement: the base logits' top-1 at each position, the
paper's ablation) and the DFlash twin (always `base`). Reported per category with the
spread over prompts (the standard deviation of the per-prompt means)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import injection as inj
from .data import Dataset, blocks
from .drafter import DrafterShape, block_forward, context_kv


def make_drafts(shape: DrafterShape, mask_id: int):
    @jax.jit
    def drafts(p, embed, codes, taps, btoks, anchors):
        out = block_forward(shape, p, codes, embed, context_kv(shape, p, taps), btoks, anchors)
        logits = out["final"][..., 1:, :] @ embed.T
        _, candidates = jax.lax.top_k(logits, shape.top_k)
        if not shape.injection:
            return candidates, jnp.zeros(())  # the twin has no lattice
        scores = inj.lattice(shape, p, codes, embed, out["pre_write"][..., 1:, :], candidates, btoks[..., 0])
        return candidates, scores

    return drafts


def acceptance(data: Dataset, shape: DrafterShape, params: dict, embed, codes, mask_id: int, stride: int = 4,
               chunk: int = 16, limit: int | None = None) -> dict:  # fmt: skip
    """{mode: {category: {tau, spread, prompts, blocks}}} over held-out sequences, every `stride`-th
    anchor with a full block inside the continuation."""
    p = {k: jnp.asarray(v) for k, v in params.items()}
    embed_j = jnp.asarray(embed)
    codes_j = jnp.asarray(codes if codes is not None else np.zeros((embed.shape[0], shape.transfer_rank), np.float32))
    drafts = make_drafts(shape, mask_id)
    modes = ["refined", "base"] if shape.injection else ["base"]
    per_prompt: dict[str, dict[str, list[float]]] = {m: {} for m in modes}
    blocks_seen: dict[str, int] = {}
    held = data.split(held_out=True)[:limit]
    for i in held:
        seq = data.sequences[i]
        cands = np.arange(seq["prompt"], seq["length"] - shape.block_size + 1, stride)
        if len(cands) == 0:
            continue
        taps, _, toks = data.context([i])
        taken = {m: [] for m in modes}
        for c0 in range(0, len(cands), chunk):
            part = cands[c0 : c0 + chunk]
            anchors = np.full((1, chunk), part[0], np.int32)
            anchors[0, : len(part)] = part
            btoks, labels, _ = blocks(toks, np.asarray([seq["length"]]), anchors, shape.block_size, mask_id)
            candidates, scores = drafts(p, embed_j, codes_j, taps, btoks, anchors)
            candidates = np.asarray(candidates)[0, : len(part)]
            guesses = {"base": candidates[..., 0]}
            if shape.injection:
                guesses["refined"] = inj.walk(np.asarray(scores)[0, : len(part)], candidates)
            for m in modes:
                right = guesses[m] == labels[0, : len(part), 1:]
                taken[m].extend((1 + np.cumprod(right, axis=1).sum(axis=1)).tolist())
        for m in modes:
            per_prompt[m].setdefault(seq["category"], []).append(float(np.mean(taken[m])))
        blocks_seen[seq["category"]] = blocks_seen.get(seq["category"], 0) + len(cands)
    return {
        m: {c: {"tau": float(np.mean(v)), "spread": float(np.std(v)), "prompts": len(v), "blocks": blocks_seen[c]}
            for c, v in sorted(cats.items())}
        for m, cats in per_prompt.items()
    }  # fmt: skip
