"""The trainer's forward against the authors' reference: each golden file (made by running
SpecForge's `DSpineDraftModel`, tests/engines/golden/dspine/) holds the reference's weights
under their state-dict names, one block's inputs and every output. This runs the JAX
forward (drafter.py, injection.py) on them and compares.

A mutant breaks one part on purpose (`MUTANTS`): the check must then fail, which shows the
golden cases notice that part."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from . import injection as inj
from .drafter import as_jax, block_forward, context_kv, shape_of_golden

GOLDEN = Path(__file__).resolve().parents[2] / "tests" / "engines" / "golden" / "dspine"
REL_TOL = 1e-4  # relative to each array's largest magnitude; float32 on both sides


def _scalar_gate(original):
    return lambda p, receiver, predecessor: original(p, receiver, predecessor).mean(-1, keepdims=True)


def _no_rms_scale(original):
    def write(p, layer, h, receiver, predecessor):
        message = inj.gate(p, receiver, predecessor) * (predecessor @ p["injection.message.weight"].T)
        return h + message @ p[f"injection.writes.{layer}.weight"].T

    return write


def _feature_refinement(original):
    # refinement with the anchor's code everywhere: the predecessor candidates would not matter
    def lattice(shape, p, codes, head, pre_write, candidates, anchors):
        return original(shape, p, codes, head, pre_write, jnp.broadcast_to(candidates[..., :1, :], candidates.shape),
                        anchors)  # fmt: skip

    return lattice


MUTANTS = {"scalar-gate": ("gate", _scalar_gate), "no-rms-scale": ("write", _no_rms_scale),
           "lattice-ignores-predecessor": ("lattice", _feature_refinement)}  # fmt: skip


@contextlib.contextmanager
def mutant(name: str | None) -> Iterator[None]:
    if name is None:
        yield
        return
    attr, make = MUTANTS[name]
    original = getattr(inj, attr)
    setattr(inj, attr, make(original))
    try:
        yield
    finally:
        setattr(inj, attr, original)


def run_block(data: dict) -> dict[str, np.ndarray]:
    """The trainer's forward on a golden file's weights and inputs: base logits, features,
    candidates, refined scores and the walk's selection."""
    config = json.loads(str(data["config_json"]))
    n = int(data["block_ids"].shape[0])
    shape = shape_of_golden(config, n)
    names = [k for k in data if "." in k or k == "transfer_codes"]  # the reference's state-dict names
    p = as_jax({k: data[k] for k in names})
    codes = p.pop("transfer_codes")
    embed, head = jnp.asarray(data["embed"]), jnp.asarray(data["head"])
    ctx = data["target_hidden"].shape[0]
    kv = context_kv(shape, p, jnp.asarray(data["target_hidden"])[None])
    block = jnp.asarray(data["block_ids"].astype(np.int32))[None, None]
    anchors = jnp.asarray([[ctx]], jnp.int32)
    out = block_forward(shape, p, codes, embed, kv, block, anchors)
    logits = out["final"][0, 0, 1:] @ head.T
    _, candidates = __import__("jax").lax.top_k(logits, shape.top_k)
    scores = inj.lattice(shape, p, codes, head, out["pre_write"][0, 0, 1:], candidates, block[0, 0, 0])
    return {
        "final_hidden": np.asarray(out["final"][0, 0]),
        "pre_injection_last": np.asarray(out["pre_write"][0, 0]),
        "layer_features": np.asarray(out["features"][:, 0, 0]),
        "base_logits": np.asarray(logits),
        "candidates": np.asarray(candidates),
        "scores": np.asarray(scores),
        "selected": inj.walk(np.asarray(scores), np.asarray(candidates)),
    }


def compare(path: Path, mutant_name: str | None = None) -> dict[str, float | bool]:
    """Max relative error of each float output and whether ids match exactly, for one file."""
    data = dict(np.load(path))
    with mutant(mutant_name):
        mine = run_block(data)
    report: dict[str, float | bool] = {}
    for key, value in mine.items():
        ref = data[key]
        if key in ("candidates", "selected"):
            report[key] = bool(np.array_equal(value, ref))
        else:
            report[key] = float(np.max(np.abs(value - ref)) / max(float(np.max(np.abs(ref))), 1e-30))
    return report


def passes(report: dict[str, float | bool]) -> bool:
    return all(v is True if isinstance(v, bool) else v <= REL_TOL for v in report.values())


def run_golden(folder: Path = GOLDEN, mutant_name: str | None = None) -> list[tuple[str, dict]]:
    files = sorted(folder.glob("dspine-*.npz"))
    if not files:
        raise FileNotFoundError(f"no golden files in {folder}")
    return [(f.name, compare(f, mutant_name)) for f in files]
