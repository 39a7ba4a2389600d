"""How long a copy to draft, against what a pass costs here (backends/copy_length.py), and
the prompt lookup that asks it (backends/prompt_lookup.py)."""

from __future__ import annotations

import pytest

from backends.copy_length import CopyOdds, PassCosts, best_copy_length
from backends.prompt_lookup import LookupSettings, PromptLookup

# SmolLM2-135M in process on two cores, 256 tokens in (ms): a pass costs nearly a token's
# compute per token. And a GPU's: a pass of 17 about one of 1.
CPU = PassCosts({1: 9.5, 2: 16.6, 3: 19.9, 5: 27.4, 9: 35.7, 17: 51.5})
GPU = PassCosts({1: 10.0, 17: 11.5})
NUMBER = 7  # the one token taken for a number below


def odds(kept: float, number_kept: float | None = None, runs=(2, 4, 8, 16), weight: int = 200) -> CopyOdds:
    """Odds as if `weight` tokens of each run band had been seen, `kept` of them kept."""
    learned = CopyOdds(numeric=lambda token: token == NUMBER)
    for run in runs:
        for i in range(weight):
            learned.observe(run, 1, i < kept * weight)
            if number_kept is not None:
                learned.observe(run, NUMBER, i < number_kept * weight)
    return learned


def test_a_gpu_drafts_the_whole_copy_a_cpu_only_as_far_as_it_pays():
    copy = list(range(100, 116))
    assert best_copy_length(copy, 16, odds(0.9), GPU) == 16
    on_cpu = best_copy_length(copy, 16, odds(0.9), CPU)
    assert 3 <= on_cpu < 16  # a whole 16 would cost 5 plain steps for ~8 tokens expected


def test_a_copy_unlikely_to_hold_is_not_drafted_where_a_plain_step_pays_more():
    copy = list(range(100, 116))
    assert best_copy_length(copy, 2, odds(0.5), CPU) == 0
    assert best_copy_length(copy, 2, odds(0.5), GPU) > 0  # there a wrong guess costs almost nothing


def test_a_number_ahead_ends_the_draft_before_it():
    copy = [1, 1, 1, NUMBER, 1, 1, 1, 1]
    assert best_copy_length(copy, 16, odds(0.95, number_kept=0.1), CPU) == 3
    assert best_copy_length(copy, 16, odds(0.95, number_kept=0.95), CPU) > 3


def test_the_shortest_length_allowed_is_kept_to():
    copy = list(range(100, 116))
    assert 0 < best_copy_length(copy, 16, odds(0.75), CPU) < 6
    assert best_copy_length(copy, 16, odds(0.75), CPU, shortest=6) in (0, *range(6, 17))
    assert best_copy_length(copy, 16, odds(0.75), CPU, shortest=17) == 0


def test_odds_start_at_the_prior_and_follow_what_the_reply_kept():
    learned = CopyOdds()
    fresh = learned.rate(2, 1)
    assert 0.5 < fresh < 0.7
    for _ in range(50):
        learned.observe(20, 1, True)
    assert learned.rate(20, 1) > 0.9
    assert learned.rate(2, 1) == fresh  # another run band: a fresh match is not a copy under way


def test_pass_costs_between_and_past_the_timed_lengths():
    costs = PassCosts({1: 10.0, 3: 20.0, 5: 24.0})
    assert costs(2) == pytest.approx(15.0)
    assert costs(7) == pytest.approx(28.0)  # the last slope, 2 a token
    assert costs(1) == pytest.approx(10.0)
    with pytest.raises(ValueError):
        PassCosts({2: 5.0})


def test_passes_seen_in_use_correct_the_timed_table():
    """A table timed on a fresh cache: deeper in a reply a long pass costs more (17 tokens
    at 400 tokens in: 61 ms where the table says 38)."""
    costs = PassCosts({1: 8.4, 17: 38.0})
    for _ in range(30):
        costs.observe(17, 0.0614 * 1000)
        costs.observe(1, 9.8)
    assert costs(17) > 55.0
    assert costs(1) == pytest.approx(9.8, rel=0.1)
    assert costs(9) > costs.table(9)  # a length never seen: the table at the level seen


# -- in the prompt lookup ---------------------------------------------------------------

WEIGHED = LookupSettings(n_max=16, ngram_max=3, ngram_min=2, n_min=1)


def file_then_copy(length: int = 80, copied: int = 30) -> list[int]:
    source = list(range(1000, 1000 + length))
    return [*source, 5, *source[:copied]]  # the reply has been copying the file for a while


