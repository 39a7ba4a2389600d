"""Adaptive draft length on made-up acceptance profiles."""

import pytest

from backends.adaptive import (
    MAX_K,
    AdaptiveDraft,
    AdaptiveStore,
    Costs,
    ModeStats,
    best_length,
    costs_from,
    expected_drafted,
    expected_tokens,
    rates_by_length,
)
from tests.support.acceptance import learned

GPU_LIKE = Costs(draft_per_token=0.001, verify_fixed=0.020, verify_per_token=0.0005)


def test_expected_tokens():
    assert expected_tokens([1.0] * 4, 4) == 5
    assert expected_tokens([0.5, 0.5], 2) == 1 + 0.5 + 0.25


def test_acceptance_falling_off_shortens_the_draft():
    falls = [0.9, 0.5, 0.1] + [0.05] * 13
    assert best_length(falls, GPU_LIKE) <= 3


def test_acceptance_staying_high_lengthens_the_draft():
    high = [0.95] * 16
    assert best_length(high, GPU_LIKE) >= 10


def test_expensive_drafting_shortens_it_too():
    costly = Costs(draft_per_token=0.015, verify_fixed=0.020, verify_per_token=0.0005)
    assert best_length([0.8] * 16, costly) < best_length([0.8] * 16, GPU_LIKE)


def test_adaptive_per_mode_and_remembered(tmp_path):
    adaptive = AdaptiveDraft(default=4, plain_token_s=0.020)
    assert adaptive.choose(think=True) == 4  # nothing learned yet
    adaptive.modes["think"] = learned([0.6, 0.3, 0.1] + [0.05] * 13)
    adaptive.modes["no_think"] = learned([0.97] * 16)
    short, long = adaptive.choose(think=True), adaptive.choose(think=False)
    assert short < 4 < long
    store = AdaptiveStore(tmp_path / "adaptive.json")
    store.save("model-a", adaptive)
    again = store.load("model-a", default=4)
    assert (again.choose(True), again.choose(False)) == (short, long)
    assert store.load("model-b", default=3).choose(True) == 3


def test_a_measured_verify_table_steers_around_expensive_lengths():
    # Passes of 1-4 tokens cost about the same, 5-8 much more (kernels work in tiles of 4).
    table = [0.010, 0.0105, 0.011, 0.0115, 0.020, 0.0205, 0.021, 0.0215] + [0.030 + 0.0005 * i for i in range(9)]
    tiled = Costs(draft_per_token=0.0005, verify_by_len=tuple(table))
    acceptance = [0.8] * 16
    assert best_length(acceptance, tiled) == 3  # a draft of 3 is a pass of 4 tokens
    assert tiled.step(4) > tiled.step(3) * 1.5
    # The line through the same end points would have drafted longer.
    line = Costs(draft_per_token=0.0005, verify_fixed=0.0095, verify_per_token=(0.034 - 0.0095) / 17)
    assert best_length(acceptance, line) > 3


def test_the_table_is_scaled_to_the_verify_time_seen_in_use():
    from backends.adaptive import costs_from

    stats = learned([0.8] * 16, steps=100)  # 28 ms a verify step at 17 tokens
    table = [0.001 * n for n in range(1, 18)]  # 17 ms for 17 tokens at calibration
    costs = costs_from(stats, verify_s_by_len=table)
    assert costs is not None and costs.verify(17) == pytest.approx(0.028)
    assert costs.verify(4) == pytest.approx(0.004 * 28 / 17)
    adaptive = AdaptiveDraft(default=4, verify_s_by_len=table)
    again = AdaptiveDraft.from_json(adaptive.to_json())
    assert again.verify_s_by_len == table


def test_high_acceptance_at_the_lengths_used_so_far_makes_it_try_longer():
    # Only its own choices teach it: after replies at the default 4 with every draft kept,
    # positions 5-16 were never tested, and it must still reach for them (GPU-like costs:
    # a verify pass costs about a plain decode step whatever its length).
    adaptive = AdaptiveDraft(default=4, plain_token_s=0.020)
    adaptive.modes["no_think"] = learned([0.97] * 4 + [0.0] * 12)
    adaptive.modes["no_think"].tested[4:] = [0] * 12
    assert adaptive.choose(think=False) > 4
    adaptive.modes["think"] = learned([0.3] * 4 + [0.0] * 12)
    adaptive.modes["think"].tested[4:] = [0] * 12
    assert adaptive.choose(think=True) < 4


