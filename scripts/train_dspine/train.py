"""Training and measuring: the loss, the optimizer, the loop that checkpoints and resumes,
and the held-out acceptance figure.

Loss: cross-entropy of the target's greedy token at every drafted block position through
the target's full tied head, weighted exp(-(t-1)/gamma) along the block (DFlash's decay:
an early miss ends the accepted run, so early positions matter more)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .data import Dataset, Sampler, blocks
from .drafter import DrafterShape, context_kv, draft_hidden
from .model_io import load_checkpoint, save_checkpoint, shape_json


def _forward_logits(shape: DrafterShape, params, embed, feats, btoks, anchors):
    kv = context_kv(shape, params, feats)
    h = draft_hidden(shape, params, embed, kv, btoks, anchors)
    return h @ embed.T


def make_loss(shape: DrafterShape, gamma: float) -> Callable:
    weights = jnp.exp(-jnp.maximum(jnp.arange(shape.block_size) - 1, 0) / gamma)

    # the frozen head is an argument, not a closed-over constant: XLA would try to fold it
    def loss_fn(params, embed, feats, btoks, anchors, labels, mask):
        logits = _forward_logits(shape, params, embed, feats, btoks, anchors)
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
        w = mask * weights
        hits = (jnp.argmax(logits, axis=-1) == labels) & mask
        return jnp.sum(ce * w) / jnp.maximum(jnp.sum(w), 1.0), jnp.sum(hits) / jnp.maximum(jnp.sum(mask), 1)

    return loss_fn


def make_optimizer(
    lr: float, total_steps: int, warmup: int, injection_lr_scale: float = 1.0
) -> optax.GradientTransformation:
    """AdamW with warmup and cosine decay; the injection's new tensors learn `injection_lr_scale`
    times faster than the layers copied from the target (which start trained, the bridge does not)."""
    schedule = optax.warmup_cosine_decay_schedule(0.0, lr, warmup, max(total_steps, warmup + 1), lr * 0.1)

    def labels(params):
        return {k: "injection" if k.startswith("injection.") else "rest" for k in params}

    return optax.chain(
        optax.clip_by_global_norm(1.0),
        optax.multi_transform(
            {
                "rest": optax.adamw(schedule, weight_decay=0.01),
                "injection": optax.adamw(lambda n: schedule(n) * injection_lr_scale, weight_decay=0.01),
            },
            labels,
        ),
    )


def train(
    run: Path,
    data: Dataset,
    shape: DrafterShape,
    init: Callable[[], dict],
    embed: np.ndarray,
    mask_id: int,
    total_steps: int,
    minutes: float,
    checkpoint_minutes: float,
    seqs_per_step: int,
    anchors_per_seq: int,
    lr: float,
    seed: int,
    gamma: float = 7.0,
    stop_at: int | None = None,
    injection_lr_scale: float = 1.0,
) -> dict:
    """Trains until `total_steps` or `minutes` of wall clock in this call, whichever first;
    resumes from run/checkpoint when there is one. Returns the params."""
    run.mkdir(parents=True, exist_ok=True)
    embed_j = jnp.asarray(embed)
    optimizer = make_optimizer(
        lr, total_steps, warmup=min(50, total_steps // 10 + 1), injection_lr_scale=injection_lr_scale
    )
    sampler = Sampler(data, seqs_per_step, anchors_per_seq, seed)
    params = {k: jnp.asarray(v) for k, v in init().items()}
    opt_state = optimizer.init(params)
    step, spent = 0, 0.0
    resumed = load_checkpoint(run, opt_state)
    if resumed is not None:
        p, opt_state, state = resumed
        if state["shape"] != shape_json(shape):
            raise SystemExit(f"{run}/checkpoint was made for another drafter shape: {state['shape']}")
        params = {k: jnp.asarray(v) for k, v in p.items()}
        step, spent = state["step"], state["seconds"]
        sampler.restore(state["sampler"])
        print(f"resumed {run.name} at step {step}/{total_steps} ({spent / 60:.1f} min spent before)", flush=True)
    loss_fn = make_loss(shape, gamma)

    @jax.jit
    def update(params, opt_state, embed, feats, btoks, anchors, labels, mask):
        (loss, acc), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            params, embed, feats, btoks, anchors, labels, mask
        )
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, acc

    def checkpoint() -> None:
        save_checkpoint(run, params, opt_state, {"step": step, "seconds": spent, "sampler": sampler.state(),
                                                 "shape": shape_json(shape), "total_steps": total_steps})  # fmt: skip

    start = time.monotonic()
    last_ckpt = start
    log = (run / "log.jsonl").open("a")
    recent: list[float] = []
    # stop_at ends this call early without touching the schedule, which spans total_steps:
    # two variants compared "at the same budget" stop at the same step
    last = min(total_steps, stop_at or total_steps)
    while step < last and time.monotonic() - start < minutes * 60:
        t0 = time.monotonic()
        ids, anchors = sampler.next()
        feats, toks = data.context(ids)
        lengths = np.asarray([data.sequences[i]["length"] for i in ids])
        btoks, labels, mask = blocks(toks, lengths, anchors, shape.block_size, mask_id)
        params, opt_state, loss, acc = update(params, opt_state, embed_j, feats, btoks, anchors, labels, mask)
        loss_v = float(loss)
        step += 1
        took = time.monotonic() - t0
        spent += took
        recent = (recent + [took])[-20:]
        log.write(json.dumps({"step": step, "loss": loss_v, "acc": float(acc), "seconds": spent}) + "\n")
        if step % 10 == 0 or step == total_steps:
            per = sum(recent) / len(recent)
            print(f"{run.name} step {step}/{total_steps} loss {loss_v:.3f} acc {float(acc):.3f} "
                  f"{per:.1f} s/step, {(total_steps - step) * per / 60:.1f} min left of the budget "
                  f"({spent / 60:.1f} min spent)", flush=True)  # fmt: skip
        if time.monotonic() - last_ckpt > checkpoint_minutes * 60:
            checkpoint()
            last_ckpt = time.monotonic()
    log.close()
    checkpoint()
    print(f"{run.name}: checkpoint at step {step}/{total_steps} in {run / 'checkpoint'}", flush=True)
    return {k: np.asarray(v) for k, v in params.items()}


def acceptance(
    data: Dataset, shape: DrafterShape, params: dict, embed: np.ndarray, mask_id: int, stride: int = 4, chunk: int = 16
) -> dict[str, dict[str, float]]:
    """Per category, over held-out sequences: the mean number of drafted tokens accepted per block
    under greedy verification (the run of leading positions whose argmax is the target's token),
    for every `stride`-th anchor with a full block inside the continuation. tau = accepted + 1 is
    tokens per verify step, the figure the DSpine tables quote."""
    p = {k: jnp.asarray(v) for k, v in params.items()}
    embed_j = jnp.asarray(embed)

    @jax.jit
    def drafts(p, embed, feats, btoks, anchors):
        return jnp.argmax(_forward_logits(shape, p, embed, feats, btoks, anchors), axis=-1)

    sums: dict[str, list[float]] = {}
    for i in data.split(held_out=True):
        seq = data.sequences[i]
        cands = np.arange(seq["prompt"], seq["length"] - shape.block_size + 1, stride)
        if len(cands) == 0:
            continue
        feats, toks = data.context([i])
        for c0 in range(0, len(cands), chunk):
            part = cands[c0 : c0 + chunk]
            anchors = np.full((1, chunk), part[0], np.int32)
            anchors[0, : len(part)] = part
            btoks, labels, _ = blocks(toks, np.asarray([seq["length"]]), anchors, shape.block_size, mask_id)
            guess = np.asarray(drafts(p, embed_j, feats, btoks, anchors))[0, : len(part), 1:]
            right = guess == labels[0, : len(part), 1:]
            accepted = np.cumprod(right, axis=1).sum(axis=1)
            acc = sums.setdefault(seq["category"], [0.0, 0.0, 0.0])
            acc[0] += float(accepted.sum())
            acc[1] += len(part)
            acc[2] += float(right[:, 0].sum())
    return {
        c: {"accepted": a / n, "tau": 1 + a / n, "first_position": f / n, "blocks": n}
        for c, (a, n, f) in sorted(sums.items())
    }


def reference_drafts(
    data: Dataset, shape: DrafterShape, params: dict, embed: np.ndarray, mask_id: int, count: int = 4
) -> list[dict]:
    """What this drafter drafts right after a prefill of `prompt_tokens`, for the llama.cpp side
    to compare with: the target produces `anchor` next, then the block [anchor, MASK x 15]
    drafts `drafts` (greedy), against the target's own next tokens `target`."""
    p = {k: jnp.asarray(v) for k, v in params.items()}
    out = []
    for i in data.split(held_out=True)[:: max(1, len(data.split(held_out=True)) // count)][:count]:
        seq = data.sequences[i]
        a = seq["prompt"]
        if seq["length"] < a + shape.block_size:
            continue
        feats, toks = data.context([i])
        anchors = np.asarray([[a]], np.int32)
        btoks, labels, _ = blocks(toks, np.asarray([seq["length"]]), anchors, shape.block_size, mask_id)
        guess = np.asarray(jnp.argmax(_forward_logits(shape, p, jnp.asarray(embed), feats, btoks, anchors), -1))
        out.append({"category": seq["category"], "prompt_tokens": seq["tokens"][:a], "anchor": int(toks[0, a]),
                    "drafts": guess[0, 0, 1:].tolist(), "target": labels[0, 0, 1:].tolist()})  # fmt: skip
    return out
