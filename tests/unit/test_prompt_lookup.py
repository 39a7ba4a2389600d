"""Prompt lookup: drafts copied from the context (backends/prompt_lookup.py)."""

from __future__ import annotations

import numpy as np

from backends.prompt_lookup import LookupSettings, PromptLookup, point_masses
from backends.speculative import accept_sampled

SETTINGS = LookupSettings(n_max=5, ngram_max=3, ngram_min=2, n_min=1)


def test_the_tokens_after_an_earlier_occurrence_are_the_draft():
    context = PromptLookup(SETTINGS, [1, 2, 3, 4, 5, 6, 7, 9, 2, 3])
    assert context.draft(10) == [4, 5, 6, 7, 9]  # n_max 5
    assert context.draft(2) == [4, 5]  # the room left


def test_the_latest_occurrence_and_the_longest_match_win():
    # [2, 3] was followed by 4 first, then by 8; the latest wins.
    assert PromptLookup(SETTINGS, [2, 3, 4, 0, 2, 3, 8, 0, 2, 3]).draft(1) == [8]
    # [1, 2, 3] matches once (followed by 4), [2, 3] more lately (followed by 8): three tokens win.
    assert PromptLookup(SETTINGS, [1, 2, 3, 4, 0, 2, 3, 8, 1, 2, 3]).draft(1) == [4]


def test_no_match_no_draft_and_a_short_copy_is_not_tried():
    assert PromptLookup(SETTINGS, [1, 2, 3, 4, 5]).draft(5) == []
    shy = LookupSettings(n_max=8, ngram_max=2, ngram_min=2, n_min=4)
    assert PromptLookup(shy, [5, 6, 7, 5, 6]).draft(8) == []  # only [7, 5, 6] follows: under 4
    assert PromptLookup(shy, [5, 6, 7, 8, 9, 5, 6]).draft(8) == [7, 8, 9, 5, 6]
    assert PromptLookup(shy, [5, 6, 7, 8, 9, 5, 6]).draft(2) == [7, 8]  # the room, not n_min, is the limit


def test_tokens_added_later_are_found_as_if_given_at_once():
    whole = [4, 1, 2, 3, 9, 9, 1, 2, 7, 1, 2]
    grown = PromptLookup(SETTINGS, whole[:3])
    for token in whole[3:]:
        grown.extend([token])
    assert grown.draft(5) == PromptLookup(SETTINGS, whole).draft(5) == [7, 1, 2]


def test_a_point_mass_draft_is_kept_with_the_targets_probability():
    """Rejection sampling with q all on the drafted token keeps it with probability p(x) and
    otherwise draws from p without x: the target's own distribution, position by position."""
    p = np.array([0.5, 0.3, 0.2])
    rng = np.random.default_rng(0)
    counts = np.zeros(3)
    runs = 20000
    for _ in range(runs):
        verdict = accept_sampled([1], point_masses([1], 3), [p, p], rng)
        counts[1 if verdict.accepted else verdict.next_token] += 1
    assert np.allclose(counts / runs, p, atol=0.015), counts / runs


def test_a_miss_shortens_the_next_draft_and_a_whole_copy_lengthens_it():
    settings = LookupSettings(n_max=16, ngram_max=2, ngram_min=2, n_min=1)
    context = PromptLookup(settings, [*range(40), 0, 1])
    assert len(context.draft(40)) == 16
    context.observe(16, 0)  # nothing kept: text that only shares a few words
    assert context.draft(40) == [2]
    context.observe(1, 1)
    assert len(context.draft(40)) == 2
    context.observe(2, 2)
    context.observe(4, 4)
    assert len(context.draft(40)) == 8  # doubling back once the copy runs on
    context.observe(8, 3)
    assert len(context.draft(40)) == 4  # just past what was kept


def test_chained_before_a_model_drafter_only_a_longer_copy_from_a_longer_match_goes_first():
    settings = LookupSettings(n_max=16, ngram_max=4, ngram_min=2, n_min=2, chained_ngram_min=3)
    copy = [*range(100, 130)]
    # A three-token match with 30 tokens after it: a copy longer than the model's 8 goes first.
    context = PromptLookup(settings, [*copy, 7, *copy[:3]])
    context.copy_kept = 16.0  # copies have kept whole drafts so far (see the test below)
    assert context.draft(40, longer_than=8) == copy[3:19]
    # Only a two-token match ("of the"): alone it drafts, chained it leaves the step to the model.
    coincidence = PromptLookup(settings, [1, 2, *range(50, 70), 9, 1, 2])
    coincidence.copy_kept = 16.0
    assert coincidence.draft(40) == [*range(50, 66)]
    assert coincidence.draft(40, longer_than=8) == []
    # A copy no longer than the model's draft is not worth a verify pass of its own.
    short = PromptLookup(settings, [1, 2, 3, 4, 5, 6, 1, 2, 3])
    short.copy_kept = 16.0
    assert short.draft(40) == [4, 5, 6, 1, 2, 3]
    assert short.draft(40, longer_than=8) == []


def test_chained_a_miss_does_not_shrink_a_copy_below_the_models_draft():
    settings = LookupSettings(n_max=16, ngram_max=3, ngram_min=3, n_min=2)
    context = PromptLookup(settings, [*range(40), 0, 1, 2])
    context.observe(16, 0)
    assert context.draft(40) == [3]  # alone: a miss shrinks it to one token
    assert context.draft(40, longer_than=8) == [*range(3, 12)]  # chained: one more than the model's 8
    assert context.draft(5, longer_than=8) == []  # and no room for that: the model drafts