def test_the_verify_table_is_the_fastest_of_a_few_calibrations():
    adaptive = AdaptiveDraft(default=4, max_k=2)
    assert adaptive.wants_calibration()
    adaptive.calibrated([0.010, 0.030, 0.012])  # a burst of load during the second pass
    adaptive.calibrated([0.011, 0.011, 0.013])
    assert adaptive.wants_calibration()
    adaptive.calibrated([0.012, 0.012, 0.012])
    assert not adaptive.wants_calibration()
    assert adaptive.verify_s_by_len == [0.010, 0.011, 0.012] and adaptive.plain_token_s == 0.010
    assert not AdaptiveDraft.from_json(adaptive.to_json()).wants_calibration()


def test_now_and_then_a_longer_draft_keeps_the_positions_past_the_best_tested():
    """Replies at the best length never test the positions after it, whose estimate then
    stays whatever it inherited; one reply in a few drafts longer (more often while those
    positions have few tests), and only at lengths predicted close to the best."""
    from backends.adaptive import EXPLORE_EVERY, EXPLORE_LOSS, THIN, rates_by_length

    stats = learned([0.9, 0.8, 0.6] + [0.0] * 13, steps=20)
    adaptive = AdaptiveDraft(default=4, plain_token_s=0.020)
    adaptive.modes["no_think"] = stats
    lengths = []
    for _ in range(24):
        lengths.append(adaptive.choose(think=False))
        stats.replies += 1
    best = min(lengths)
    longer = [k for k in lengths if k > best]
    assert longer and max(longer) <= best + 3 <= 16
    assert stats.tested[best] < THIN and len(longer) == len(lengths) // 2  # thin data: every second reply
    # With plenty of tests past the best: one reply in EXPLORE_EVERY.
    stats.tested[best] = stats.kept[best] = THIN * 4
    stats.kept[best] = 0
    lengths = []
    for _ in range(EXPLORE_EVERY * 4):
        lengths.append(adaptive.choose(think=False))
        stats.replies += 1
    best = min(lengths)
    assert sum(k > best for k in lengths) == 4
    # What an exploring reply may cost, by the engine's own prediction.
    predicted = rates_by_length(stats.acceptance(), adaptive_costs(adaptive), 16)
    assert all(predicted[k] >= (1 - EXPLORE_LOSS) * predicted[best] for k in lengths)


def adaptive_costs(adaptive: AdaptiveDraft) -> Costs:
    from backends.adaptive import costs_from

    found = costs_from(adaptive.mode(False), adaptive.plain_token_s, adaptive.verify_s_by_len)
    assert found is not None
    return found


def test_no_exploring_past_the_longest_length_or_before_anything_was_learned():
    adaptive = AdaptiveDraft(default=4, max_k=4, plain_token_s=0.020)
    adaptive.modes["no_think"] = learned([0.97] * 16)
    for replies in range(10):
        adaptive.modes["no_think"].replies = replies
        assert adaptive.choose(think=False) == 4
    assert AdaptiveDraft(default=3).choose(think=True) == 3


def test_pass_times_seen_in_use_bend_a_table_that_overstates_long_passes():
    from backends.adaptive import ModeStats, costs_from

    # The calibration table says a pass grows steeply past 6 tokens; in use, passes of 10 tokens
    # (drafts of 9) cost about as much as passes of 7 (drafts of 6).
    table = [0.010 + 0.001 * n for n in range(6)] + [0.016 * 1.1**n for n in range(1, 12)]
    stats = ModeStats()
    tested, kept = [100] * 16, [95] * 16
    for k, per_step in ((6, 0.0165), (9, 0.0175)):
        for _ in range(10):  # replies at each length, 20 steps each
            stats.add(tested[:k], kept[:k], 0.0001 * k * 20, k * 20, per_step * 20, 20)
    assert stats.seen() == {7: pytest.approx(0.0165), 10: pytest.approx(0.0175)}
    costs = costs_from(stats, verify_s_by_len=table)
    assert costs is not None
    # 200 passes each: mostly their own time.
    assert costs.verify(7) == pytest.approx(0.0165, rel=0.03) and costs.verify(10) == pytest.approx(0.0175, rel=0.03)
    # A length not seen takes the table's shape at the level of all passes seen.
    level = (0.0165 + 0.0175) / (table[6] + table[9])
    assert costs.verify(12) == pytest.approx(table[11] * level)
    assert costs.verify(2) == pytest.approx(table[1] * level)
    acceptance = stats.acceptance()
    table_only = costs_from(ModeStats(**{**vars(stats), "seen_steps": [0] * 17}), verify_s_by_len=table)
    assert table_only is not None
    assert best_length(acceptance, costs) > best_length(acceptance, table_only)
    # Too few passes of a length are not trusted yet; and it is all remembered.
    few = ModeStats()
    few.add([10] * 4, [9] * 4, 0.0004, 4, 0.001, 1)
    assert few.seen() == {}
    again = AdaptiveDraft.from_json({"modes": {"no_think": vars(stats)}})
    assert again.mode(False).seen() == stats.seen()
    old = AdaptiveDraft.from_json({"modes": {"no_think": {"steps": 3}}})  # saved before this was kept
    assert old.mode(False).seen() == {}


