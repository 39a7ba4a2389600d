"""The training loop: AdamW with warmup and cosine decay over the whole step budget, gradient
clipping at 1, checkpoints that resume (params, optimizer, step, the sampler's position and
RNG), the objective of objective.py with its schedule evaluated at each step."""

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
from .drafter import DrafterShape
from .model_io import load_checkpoint, save_checkpoint, shape_json
from .objective import Objective, make_loss


def make_optimizer(lr: float, total_steps: int, warmup: int) -> optax.GradientTransformation:
    schedule = optax.warmup_cosine_decay_schedule(0.0, lr, warmup, max(total_steps, warmup + 1), lr * 0.1)
    return optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=0.01))


def teacher_rows(final_h: np.ndarray, anchors: np.ndarray, block: int) -> np.ndarray:
    """The target's final hidden that predicts each proposal's label: position anchor + t - 1
    for row t = 1..n-1 -> [S, A, n-1, H] (clamped inside the array; past the end is unsupervised)."""
    pos = np.minimum(anchors[..., None] + np.arange(block - 1), final_h.shape[1] - 1)
    return final_h[np.arange(final_h.shape[0])[:, None, None], pos]


def train(
    run: Path,
    data: Dataset,
    shape: DrafterShape,
    init: Callable[[], dict],
    embed: np.ndarray,
    codes: np.ndarray,
    mask_id: int,
    objective: Objective,
    total_steps: int,
    minutes: float,
    checkpoint_minutes: float,
    seqs_per_step: int,
    anchors_per_seq: int,
    lr: float,
    seed: int,
    stop_at: int | None = None,
    weights: dict[str, int] | None = None,
) -> dict:
    """Trains until `total_steps` (or `stop_at`) or `minutes` of wall clock in this call;
    resumes from run/checkpoint when there is one. Returns the params."""
    run.mkdir(parents=True, exist_ok=True)
    embed_j, codes_j = jnp.asarray(embed), jnp.asarray(codes)
    optimizer = make_optimizer(lr, total_steps, warmup=min(50, total_steps // 10 + 1))
    sampler = Sampler(data, seqs_per_step, anchors_per_seq, seed, weights)
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
        try:
            sampler.restore(state["sampler"])
        except ValueError as e:
            raise SystemExit(f"{run}/checkpoint: {e}") from None
        print(f"resumed {run.name} at step {step}/{total_steps} ({spent / 60:.1f} min spent before)", flush=True)
    loss_fn = make_loss(shape, objective)

    @jax.jit
    def update(params, opt_state, embed, codes, taps, teacher_h, btoks, anchors, labels, valid, replace, beta):
        (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            params, embed, codes, taps, teacher_h, btoks, anchors, labels, valid, replace, beta
        )
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, metrics

    def checkpoint() -> None:
        save_checkpoint(run, params, opt_state, {"step": step, "seconds": spent, "sampler": sampler.state(),
                                                 "shape": shape_json(shape), "total_steps": total_steps,
                                                 "sequences": len(data.sequences)})  # fmt: skip

    start = last_ckpt = time.monotonic()
    log = (run / "log.jsonl").open("a")
    recent: list[float] = []
    last = min(total_steps, stop_at or total_steps)
    while step < last and time.monotonic() - start < minutes * 60:
        t0 = time.monotonic()
        ids, anchors = sampler.next()
        taps, final_h, toks = data.context(ids)
        lengths = np.asarray([data.sequences[i]["length"] for i in ids])
        btoks, labels, valid = blocks(toks, lengths, anchors, shape.block_size, mask_id)
        beta, q = objective.schedule(step, total_steps)
        # the replacement draw depends on the step alone, so a resumed run draws what it would have
        replace = np.random.default_rng([seed, step]).random(anchors.shape) < q
        params, opt_state, loss, metrics = update(
            params, opt_state, embed_j, codes_j, taps, teacher_rows(final_h, anchors, shape.block_size), btoks,
            anchors, labels, valid, replace, np.float32(beta),
        )  # fmt: skip
        loss_v = float(loss)
        step += 1
        took = time.monotonic() - t0
        spent += took
        recent = (recent + [took])[-20:]
        row = {"step": step, "loss": loss_v, "seconds": spent, "beta": beta, "replace_p": q}
        row.update({k: float(v) for k, v in metrics.items()})
        log.write(json.dumps(row) + "\n")
        log.flush()
        if step % 10 == 0 or step == total_steps:
            per = sum(recent) / len(recent)
            print(f"{run.name} step {step}/{total_steps} loss {loss_v:.3f} ce {row['ce']:.3f} acc {row['acc']:.3f} "
                  f"{per:.1f} s/step, {(total_steps - step) * per / 60:.0f} min left of the budget "
                  f"({spent / 60:.1f} min spent, {len(data.sequences)} sequences)", flush=True)  # fmt: skip
        if time.monotonic() - last_ckpt > checkpoint_minutes * 60:
            checkpoint()
            last_ckpt = time.monotonic()
    log.close()
    checkpoint()
    print(f"{run.name}: checkpoint at step {step}/{total_steps} in {run / 'checkpoint'}", flush=True)
    return {k: np.asarray(v) for k, v in params.items()}
