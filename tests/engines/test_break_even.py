"""Break-even: drafting stops in a think mode where its measured speed stays below plain
decoding's, says so, tries again after a while, and comes back when it pays; the
policy alone, then the in-process engine on generated pairs where the drafter costs
as much as the target (never pays) or a sixth of it (pays)."""

from __future__ import annotations

import pytest

from backends.break_even import BreakEven
from backends.events import End
from backends.inproc import InprocEngine
from backends.sampling import Sampling
from tests.support.gguf_models import chat_model, write_model

# -- the policy -------------------------------------------------------------------------------


def replay(policy: BreakEven, think: bool, drafting_rate: float, plain_rate: float, replies: int) -> list[bool]:
    """Whether each reply drafted, when drafting gives `drafting_rate` tok/s and plain `plain_rate`."""
    drafted = []
    for _ in range(replies):
        draft = policy.drafting(think)
        drafted.append(draft)
        policy.observed(think, draft, 100, 100 / (drafting_rate if draft else plain_rate))
    return drafted


def test_a_drafter_below_plain_is_switched_off_within_a_few_replies():
    policy = BreakEven(patience=2, retry_after=8)
    drafted = replay(policy, False, drafting_rate=10.0, plain_rate=20.0, replies=3)
    # 1-2: draft (nothing to compare with), 3: a plain probe, faster than both: off.
    assert drafted == [True, True, False]
    assert policy.note(False).startswith("drafter off: slower than plain here (") and policy.note(False).endswith(
        "; trying again in 8 replies"
    )
    assert replay(policy, False, drafting_rate=10.0, plain_rate=20.0, replies=8) == [False] * 8
    assert policy.drafting(True)  # the other mode is judged apart


def test_tries_again_after_the_wait_and_waits_longer_when_it_still_does_not_pay():
    policy = BreakEven(patience=2, retry_after=4, max_wait=16)
    drafted = replay(policy, False, drafting_rate=10.0, plain_rate=20.0, replies=3 + 4 + 1 + 8 + 1)
    # off after 3 replies; 4 plain; one try; 8 plain (the wait doubled); one more try
    assert drafted == [True, True, False] + [False] * 4 + [True] + [False] * 8 + [True]
    # The cost of trying is bounded: over a long run, nearly every reply is plain.
    long_run = replay(policy, False, drafting_rate=10.0, plain_rate=20.0, replies=200)
    assert sum(long_run) <= 200 / 16 + 1


def test_comes_back_on_when_drafting_pays_again():
    policy = BreakEven(patience=2, retry_after=3)
    replay(policy, False, drafting_rate=10.0, plain_rate=20.0, replies=3)
    assert not policy.drafting(False)
    notes = []
    for _ in range(6):
        draft = policy.drafting(False)
        rate = 40.0 if draft else 20.0  # the drafter now doubles the speed
        notes.append(policy.observed(False, draft, 100, 100 / rate))
    assert any(n and n.startswith("speculation back on for no-think mode") for n in notes), notes
    assert policy.drafting(False) and policy.note(False) is None


def test_a_paying_drafter_stays_on_with_rare_plain_probes():
    policy = BreakEven(probe_every=32)
    drafted = replay(policy, True, drafting_rate=30.0, plain_rate=20.0, replies=100)
    assert drafted[:3] == [True, True, False]  # the first plain figure, after two drafting replies
    assert sum(not d for d in drafted) <= 1 + 100 // 32


@pytest.mark.parametrize("setting", ["on", "off"])
def test_a_pinned_setting_is_never_changed(setting):
    policy = BreakEven(setting=setting)
    drafted = replay(policy, False, drafting_rate=10.0, plain_rate=20.0, replies=20)
    assert drafted == [setting == "on"] * 20
    assert policy.note(False) == f"speculation pinned {setting}"


def test_short_replies_judge_nothing():
    policy = BreakEven(patience=1)
    for _ in range(10):
        policy.observed(False, policy.drafting(False), 3, 1.0)
    assert policy.drafting(False) and not policy.modes["no_think"].plain


# -- the in-process engine --------------------------------------------------------------------

