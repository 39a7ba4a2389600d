"""The speculation counters of a /metrics page (llama-server's and vLLM's shared schema),
and what a reply's counters make of its statistics."""

from __future__ import annotations

from pathlib import Path

from backends.spec_metrics import Counters, apply, parse
from backends.stats import Stats

SHAPES = Path(__file__).parents[1] / "support" / "remote_shapes"


def test_llama_servers_counters_are_read():
    counted = parse((SHAPES / "llamacpp_metrics.prom").read_text())
    assert counted == Counters(drafts=58, draft_tokens=169, accepted=142, per_position=(55, 46, 41))


def test_vllms_counters_are_read_and_its_created_timestamps_are_not_counts():
    counted = parse((SHAPES / "vllm_metrics_spec.prom").read_text())
    assert counted == Counters(drafts=1843, draft_tokens=5529, accepted=3211, per_position=(1402, 1050, 759))


def test_a_page_without_speculation_counters_has_none():
    page = "# HELP llamacpp:prompt_tokens_total x\nllamacpp:prompt_tokens_total 12\nvllm:num_requests_running 0\n"
    assert parse(page) is None
    assert parse("") is None


def test_several_engines_series_are_summed_and_bad_samples_skipped():
    page = "\n".join(
        [
            'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0',
            'vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 5.0',
            'vllm:spec_decode_num_draft_tokens_total{engine="0"} NaN',
            'vllm:spec_decode_num_accepted_tokens_total{engine="0"} -3',
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 4',
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",kind="x"} 9',
            "not a sample line at all",
        ]
    )
    assert parse(page) == Counters(drafts=15, draft_tokens=0, accepted=0, per_position=(0, 4))


def test_a_replys_counters_are_the_difference_of_two_reads():
    before = Counters(10, 30, 20, (9, 7, 4))
    after = Counters(14, 42, 29, (13, 10, 6, 1))
    assert after.delta(before) == Counters(4, 12, 9, (4, 3, 2, 1))


def test_counters_that_fell_mean_a_restart_and_the_later_read_is_what_happened():
    before = Counters(100, 300, 200, (90, 70))
    after = Counters(2, 6, 5, (2, 2))
    assert after.delta(before) == after


def test_counters_make_acceptance_steps_and_positions():
    stats = Stats(generated_tokens=13)
    apply(stats, Counters(drafts=4, draft_tokens=12, accepted=9, per_position=(4, 3, 2)))
    assert (stats.drafted, stats.accepted) == (12, 9)
    assert stats.verify_steps == 4 and stats.acceptance_length == 13 / 4
    # position 0 is tested at every draft, a later one when all before it were kept
    assert stats.position_tested == [4, 4, 3] and stats.position_kept == [4, 3, 2]


def test_the_serve_readouts_server_wide_line():
    from app.serve.remote_counters import counters_line

    assert counters_line(Counters()) is None
    line = counters_line(Counters(drafts=4, draft_tokens=12, accepted=6))
    assert line == (
        "server-wide since serve started (its /metrics): accept len 2.50 on drafted steps, 50% of 12 drafted"
    )
