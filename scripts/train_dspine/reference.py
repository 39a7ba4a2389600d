"""What an exported drafter drafts, by the trainer's own forward, right after a prefill of a
held-out prompt: the target produces `anchor` next, then the block [anchor, MASK x 15] drafts
`refined` (the lattice walk; `base`: the base top-1, which is also the twin's draft) over the
JAX target's features of the prompt. The patched llama-server, given the converted export and
the same prompt, must draft the same tokens wherever the call is not a near tie: `clear` counts
the leading positions whose deciding gap (the walk's top-2 gap, the base top-2 gap, the top-k
boundary) is at least `margin` logits, since llama.cpp's 8-bit activations move the taps."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from . import injection as inj
from .data import Dataset, blocks
from .drafter import DrafterShape, block_forward, context_kv


def _clear(gaps: np.ndarray, margin: float) -> int:
    low = np.flatnonzero(gaps < margin)
    return int(low[0]) if len(low) else int(len(gaps))


# The server's target must produce the anchor too: where the JAX target's first token leads its
# second by less (0.23 and 0.15 logits were seen), llama-server's 8-bit activations picked the
# other one, and the drafts that follow were of another block.
ANCHOR_MARGIN = 0.5


def _spread_clear_anchors(data: Dataset, embed, count: int) -> list[int]:
    """`count` held-out sequences with a block's worth of continuation, spread over the held-out
    set, each the first at or after its place whose anchor is clear of a near tie."""
    held = [i for i in data.split(held_out=True) if data.sequences[i]["length"] >= data.sequences[i]["prompt"] + 16]
    head = np.asarray(embed, np.float32).T
    picked: list[int] = []
    for start in range(0, len(held), max(1, len(held) // count)):
        for i in held[start:]:
            if i in picked:
                continue
            _, final_h, _ = data.context([i])
            logits = final_h[0, data.sequences[i]["prompt"] - 1] @ head
            top = np.sort(logits)[-2:]
            if top[1] - top[0] >= ANCHOR_MARGIN:
                picked.append(i)
                break
        if len(picked) == count:
            break
    return picked


def reference_drafts(data: Dataset, shape: DrafterShape, params: dict, embed, codes, mask_id: int, count: int = 8,
                     margin: float = 0.05) -> list[dict]:  # fmt: skip
    p = {k: jnp.asarray(v) for k, v in params.items()}
    embed_j = jnp.asarray(embed)
    codes_j = jnp.asarray(codes) if codes is not None else None
    out = []
    for i in _spread_clear_anchors(data, embed, count):
        seq = data.sequences[i]
        a = seq["prompt"]
        taps, _, toks = data.context([i])
        anchors = np.asarray([[a]], np.int32)
        btoks, labels, _ = blocks(toks, np.asarray([seq["length"]]), anchors, shape.block_size, mask_id)
        o = block_forward(shape, p, codes_j, embed_j, context_kv(shape, p, jnp.asarray(taps)), jnp.asarray(btoks),
                          jnp.asarray(anchors))  # fmt: skip
        logits = np.asarray(o["final"][0, 0, 1:] @ embed_j.T)
        order = np.argsort(-logits, axis=-1)
        top = np.take_along_axis(logits, order[:, : shape.top_k + 1], axis=-1)
        base_gap = top[:, 0] - top[:, 1]
        record = {"family": seq.get("family"), "prompt_tokens": seq["tokens"][:a], "anchor": int(toks[0, a]),
                  "target": labels[0, 0, 1:].tolist(), "base": order[:, 0].tolist(),
                  "clear_base": _clear(base_gap, margin), "gaps_base": base_gap.round(4).tolist()}  # fmt: skip
        if shape.injection:
            cands = jnp.asarray(order[None, :, : shape.top_k])
            scores = np.asarray(inj.lattice(shape, p, codes_j, embed_j, o["pre_write"][0, :, 1:], cands,
                                            jnp.asarray([int(toks[0, a])])))[0]  # fmt: skip
            picked = inj.walk(scores, order[:, : shape.top_k])
            # a position's call is close when the walk's top two are close, or when the picked
            # candidate is close to falling out of the top-k (its base logit against the (k+1)-th)
            rows, idx = [], 0
            for t in range(scores.shape[0]):
                row = np.sort(scores[t, idx])[::-1]
                idx = int(np.argmax(scores[t, idx]))
                rows.append(min(row[0] - row[1], top[t, idx] - top[t, shape.top_k]))
            record["refined"] = picked.tolist()
            gaps = np.asarray(rows)
            record["clear_refined"] = _clear(gaps, margin)
            record["gaps_refined"] = gaps.round(4).tolist()
        out.append(record)
    return out