# 96 tokens and, for the cheap drafter, 12-token drafts: it then runs about 1.5x plain here (1.1-1.3x
# at 48 tokens and 4-token drafts, where one noisy reply could switch it off again: a CI run did).
GREEDY = Sampling(temperature=0, max_tokens=96)
HELLO = [{"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """A 6-block target whose blocks after the first write nothing back (so a 1-block
    model of the same seed predicts it at a sixth of the cost), and a drafter as big as
    the target that agrees with it only now and then."""
    folder = tmp_path_factory.mktemp("break-even")
    target = write_model(folder / "target.gguf", chat_model(n_layer=6, n_embd=512), silent_from=1)
    return {
        "target": target,
        "slow": write_model(folder / "slow.gguf", chat_model(n_layer=6, n_embd=512), noise=0.6),
        "cheap": write_model(folder / "cheap.gguf", chat_model(n_layer=1, n_embd=512)),
    }


def replies(engine: InprocEngine, count: int) -> list[End]:
    ends = []
    for _ in range(count):
        end = list(engine.stream(HELLO, think=False, sampling=GREEDY))[-1]
        assert isinstance(end, End), end
        ends.append(end)
    return ends


def test_an_engine_stops_drafting_where_it_runs_below_plain_and_resumes_where_it_pays(pairs, monkeypatch):
    # Speeds decide this test. Its generated models are F32, which llama.cpp's weight repacking
    # speeds up and whose kernels never crash where conftest.py turns repacking off (AMX int8).
    monkeypatch.setenv("LLAMA_ARG_REPACK", "true")
    policy = BreakEven(patience=2, retry_after=3)
    slow = InprocEngine(str(pairs["target"]), draft_path=str(pairs["slow"]), n_ctx=512, n_max=4, break_even=policy)
    slow.load()
    try:
        ends = replies(slow, 6)
    finally:
        slow.close()
    drafted = [end.stats.drafted > 0 for end in ends]
    assert [end.stats.draft_asked for end in ends] == drafted  # asked exactly where it drafted
    # Off within three replies (two drafting, then a plain probe faster than both), then plain.
    assert drafted[:3] == [True, True, False] and not any(drafted[3:5]), drafted
    assert ends[2].stats.draft_note.startswith("speculation off for no-think mode: slower than plain")
    assert ends[3].stats.draft_note.startswith("drafter off: slower than plain here")
    # The drafter changes (the same mode's state given to an engine whose drafter costs a
    # sixth of the target): the next try pays, and drafting stays on.
    cheap = InprocEngine(str(pairs["target"]), draft_path=str(pairs["cheap"]), n_ctx=512, n_max=12, break_even=policy)
    cheap.load()
    try:
        ends = replies(cheap, 4)
    finally:
        cheap.close()
    notes = [end.stats.draft_note for end in ends]
    assert any(note and note.startswith("speculation back on for no-think mode") for note in notes), notes
    assert ends[-1].stats.drafted > 0 and ends[-1].stats.draft_note is None


def test_a_reply_the_drafter_was_asked_for_counts_as_drafting_even_when_it_drafted_nothing():
    """Issue 47: a block drafter at its probability floor drafted 0 tokens in every reply, still
    paid its block pass, and break-even (fed `drafted > 0`) took every reply for a plain one and
    never switched it off. The engines now say whether they asked; the policy judges that."""
    from app.tui.figures import readout_line
    from backends.stats import Stats

    policy = BreakEven(patience=2, retry_after=8)
    notes = []
    for _ in range(3):
        asked = policy.drafting(False)
        # Asked or not, nothing is drafted; asked costs the block pass: half the speed.
        notes.append(policy.observed(False, asked, 100, 100 / (10.0 if asked else 20.0)))
    assert notes[-1] and notes[-1].startswith("speculation off for no-think mode")
    assert not policy.drafting(False)
    nothing = Stats(generated_tokens=40, decode_s=2.0, draft_asked=True)
    assert "drafted nothing" in readout_line(nothing) and "no drafter" not in readout_line(nothing)
    assert "the drafter drafted nothing" in nothing.summary()


def test_both_engines_word_the_copies_judge_and_the_drafters_alike():
    """One home for the notes (backends/break_even.reply_note): the copies' judge speaks of
    n-gram drafting, the drafter's of speculation, joined in one order."""
    from backends.break_even import reply_note

    copies = BreakEven(patience=1, what="n-gram drafting")
    drafter = BreakEven(setting="on")
    assert reply_note(None, copies, False, 40, 4.0, drafter_asked=False, copies_used=False) is None
    said = reply_note(drafter, copies, False, 40, 8.0, drafter_asked=True, copies_used=True)
    assert said is not None
    pinned, switched = said.split("; ", 1)
    assert pinned == "speculation pinned on"
    assert switched.startswith("n-gram drafting off for no-think mode: slower than plain decoding")
    assert reply_note(None, copies, False, 40, 8.0, drafter_asked=False, copies_used=None) is None
