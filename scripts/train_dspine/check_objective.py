"""Checks of the objective (objective.py) that need no reference run, on a golden file's weights:

- training's refinement (each row's write redone with its TRUE predecessor's code) is the
  inference lattice's row of that predecessor: the two paths share one write;
- the schedule: alignment weight 0.25 halfway through its warm-up, replacement 0.5 until 1/6
  of training, 0.25 at 1/4, 0 from 1/3;
- predecessor replacement changes the first layers' writes, and nothing when q = 0 blocks;
- with every write zeroed and only the base terms on, DSpine's loss is its DFlash twin's;
- the loss's gradient reaches the injection's tensors and never the frozen head (an argument)."""

from __future__ import annotations

import json
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np

from . import injection as inj
from .drafter import as_jax, block_forward, context_kv, shape_of_golden
from .golden import GOLDEN
from .objective import Objective, make_loss


def _setup():
    data = dict(np.load(GOLDEN / "dspine-s1-b16.npz"))
    shape = shape_of_golden(json.loads(str(data["config_json"])), int(data["block_ids"].shape[0]))
    p = as_jax({k: data[k] for k in data if "." in k or k == "transfer_codes"})
    codes = p.pop("transfer_codes")
    rng = np.random.default_rng(0)
    v, n, h = data["head"].shape[0], shape.block_size, shape.n_embd
    labels = rng.integers(0, v - 1, (1, 2, n)).astype(np.int32)
    btoks = np.full((1, 2, n), 255, np.int32)
    btoks[..., 0] = labels[..., 0]
    batch = {
        "embed": jnp.asarray(data["head"]),  # one table as embedding and head, as SmolLM2 ties them
        "codes": codes,
        "taps": jnp.asarray(np.concatenate([data["target_hidden"], data["target_hidden"][:4]])[None]),
        "teacher_h": jnp.asarray(rng.standard_normal((1, 2, n - 1, h)).astype(np.float32)),
        "btoks": jnp.asarray(btoks),
        "anchors": jnp.asarray([[12, 16]], jnp.int32),
        "labels": jnp.asarray(labels),
        "valid": jnp.asarray(np.ones((1, 2, n), bool)),
    }
    return shape, p, batch


def run_objective_checks() -> list[str]:
    shape, p, b = _setup()
    done = []
    kv = context_kv(shape, p, b["taps"])
    out = block_forward(shape, p, b["codes"], b["embed"], kv, b["btoks"], b["anchors"])
    logits = out["final"][..., 1:, :] @ b["embed"].T
    _, cands = jax.lax.top_k(logits, shape.top_k)
    # predecessors: the anchor for row 1, the candidate in slot 0 of the row before after that
    preds = jnp.concatenate([b["btoks"][..., :1], cands[..., :-1, 0]], axis=-1)
    training = inj.teacher_scores(shape, p, b["codes"], b["embed"], out["pre_write"][..., 1:, :], cands, preds)
    lattice = inj.lattice(shape, p, b["codes"], b["embed"], out["pre_write"][..., 1:, :], cands, b["btoks"][..., 0])
    assert np.allclose(training, lattice[..., 0, :], rtol=1e-5, atol=1e-4), "training's refinement != the lattice"
    done.append("training's refined scores == the inference lattice's row of the same predecessor")

    obj = Objective()
    sched = [obj.schedule(s, 600) for s in (73, 100, 150, 200)]
    assert abs(sched[0][0] - 0.25) < 1e-9 and sched[2][0] == 0.5, sched
    assert sched[1][1] == 0.5 and abs(sched[2][1] - 0.25) < 1e-9 and sched[3][1] == 0.0, sched
    done.append("schedule: beta 0.25 at 73 of 146 warm-up steps; replacement 0.5 -> 0.25 at 1/4 -> 0 at 1/3")

    swapped = block_forward(shape, p, b["codes"], b["embed"], kv, b["btoks"], b["anchors"], b["labels"],
                            jnp.asarray([[True, False]]))["final"]  # fmt: skip
    assert not np.allclose(swapped[0, 0], out["final"][0, 0], atol=1e-4), "replacement changed nothing"
    assert np.allclose(swapped[0, 1], out["final"][0, 1], atol=1e-6), "replacement reached a block not drawn"
    done.append("predecessor replacement changes the drawn block only")

    args = (b["embed"], b["codes"], b["taps"], b["teacher_h"], b["btoks"], b["anchors"], b["labels"], b["valid"],
            jnp.zeros((1, 2), bool), jnp.float32(0.5))  # fmt: skip
    base = Objective(refinement=False, alignment=False)
    zeroed = {k: (jnp.zeros_like(v) if ".writes." in k else v) for k, v in p.items()}
    twin = {k: v for k, v in p.items() if not k.startswith("injection.")}
    a, _ = make_loss(shape, base)(zeroed, *args)
    t, _ = make_loss(replace(shape, injection=False), base)(twin, *args)
    assert abs(float(a) - float(t)) < 1e-4 * abs(float(t)), (float(a), float(t))
    done.append(f"zeroed writes: DSpine's base loss == the twin's ({float(t):.4f})")

    full, metrics = make_loss(shape, obj)(p, *args)
    assert {"ce", "l1", "refinement", "alignment", "coverage"} <= set(metrics) and np.isfinite(float(full))
    grads = jax.grad(lambda q: make_loss(shape, obj)(q, *args)[0])(p)
    for name in ("injection.writes.1.weight", "injection.message.weight", "injection.readouts.0.weight"):
        assert float(jnp.abs(grads[name]).max()) > 0, f"no gradient reaches {name}"
    # the head/embeddings and the codes are arguments of the loss, not parameters: never updated
    assert not any("embed" in k or "lm_head" in k or k == "transfer_codes" for k in grads)
    done.append("every term on: gradients reach the writes, the message and the readouts; head and codes frozen")
    return done
