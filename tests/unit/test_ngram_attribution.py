"""Which drafter made a llama-server step's draft, from its per-token timings: the n-gram
drafter chained first never drafts fewer than its n_min, the model drafter never more than
its length, so a step longer than the model's length is a copy (openai_stream.StepPositions)."""

from __future__ import annotations

from backends.openai_stream import StepPositions
from backends.stats import Stats


def feed_steps(positions: StepPositions, steps: list[tuple[int, int]]) -> Stats:
    """Each step as llama-server's cumulative draft counts show it: a rise of draft_n by the
    tokens drafted and of draft_n_accepted by those kept, then a chunk per further token."""
    stats = Stats()
    drafted = accepted = predicted = 0
    for step, kept in steps:
        drafted, accepted = drafted + step, accepted + kept
        for _ in range(kept + 1):
            predicted += 1
            positions.feed(stats, {"draft_n": drafted, "draft_n_accepted": accepted, "predicted_n": predicted})
    return stats


def test_steps_longer_than_the_model_drafters_length_are_counted_as_copies():
    stats = feed_steps(StepPositions(ngram_above=8), [(8, 8), (20, 20), (3, 1), (24, 5), (8, 2)])
    assert (stats.ngram_drafted, stats.ngram_accepted, stats.ngram_steps) == (44, 25, 2)
    assert stats.ngram_position_tested[:6] == [2, 2, 2, 2, 2, 2] and stats.ngram_position_tested[6] == 1
    assert sum(stats.position_tested[:1]) == 5  # every step tested position 0, copies included


def test_without_a_threshold_nothing_is_called_a_copy():
    stats = feed_steps(StepPositions(), [(20, 20), (3, 1)])
    assert stats.ngram_drafted == 0 and stats.position_tested[0] == 2