def test_a_burst_of_load_on_a_few_passes_does_not_steer_the_choice():
    """Ten passes of one explored length timed during a burst of load elsewhere (2x) move
    that length's cost a little, not the level every longer length is judged at."""
    from backends.adaptive import ModeStats, costs_from

    table = [0.010 + 0.0008 * n for n in range(17)]

    def replies(burst: bool) -> ModeStats:
        stats = ModeStats()
        for _ in range(20):  # drafts of 6 (passes of 7) at 1.2x the table
            stats.add([20] * 6, [18] * 6, 0.0005 * 6 * 20, 6 * 20, 1.2 * table[6] * 20, 20)
        if burst:  # one explored reply, drafts of 8
            stats.add([10] * 8, [9] * 8, 0.0005 * 8 * 10, 8 * 10, 2.0 * table[8] * 10, 10)
        return stats

    calm, burst = replies(False), replies(True)
    calm_costs, burst_costs = costs_from(calm, verify_s_by_len=table), costs_from(burst, verify_s_by_len=table)
    assert calm_costs is not None and burst_costs is not None
    assert best_length(burst.acceptance(), burst_costs) == best_length(calm.acceptance(), calm_costs) == 9
    assert burst_costs.verify(12) < 1.25 * table[11]


def floor_replies(steps: int, go_on: float, keep: float, asked: int = 16) -> dict:
    """Counts of replies whose drafts a probability floor ends early: each position is
    reached by `go_on` of the drafts that reached the one before (the first: of the steps),
    and `keep` of the tokens before it kept, as llama-server reports them."""
    reached = [round(steps * go_on ** (i + 1)) for i in range(asked)]
    kept = [round(steps * (go_on * keep) ** (i + 1)) for i in range(asked)]
    return {"tested": [steps, *kept[:-1]], "kept": kept, "reached": reached, "steps": steps}


def test_a_length_is_priced_at_the_draft_it_makes_where_a_floor_ends_drafts_early():
    """Asked for 16, drafts under llama-server's floor held 3.9 tokens: asking for 16 costs a
    pass of about 5, not 17. Priced as full drafts, long lengths looked ruinous and adaptive
    drafted 6 where 16 was best on the real SmolLM2 pair (0.90)."""
    table = [0.02 + 0.004 * n for n in range(1, MAX_K + 2)]
    replies = floor_replies(1000, go_on=0.8, keep=0.9)
    drafted = sum(replies["reached"])
    verify_s = replies["steps"] * (0.02 + 0.004 * (1 + drafted / replies["steps"]))
    choices = {}
    for reported in (True, False):
        stats = ModeStats()
        stats.add(
            replies["tested"],
            replies["kept"],
            0.0,
            drafted,
            verify_s,
            replies["steps"],
            reached=replies["reached"] if reported else None,
            asked=16,
        )
        costs = costs_from(stats, verify_s_by_len=table)
        assert costs is not None
        rates = rates_by_length(stats.acceptance(), costs)
        choices[reported] = best_length(stats.acceptance(), costs)
        if reported:
            assert costs.drafted(16) == pytest.approx(0.8 * (1 - 0.8**16) / 0.2, rel=0.01)
            assert costs.step(16) == pytest.approx(verify_s / replies["steps"], rel=0.03)  # the pass it makes
            assert rates[16] > 0.97 * rates[choices[True]]
        else:
            assert costs.drafted(16) == 16  # no counts of reach: full drafts, as before
            assert rates[16] < 0.6 * rates[choices[False]]
    assert choices[True] >= 7 and choices[False] <= 4


def test_a_reply_asking_for_a_short_length_does_not_read_as_drafts_stopping_there():
    stats = ModeStats()
    long = floor_replies(200, go_on=0.9, keep=1.0)
    stats.add(long["tested"], long["kept"], 0.0, sum(long["reached"]), 1.0, 200, reached=long["reached"], asked=16)
    short = floor_replies(200, go_on=0.9, keep=1.0, asked=4)
    stats.add(short["tested"], short["kept"], 0.0, sum(short["reached"]), 1.0, 200, reached=short["reached"], asked=4)
    continuation = stats.continuation()
    # Position 4 was reachable only on the replies that asked for more than 4.
    assert stats.reachable[4] == long["reached"][3]
    assert all(rate == pytest.approx(0.9, abs=0.02) for rate in continuation)
    # An engine that drafts what it is asked (in process) reports no reach: full drafts.
    plain = ModeStats()
    plain.add([10, 8], [8, 6], 0.1, 20, 1.0, 10)
    assert expected_drafted(plain.continuation(), 2) == 2.0
