"""vLLM's per-request speculation figures (--per-request-spec-decode-metrics) in a reply's
statistics, from its recorded last stream chunk."""

from __future__ import annotations

import json
from pathlib import Path

from backends.reply_spec import apply_vllm
from backends.stats import Stats

SHAPES = Path(__file__).parents[1] / "support" / "remote_shapes"


def _last_chunk() -> dict:
    return json.loads((SHAPES / "vllm_chat_stream_final_usage_chunk.json").read_text())


def test_the_detailed_form_gives_counts_and_positions_step_by_step():
    chunk = _last_chunk()
    stats = Stats(generated_tokens=chunk["usage"]["completion_tokens"])
    assert apply_vllm(stats, chunk["metrics"])
    assert (stats.drafted, stats.accepted) == (12, 6)
    assert stats.verify_steps == 9 - 6 and stats.acceptance_rate == 0.5
    # steps kept 0, 1, 2 and 3 of 3: every step tests position 0, three test position 1 ...
    assert stats.position_tested == [4, 3, 2] and stats.position_kept == [3, 2, 1]


def test_the_summary_form_gives_positions_from_the_histogram():
    spec = dict(_last_chunk()["metrics"]["speculative_decoding"])
    spec.pop("per_step_drafted"), spec.pop("per_step_accepted")
    stats = Stats(generated_tokens=9)
    assert apply_vllm(stats, {"speculative_decoding": spec})
    assert stats.position_tested == [4, 3, 2] and stats.position_kept == [3, 2, 1]


def test_a_chunk_without_the_figures_changes_nothing():
    stats = Stats(generated_tokens=5, verify_steps=5)
    assert not apply_vllm(stats, {"time_to_first_token_ms": 12})
    assert not apply_vllm(stats, {"speculative_decoding": {"num_draft_tokens": "many"}})
    assert (stats.drafted, stats.verify_steps) == (0, 5)


def test_figures_no_reply_can_have_are_refused_without_running_away():
    """A hostile server's numbers: infinite, or a histogram of a quadrillion steps."""
    stats = Stats(generated_tokens=9)
    assert not apply_vllm(
        stats, {"speculative_decoding": {"num_draft_tokens": float("inf"), "num_accepted_draft_tokens": 1}}
    )
    huge = {
        "num_draft_tokens": 12,
        "num_accepted_draft_tokens": 6,
        "num_spec_tokens": 3,
        "acceptance_histogram": [10**15],
    }
    assert apply_vllm(stats, {"speculative_decoding": huge})  # the counts stand; positions are not made up
    assert (stats.drafted, stats.accepted) == (12, 6) and stats.position_tested == []
    from backends.reply_spec import apply_sglang

    wide = {"spec_tokens_details": {"spec_num_proposed_drafts": 10**9, "spec_num_correct_drafts": 0,
                                    "spec_verify_ct": 1, "spec_correct_drafts_histogram": [1]}}  # fmt: skip
    assert apply_sglang(stats, wide) and stats.position_tested == []
