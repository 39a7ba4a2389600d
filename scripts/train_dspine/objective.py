"""The authors' training objective (SpecForge's DSpine objective, ../shared/DSPINE.md
"Training"), written from its description. Over the proposal rows t = 1..n-1 of each
block, weighted exp(-(t-1)/gamma) and cut at the first row past the sequence's end:

- base: ce_weight * CE(label) + (1 - ce_weight) * L1(softmax(base logits), teacher), the
  teacher being the target's own next-token distribution at that position;
- refinement: the last layer's write redone with the TRUE predecessor's code, scored over
  the base logits' top-k candidates: the same CE/L1 mix, CE only where the label is among the
  candidates, L1 against the teacher renormalised over them (only where they hold > 1e-4);
- alignment: 1 - cos(post-write feature of every layer, the label's code), weighted by
  beta * (this batch's mean CE), beta warming up linearly to `alignment_weight`;
- predecessor replacement: with probability q a block's first `replacement_layers` layers
  get the true codes as predecessors; q holds until `hold` of training, falls to 0 by `end`.

The embeddings/head and the codes are arguments, never trained. Each term is a flag."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from . import injection as inj
from .drafter import DrafterShape, block_forward, context_kv


@dataclass(frozen=True)
class Objective:
    ce_weight: float = 0.1
    l1: bool = True  # False: CE alone on the base logits (and on the refined scores)
    refinement: bool = True
    alignment: bool = True
    alignment_weight: float = 0.5
    alignment_warmup: int = 146
    replacement: bool = True
    replacement_layers: int = 3
    replacement_probability: float = 0.5
    replacement_hold: float = 1 / 6
    replacement_end: float = 1 / 3
    gamma: float = 7.0
    mass_threshold: float = 1e-4

    def schedule(self, step: int, total: int) -> tuple[float, float]:
        """(alignment beta, replacement probability) at `step` of `total`."""
        beta = self.alignment_weight * (min(step / self.alignment_warmup, 1.0) if self.alignment_warmup else 1.0)
        if not self.alignment:
            beta = 0.0
        progress = step / max(total, 1)
        fraction = (self.replacement_end - progress) / (self.replacement_end - self.replacement_hold)
        q = self.replacement_probability * min(max(fraction, 0.0), 1.0) if self.replacement else 0.0
        return beta, q


def make_loss(shape: DrafterShape, obj: Objective):
    offsets = jnp.arange(shape.block_size - 1)
    decay = jnp.exp(-offsets / obj.gamma)
    mix = obj.ce_weight if obj.l1 else 1.0

    def loss_fn(params, embed, codes, taps, teacher_h, btoks, anchors, labels, valid, replace, beta):
        """taps [S, L, taps*H]; teacher_h [S, A, n-1, H] (the target's final hidden that predicts each
        label); btoks/labels/valid [S, A, n]; replace [S, A] bool; beta: this step's alignment weight."""
        kv = context_kv(shape, params, taps)
        out = block_forward(shape, params, codes, embed, kv, btoks, anchors, labels, replace, obj.replacement_layers)
        supervised = jnp.cumprod(valid[..., 1:].astype(jnp.int32), axis=-1).astype(jnp.float32)
        weights = supervised * decay
        denominator = jnp.maximum(weights.sum(), 1.0)
        target = labels[..., 1:]
        logits = out["final"][..., 1:, :] @ embed.T
        logp = jax.nn.log_softmax(logits, axis=-1)
        teacher = jax.nn.softmax(teacher_h @ embed.T, axis=-1)
        ce = -jnp.take_along_axis(logp, target[..., None], axis=-1)[..., 0]
        l1 = jnp.abs(jnp.exp(logp) - teacher).sum(-1) if obj.l1 else jnp.zeros_like(ce)
        ce_sum = (ce * weights).sum()
        total = mix * ce_sum + (1 - mix) * (l1 * weights).sum()
        hits = (jnp.argmax(logits, -1) == target) * supervised
        metrics = {"ce": ce_sum / denominator, "l1": (l1 * weights).sum() / denominator,
                   "acc": hits.sum() / jnp.maximum(supervised.sum(), 1.0)}  # fmt: skip
        if shape.injection and obj.refinement:
            _, candidates = jax.lax.top_k(jax.lax.stop_gradient(logits), shape.top_k)
            scores = inj.teacher_scores(shape, params, codes, embed, out["pre_write"][..., 1:, :], candidates,
                                        labels[..., :-1])  # fmt: skip
            rlogp = jax.nn.log_softmax(scores, axis=-1)
            covered = candidates == target[..., None]
            r_ce = -(rlogp * covered).sum(-1)
            on_cands = jnp.take_along_axis(teacher, candidates, axis=-1)
            mass = on_cands.sum(-1)
            on_cands = on_cands / jnp.maximum(mass, 1e-30)[..., None]
            r_l1 = jnp.abs(jnp.exp(rlogp) - on_cands).sum(-1) * (mass > obj.mass_threshold) if obj.l1 else 0.0
            refinement = ((mix * r_ce + (1 - mix) * r_l1) * weights).sum()
            total = total + refinement
            metrics["refinement"] = refinement / denominator
            metrics["coverage"] = (covered.any(-1) * supervised).sum() / jnp.maximum(supervised.sum(), 1.0)
        if shape.injection and obj.alignment:
            ref = inj.code(codes, target, shape.transfer_rank)  # [S, A, n-1, r]
            feats = out["features"][..., 1:, :]  # [L, S, A, n-1, r]
            cos = (feats * ref).sum(-1) / (
                jnp.maximum(jnp.linalg.norm(feats, axis=-1), 1e-8) * jnp.maximum(jnp.linalg.norm(ref, axis=-1), 1e-8)
            )
            alignment = ((1 - cos) * weights).sum()
            total = total + beta * jax.lax.stop_gradient(ce_sum / denominator) * alignment
            metrics["alignment"] = alignment / denominator
        return total / denominator, metrics

    return loss_fn