def test_a_copy_in_progress_keeps_its_place_where_the_text_repeats_itself():
    """Near-identical blocks (class Shape1, Shape2, Shape3): a fresh lookup of the last n-gram
    finds the block the reply just wrote; the copy being followed knows the next one."""
    settings = LookupSettings(n_max=8, ngram_max=2, ngram_min=2, n_min=1)
    source = [5, 10, 1, 20, 10, 2, 20, 10, 3, 20, 6]
    copied = [10, 1, 20, 10, 2, 20, 10]
    context = PromptLookup(settings, [*source, 7, *copied])
    # Looked up afresh, the last [20, 10] came before 2, in the reply itself.
    assert context.draft(3) == [3, 20, 6]


def test_a_changed_token_does_not_end_the_copy():
    """A renamed name or a changed number: the copy picks up again past it at once (chained
    before a model drafter too), where a fresh lookup would need a whole n-gram after it."""
    settings = LookupSettings(n_max=16, ngram_max=4, ngram_min=2, n_min=2, chained_ngram_min=3)
    source = [*range(100, 140)]
    reply = [*source[:10], 77, source[11]]  # source[10] changed to 77
    context = PromptLookup(settings, [*source, 7, *reply])
    context.copy_kept = 16.0
    assert context.draft(40, longer_than=8) == source[12:28]
    # An inserted token (two where the source has one) and a dropped one are bridged too.
    inserted = PromptLookup(settings, [*source, 7, *source[:10], 77, source[10]])
    assert inserted.draft(4) == source[11:15]
    dropped = PromptLookup(settings, [*source, 7, *source[:10], source[11]])
    assert dropped.draft(4) == source[12:16]
    # A reply that leaves the copy for good stops drafting it once nothing matches.
    gone = PromptLookup(settings, [*source, 7, *source[:10], *range(200, 212)])
    assert gone.draft(40) == []


def test_chained_a_copy_goes_first_only_while_copies_keep_as_much_as_the_models_drafts():
    """Text the model writes its own way, however like the context it looks: copies that keep
    fewer tokens a step than the model's drafts are only scored, against the tokens that come,
    and go first again once they keep as many."""
    settings = LookupSettings(n_max=16, ngram_max=3, ngram_min=3, n_min=2, kept_weight=0.5)
    source = [*range(100, 140)]
    context = PromptLookup(settings, [*source, 7, *source[:3]])
    # The first copy of a reply is scored, not tried: the model drafts.
    assert context.draft(40, longer_than=8) == []
    context.observe_model(8)
    context.extend([*source[3:12], 50])  # the model's 8 kept, then the target's own token
    assert context.copy_kept == 9.0 and context.model_kept == 8.0  # the copy would have kept 9
    context.extend([source[13]])  # back in the file (a changed token)
    assert context.draft(40, longer_than=8) == source[14:30]  # copies keep more: one goes
    context.observe(16, 2)
    context.extend([*source[14:16], 60, source[17]])  # kept 2, the target's own, back again
    assert context.copy_kept == 5.5
    assert context.draft(40, longer_than=8) == []  # scored only: 5.5 < 8
    context.observe_model(8)
    context.extend(source[18:27])
    assert context.copy_kept == (5.5 + 9) / 2  # the scored copy kept all its 9
    assert context.draft(40, longer_than=8) == []  # 7.25 < 8 still
    assert context.draft(40) != []  # alone (no model drafter), a copy is always tried


def test_a_copy_that_agrees_with_the_models_whole_draft_rides_along_after_it():
    settings = LookupSettings(n_max=16, ngram_max=3, ngram_min=3, n_min=2, chained_ngram_min=3)
    source = [*range(100, 140)]
    context = PromptLookup(settings, [*source, 7, *source[:3]])
    assert context.extension(source[3:6], 10) == source[6:13]  # 10 in all: the room
    assert context.extension(source[3:6], 3) == []  # no room after the draft
    assert context.extension([source[3], 99, source[5]], 10) == []  # the draft went its own way
    assert context.extension([], 10) == []  # no draft to agree with
    # A match shorter than the chained minimum rides along nowhere.
    assert PromptLookup(settings, [1, 2, *range(50, 70), 9, 1, 2]).extension([50], 10) == []


def test_a_resync_credits_only_a_copy_that_matched_a_whole_ngram_since_it_was_found():
    """After the reply leaves a copy for good, a coincidental match in the old source (a
    newline) must not carry the old copy's run on: its run decides whether a fresh, longer
    lookup can win over it, and whether it may go first before a model drafter."""
    settings = LookupSettings(n_max=16, ngram_max=3, ngram_min=2, n_min=1, chained_ngram_min=3)
    source = [*range(100, 130)]
    # The copy matched 10, one token changed, found again one on: it keeps its run.
    context = PromptLookup(settings, [*source, 7, *source[:10], 77, source[11]])
    assert context._run == 11
    # Left again after one token, found again by coincidence: no credit, so it may not go
    # first before a model drafter (a whole n-gram has to match first).
    context.extend([78, source[13]])
    assert context._run == 1
    context.copy_kept = 16.0
    assert context.draft(40, longer_than=8) == []
    context.extend(source[14:16])
    assert context.draft(40, longer_than=8) == [*source[16:], 7, source[0]]  # 16 on from there


def test_one_token_in_common_further_on_does_not_pick_the_copy_up_again():
    """Three tokens on from where the reply left the copy, one token in common is more often a
    coincidence (a newline) than the copy going on: it is not followed (with the old run, it
    drafted 16 at once); a whole n-gram found afresh is."""
    settings = LookupSettings(n_max=16, ngram_max=4, ngram_min=2, n_min=2)
    source = [*range(100, 140)]
    context = PromptLookup(settings, [*source, 7, *source[:10], 77, source[13]])
    assert context.draft(40) == []
    context.extend([source[14]])  # a whole n-gram of the source again: a fresh lookup finds it
    assert context.draft(4) == source[15:19]
