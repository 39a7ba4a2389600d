"""dspine's NumPy reading of DSpine (tests/support/dspine_published.py) against the authors'
own forward pass: golden files made by SpecForge's `DSpineDraftModel` on tiny random
weights (scripts/dspine_golden/, docs/dspine-golden.md). Every intermediate the reference
reports equals ours to 1e-4 of its scale; the candidates and the drafts are the same token
for token; a short block drafts the first tokens of the long one (prefix consistency); and
each part that makes DSpine DSpine changes the drafts when it is dropped."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.dspine_published import GOLDEN, Drafter, Parts

FILES = sorted(GOLDEN.glob("dspine-*.npz"))
FLOATS = ("context", "layer_out", "final_hidden", "base_logits", "scores")


def test_the_golden_files_are_there():
    assert {f.name for f in FILES} == {
        "dspine-s0-b16.npz",
        "dspine-s1-b16.npz",
        "dspine-s2-b16.npz",
        "dspine-s0-b4.npz",
    }


ALL = Parts()


def run(path, parts: Parts = ALL):
    drafter, data = Drafter.from_golden(path)
    out = drafter.block(
        data["target_hidden"], data["block_ids"], data["position_ids"], data["embed"], data["head"], parts
    )
    return out, data


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_our_reading_is_the_references_forward_pass(path):
    out, golden = run(path)
    for name in FLOATS:
        scale = float(np.max(np.abs(golden[name])))
        error = float(np.max(np.abs(out[name] - golden[name]))) / scale
        assert error < 1e-4, f"{name}: {error:.2e} of its scale"
    np.testing.assert_array_equal(out["candidates"], golden["candidates"])
    np.testing.assert_array_equal(out["selected"], golden["selected"])


def test_a_short_block_drafts_the_first_tokens_of_the_long_one():
    short, _ = run(GOLDEN / "dspine-s0-b4.npz")
    long, _ = run(GOLDEN / "dspine-s0-b16.npz")
    np.testing.assert_array_equal(short["selected"], long["selected"][:3])
    np.testing.assert_allclose(short["base_logits"], long["base_logits"][:3], atol=1e-4)


@pytest.mark.parametrize(
    "dropped",
    [
        Parts(codes=False),
        Parts(gate=False),
        Parts(rms_scale=False),
        Parts(shared_message=False),
        Parts(refinement=False),
    ],
    ids=["codes", "gate", "rms_scale", "shared_message", "refinement"],
)
def test_each_part_changes_the_drafts_when_it_is_dropped(dropped):
    """The golden cases are ones where every part matters: a reading that leaves one out
    (as dspine's first variant left out the codes, gate form, scale and refinement) cannot
    pass the equality test above."""
    changed = []
    for path in FILES:
        out, golden = run(path, dropped)
        changed.append(int(np.sum(out["selected"] != golden["selected"])))
    assert sum(changed) > 0, changed