def test_with_costs_a_cpu_drafts_a_copy_shorter_than_a_gpu():
    on_cpu = PromptLookup(WEIGHED, file_then_copy(), CPU).draft(40)
    on_gpu = PromptLookup(WEIGHED, file_then_copy(), GPU).draft(40)
    assert on_gpu == list(range(1030, 1046))
    assert 2 <= len(on_cpu) < len(on_gpu)
    assert PromptLookup(WEIGHED, file_then_copy()).draft(40) == list(range(1030, 1046))  # no costs: as before


def test_on_a_cpu_a_fresh_match_waits_until_copies_have_held():
    assert PromptLookup(WEIGHED, file_then_copy(copied=3), CPU).draft(40) == []
    assert PromptLookup(WEIGHED, file_then_copy(copied=3), GPU).draft(40)  # a wrong guess costs little there
    assert PromptLookup(WEIGHED, file_then_copy(copied=12), CPU).draft(40)


def test_a_copy_the_reply_keeps_leaving_stops_being_drafted_and_comes_back_when_it_holds():
    """Every token the reply adds while a copy is followed scores it, drafted or not: a copy
    that keeps breaking is not drafted on a CPU; one that then holds token after token
    (scored on plain steps, nothing drafted) is drafted again."""
    source = list(range(1000, 1400))
    context = PromptLookup(WEIGHED, [*source, 5, *source[:3]], CPU)
    at = 3
    for turn in range(30):  # the reply takes one token of the copy, changes the next, goes on
        context.extend([source[at], 2000 + turn, source[at + 2]])
        at += 3
    assert context.draft(40) == []
    for _ in range(60):  # now it copies, plain step by plain step
        context.extend([source[at]])
        at += 1
    assert len(context.draft(40)) >= 2


def test_eager_lookup_ignores_costs():
    eager = LookupSettings(n_max=16, ngram_max=3, ngram_min=2, n_min=1, weigh_copies=False)
    assert PromptLookup(eager, file_then_copy(copied=3), CPU).draft(40) == list(range(1003, 1019))


def test_a_noisy_table_never_makes_a_longer_pass_cheaper():
    """Best of two rounds on a GPU can time 2 tokens under 1: extended past the table, a falling
    line made long drafts free (or a cost of zero)."""
    costs = PassCosts({1: 10.0, 2: 9.5})
    assert costs(2) >= costs(1) and costs(17) >= costs(1) > 0
    with pytest.raises(ValueError):
        PassCosts({1: 0.0})


def test_a_long_prompts_own_copies_weigh_as_a_few_dozen_tokens():
    """The prompt is the whole conversation: a file that repeats itself thousands of tokens long
    must not outweigh what the reply shows of its own copies."""
    block = list(range(1000, 1050))
    history = block * 40  # 2,000 tokens that copy themselves perfectly
    context = PromptLookup(WEIGHED, [*history, 5, *block[:3]], CPU)
    seen = sum(context.odds.trials.values())
    assert 0 < seen <= 32 * 8  # at most 32 a band and kind
    at = 3
    for turn in range(15):  # the reply takes one token of the copy, changes the next, goes on
        context.extend([block[at % 50], 7000 + turn, block[(at + 2) % 50]])
        at += 3
    assert context.draft(40) == []  # on a CPU: the reply's own misses decide


def test_a_copy_the_odds_would_not_draft_is_drafted_where_a_longer_match_confirms_it():
    """The odds pool every copy of a run band; on a small file its own coincidental repeats
    drag them down. Where the latest earlier occurrence of the last 6 tokens goes on the same
    way as the copy followed, 12 tokens of it are drafted all the same (session 26: bench's
    edits 1.14-1.23x plain replayed, against 1.03-1.05x)."""
    from dataclasses import replace

    def low_odds(settings: LookupSettings, context: list[int]) -> PromptLookup:
        lookup = PromptLookup(settings, context, CPU)
        lookup.odds = odds(kept=0.6)  # copies here held 60% a token: no length pays on a CPU
        return lookup

    assert low_odds(replace(WEIGHED, confirm_match=0), file_then_copy(copied=8)).draft(40) == []
    assert low_odds(WEIGHED, file_then_copy(copied=8)).draft(40) == list(range(1008, 1020))
    assert low_odds(WEIGHED, file_then_copy(copied=8)).draft(5) == []  # room for fewer than the match
    # The same 6 tokens later in the prompt, going on otherwise: the two ways disagree, no draft.
    source = list(range(1000, 1080))
    decoy = [*source[2:8], 3000, 3001, 3002, 3003, 3004, 3005, 3006, 3007]
    assert low_odds(WEIGHED, [*source, 5, *decoy, 5, *source[:8]]).draft(40) == []
