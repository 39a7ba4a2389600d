"""The in-process engine: dspine's own draft/verify loop on llama-cpp-python."""

from __future__ import annotations

import threading

import pytest

from backends.base import EngineError
from backends.events import Delta, End
from backends.inproc import InprocEngine
from backends.sampling import Sampling
from backends.stats import Stats
from tests.support.engine_models import open_engines

PROMPTS = ["hello world", "def fibonacci(n):", "The quick brown fox", "1 2 3 4"]


def tokens_of(engine: InprocEngine, text: str, sampling: Sampling, k: int | None = None) -> tuple[list[int], Stats]:
    stats = Stats()
    prompt = engine._target.tokenize(text)
    return [t for step in engine.generate_tokens(prompt, sampling, k, stats) for t in step], stats


@pytest.fixture(scope="module")
def engines(models):
    opened = {}
    for family in ("dense", "hybrid"):
        opened[family] = open_engines(models[family])
    yield opened
    for family in opened.values():
        for engine in family.values():
            engine.close()


@pytest.mark.parametrize("family", ["dense", "hybrid"])
def test_greedy_speculation_equals_plain_greedy_token_for_token(engines, family):
    greedy = Sampling(temperature=0, max_tokens=48)
    drafted = accepted = 0
    for prompt in PROMPTS:
        plain, _ = tokens_of(engines[family]["plain"], prompt, greedy)
        for k in (1, 3, 8):
            for drafter in ("same", "noisy"):
                fast, stats = tokens_of(engines[family][drafter], prompt, greedy, k)
                assert fast == plain, (prompt, k, drafter)
                if drafter == "same":
                    assert stats.accepted == stats.drafted > 0
                else:
                    drafted += stats.drafted
                    accepted += stats.accepted
    assert 0 < accepted < drafted  # the noisy drafter is right only part of the time


def test_equal_drafter_is_always_accepted_when_sampling_too(engines):
    engine = engines["dense"]["same"]
    tokens, stats = tokens_of(
        engine, "hello", Sampling(temperature=1.0, top_p=0.95, top_k=20, seed=7, max_tokens=40), 4
    )
    assert len(tokens) == 40 and stats.accepted == stats.drafted > 0
    again, _ = tokens_of(engine, "hello", Sampling(temperature=1.0, top_p=0.95, top_k=20, seed=7, max_tokens=40), 4)
    assert again == tokens  # a seed makes it repeatable


def test_stream_events_and_figures(engines):
    events = list(
        engines["dense"]["same"].stream(
            [{"role": "user", "content": "hi"}], think=False, sampling=Sampling(temperature=0, max_tokens=30)
        )
    )
    assert isinstance(events[-1], End) and events[-1].reason == "length"
    text = "".join(e.text for e in events if isinstance(e, Delta))
    assert text and text.isascii()
    stats = events[-1].stats
    assert stats.generated_tokens == 30 and stats.acceptance_rate == 1.0
    assert stats.acceptance_length > 1 and stats.ttft_s is not None and stats.tokens_per_s > 0


def test_think_switch_reaches_the_template(engines):
    engine = engines["dense"]["plain"]
    messages = [{"role": "user", "content": "hi"}]
    on, off = engine.prompt_tokens(messages, think=True), engine.prompt_tokens(messages, think=False)
    assert len(off) - len(on) == 6  # <think>, two newlines, </think>, two newlines
    assert off[: len(on)] == on


def test_cancel_stops_within_a_step(models):
    engine = InprocEngine(str(models["dense"]["target"]), draft_path=str(models["dense"]["same"]), n_ctx=4096).load()
    try:
        stream = engine.stream([{"role": "user", "content": "go"}], sampling=Sampling(temperature=0, max_tokens=3000))
        for event in stream:
            if isinstance(event, Delta):
                threading.Thread(target=engine.cancel).start()
                break
        rest = list(stream)
        assert isinstance(rest[-1], End) and rest[-1].reason == "cancelled"
        assert rest[-1].stats.generated_tokens < 3000
    finally:
        engine.close()


def test_drafter_with_another_vocabulary_is_refused(models, tmp_path):
    from tests.support.gguf_models import chat_model, write_model

    other = write_model(tmp_path / "other.gguf", chat_model(n_vocab=400))
    with pytest.raises(EngineError, match="another vocabulary"):
        InprocEngine(str(models["dense"]["target"]), draft_path=str(other)).load()


def test_missing_model_file(tmp_path):
    with pytest.raises(EngineError, match="does not exist"):
        InprocEngine(str(tmp_path / "none.gguf")).load()


def test_rollback_needs_snapshots_on_a_hybrid(models):
    from backends.inproc import _Model

    dense = _Model(str(models["dense"]["target"]), 256, 0, 512, rollback=0)
    hybrid_bare = _Model(str(models["hybrid"]["target"]), 256, 0, 512, rollback=0)
    hybrid = _Model(str(models["hybrid"]["target"]), 256, 0, 512, rollback=4)
    try:
        assert dense.can_roll_back()
        assert not hybrid_bare.can_roll_back()  # what makes the engine fall back to plain decoding
        assert hybrid.can_roll_back()
    finally:
        for model in (dense, hybrid_bare, hybrid):
            model.free()


@pytest.mark.parametrize("drafter", ["same", "noisy", "plain"])
def test_deltas_say_which_text_came_from_accepted_drafts(engines, drafter):
    """A delta per token: exactly the accepted drafts are marked, the target's own tokens
    (the first, corrections, bonus tokens) are not."""
    greedy = Sampling(temperature=0, max_tokens=40)
    events = list(engines["dense"][drafter].stream([{"role": "user", "content": "hello"}], False, greedy))
    deltas = [e for e in events if isinstance(e, Delta)]
    end = events[-1]
    assert isinstance(end, End)
    assert len(deltas) == end.stats.generated_tokens  # one delta per token: attribution is per token
    assert sum(d.drafted for d in deltas) == end.stats.accepted
    assert deltas[0].drafted == 0  # the first token comes from the prompt pass
    if drafter == "same":  # all accepted: each step is k drafts then the target's bonus token
        assert [d.drafted for d in deltas[:10]] == [0] + [1] * 8 + [0]
    if drafter == "plain":
        assert end.stats.accepted == 0
