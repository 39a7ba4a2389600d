"""benchmarks/draft_p_min.py's counted work: a block drafter pays its block pass every verify
step, whatever its floor let it draft, so one that drafts nothing models slower than plain
decoding (before, it was charged per drafted token and scored exactly as plain)."""

from __future__ import annotations

import pytest

from benchmarks.draft_p_min import modelled

NOTHING = (50.0, 0, 0, 96)  # tok/s, kept, drafted, generated: no drafts at all


@pytest.mark.parametrize("kind", ["dspine", "dflash"])
def test_a_block_drafter_that_drafts_nothing_still_pays_every_pass(kind):
    assert modelled(NOTHING, 1.0, kind) == pytest.approx(0.5)
    assert modelled(NOTHING, 0.1, kind) == pytest.approx(1 / 1.1)


def test_a_draft_model_pays_per_drafted_token():
    assert modelled(NOTHING, 1.0, "draft") == pytest.approx(1.0)
    # 96 tokens in 48 steps, 96 drafted of which 48 kept: 96 / (48 + 0.1 * 96)
    assert modelled((0.0, 48, 96, 96), 0.1, "draft") == pytest.approx(96 / 57.6)
    # the same counts for a block drafter: 48 passes of the block
    assert modelled((0.0, 48, 96, 96), 0.1, "dspine") == pytest.approx(96 / 52.8)
