"""`python -m train_dspine check`: the trainer's forward against the authors' reference.

- golden: every golden file (the reference's own outputs) is reproduced: features, base
  logits, refined scores within REL_TOL of each array's scale, candidates and the walk's
  selections identical;
- mutants: each broken part (a scalar gate, no rms scale on the write, a lattice that ignores
  the predecessor candidate) makes some golden file fail, so the check can fail;
- the DFlash twin: the same weights with every write zeroed compute what the twin computes;
- the objective's own checks (check_objective.py)."""

from __future__ import annotations

from dataclasses import replace

import jax.numpy as jnp
import numpy as np

from .drafter import block_forward, context_kv
from .golden import GOLDEN, MUTANTS, passes, run_golden


def _twin_check() -> str:
    data = dict(np.load(GOLDEN / "dspine-s0-b16.npz"))
    import json

    from .drafter import as_jax, shape_of_golden

    shape = shape_of_golden(json.loads(str(data["config_json"])), int(data["block_ids"].shape[0]))
    p = as_jax({k: data[k] for k in data if "." in k or k == "transfer_codes"})
    codes = p.pop("transfer_codes")
    zeroed = {k: (jnp.zeros_like(v) if ".writes." in k else v) for k, v in p.items()}
    twin = {k: v for k, v in p.items() if not k.startswith("injection.")}
    kv = context_kv(shape, p, jnp.asarray(data["target_hidden"])[None])
    block, anchors = jnp.asarray(data["block_ids"].astype(np.int32))[None, None], jnp.asarray([[12]], jnp.int32)
    embed = jnp.asarray(data["embed"])
    a = block_forward(shape, zeroed, codes, embed, kv, block, anchors)["final"]
    b = block_forward(replace(shape, injection=False), twin, codes, embed, kv, block, anchors)["final"]
    c = block_forward(shape, p, codes, embed, kv, block, anchors)["final"]
    assert np.allclose(a, b, atol=1e-6), "zeroed writes differ from the DFlash twin"
    assert not np.allclose(c, b, atol=1e-3), "the injection changes nothing: the twin check proves nothing"
    return "zeroed writes == the DFlash twin (and the real writes differ from it)"


def run_checks() -> list[str]:
    done = []
    results = run_golden()
    for name, report in results:
        floats = {k: v for k, v in report.items() if not isinstance(v, bool)}
        worst = max(floats, key=floats.get)
        assert passes(report), f"{name} differs from the reference: {report}"
        done.append(f"golden {name}: max relative error {floats[worst]:.2e} ({worst}); candidates and selections equal")
    for mutant in MUTANTS:
        failed = [name for name, report in run_golden(mutant_name=mutant) if not passes(report)]
        assert failed, f"the mutant {mutant} passes every golden file: the check cannot see that part"
        done.append(f"mutant {mutant} fails on {len(failed)}/{len(results)} golden files")
    done.append(_twin_check())
    from .check_objective import run_objective_checks

    done += [f"objective: {line}" for line in run_objective_checks()]
    return done
