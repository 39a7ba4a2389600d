"""DSpine on dspine's patched llama-server (installers/patches/llama-server-dspine.patch): what
a DSpine file is to the server, what a draft costs, and that speculation stays exact.

Whether the server computes DSpine as its authors define it is tests/engines/
test_dspine_golden_server.py (the reference's own drafts); here tiny f32 drafters with random
weights (tests/support/block_drafters.py) next to tiny targets: the server recognises a DSpine
file by its code table, a block of k drafts the first k tokens of the block of 15, a request
that asks for no draft gets no block pass, a damaged file stops the load naming what is wrong,
and greedy speculation on a qwen35 hybrid target writes what plain decoding writes."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.support.block_drafters import BlockDrafter, write_block_drafter
from tests.support.draft_log_server import DraftLogServer, by_request
from tests.support.gguf_models import QTYPE, Shape, write_model

N_VOCAB = 300
FAVOURED = (101, 102, 103)  # "e", "f", "g": what the logit bias leaves likely
BIAS = dict.fromkeys(FAVOURED, 30.0)
REQUEST_BIAS = [[t, b] for t, b in BIAS.items()]
# The drafter's cache in f32 and attention without flash attention (which reads K and V in f16 on
# the CPU): drafts then do not move with the block's length through f16 rounding.
EXACT = ("-fa", "off", "-ctkd", "f32", "-ctvd", "f32")
DSPINE = BlockDrafter(transfer_rank=16, message_size=8, top_k=4)


pytestmark = pytest.mark.slow  # llama-server launches, and the patched build the first time


@pytest.fixture(scope="module")
def dense_target(tmp_path_factory) -> Path:
    shape = Shape(arch="llama", n_layer=2, n_embd=64, n_vocab=N_VOCAB, weight_type=QTYPE.F32)
    return write_model(tmp_path_factory.mktemp("target") / "target.gguf", shape, seed=5, scale=0.3)


def prompt(seed: int, n: int) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(32, 127, size=n)]


def drafter_file(tmp_path: Path, d: BlockDrafter, seed: int, name: str = "drafter") -> Path:
    return write_block_drafter(tmp_path / f"{name}-{seed}.gguf", replace(d, favoured=FAVOURED), seed)


def test_drafter_is_recognised_from_its_code_table_without_spec_type(server_binary, dense_target, tmp_path):
    drafter = drafter_file(tmp_path, DSPINE, 1)
    log = tmp_path / "auto.log"
    with DraftLogServer(server_binary, dense_target, drafter, log, spec_type=None, extra=EXACT) as server:
        server.complete(prompt(1, 12), 16, logit_bias=REQUEST_BIAS)
        steps = server.steps()
    assert steps and {s.spec_type for s in steps} == {"draft-dspine"}
    assert "auto-detected speculative type 'draft-dspine'" in log.read_text()


def test_a_block_of_k_drafts_the_first_k_of_the_block_of_15(server_binary, dense_target, tmp_path):
    """Prefix consistency on the server: the block is sized to what the request asks for (k + 1
    rows, not the launch length), and causal attention with t-1 -> t writes make its drafts the
    first k of the full block's. Each request's first draft follows the same prompt."""
    drafter = drafter_file(tmp_path, DSPINE, 2)
    lengths = (15, 1, 3, 7)
    with DraftLogServer(server_binary, dense_target, drafter, tmp_path / "k.log", n_max=15, extra=EXACT) as server:
        for seed in (7, 8, 9):
            for k in lengths:
                server.complete(prompt(seed, 16), 20, logit_bias=REQUEST_BIAS, **{"speculative.n_max": k})
        runs = by_request(server.steps())
    assert len(runs) == 3 * len(lengths)
    for i in range(0, len(runs), len(lengths)):
        full = runs[i][0].drafted
        assert len(full) == 15
        for k, run in zip(lengths[1:], runs[i + 1 : i + len(lengths)], strict=True):
            assert run[0].pos0 == runs[i][0].pos0
            assert run[0].drafted == full[:k], (k, run[0].drafted, full)


def test_a_request_that_asks_for_no_draft_gets_no_block_pass(server_binary, dense_target, tmp_path):
    drafter = drafter_file(tmp_path, DSPINE, 3)
    with DraftLogServer(server_binary, dense_target, drafter, tmp_path / "none.log", extra=EXACT) as server:
        plain = server.complete(prompt(4, 16), 24, logit_bias=REQUEST_BIAS, **{"speculative.n_max": 0})
        assert server.steps() == []
        drafted = server.complete(prompt(4, 16), 24, logit_bias=REQUEST_BIAS)
        assert server.steps()  # the same server drafts when asked
    assert plain == drafted


def test_without_refinement_it_still_drafts(server_binary, dense_target, tmp_path):
    """top_k 0: the base logits draft (no lattice), the same backbone and injection."""
    drafter = drafter_file(tmp_path, replace(DSPINE, top_k=0), 4)
    with DraftLogServer(server_binary, dense_target, drafter, tmp_path / "k0.log", extra=EXACT) as server:
        server.complete(prompt(5, 16), 24, logit_bias=REQUEST_BIAS)
        steps = server.steps()
    assert steps and len(steps[0].drafted) == 15


# -- a qwen35 hybrid target: greedy speculation writes what plain decoding writes ---------------


@pytest.fixture(scope="module")
def hybrid_target(tmp_path_factory) -> Path:
    shape = Shape(arch="qwen35", n_layer=4, n_embd=64, n_vocab=N_VOCAB, weight_type=QTYPE.F32)
    return write_model(tmp_path_factory.mktemp("hybrid") / "qwen35.gguf", shape, seed=8, scale=0.3)


def _parallel(server: DraftLogServer, prompts: list[list[int]], n: int) -> list[list[int]]:
    out: list[list[int]] = [[] for _ in prompts]

    def one(i: int) -> None:
        out[i] = server.complete(prompts[i], n, logit_bias=REQUEST_BIAS)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


HYBRID_CASES = [(1, 1, None), (3, 1, None), (15, 1, None), (3, 2, None), (15, 2, None), (15, 1, 32)]


@pytest.mark.parametrize(("n_max", "parallel", "window"), HYBRID_CASES)
def test_greedy_dspine_on_a_hybrid_target_is_plain_greedy(
    n_max, parallel, window, server_binary, hybrid_target, tmp_path
):
    drafter = drafter_file(
        tmp_path, replace(DSPINE, sliding_window=window, swa_pattern=(True, True) if window else None), 6
    )
    prompts = [prompt(20 + i, 80 if window else 16) for i in range(parallel)]
    with DraftLogServer(server_binary, hybrid_target, None, tmp_path / "plain.log", parallel=parallel) as plain:
        expected = _parallel(plain, prompts, 48)
    log = tmp_path / "spec.log"
    # -lv 4: llama.cpp's own context lines (n_rs_seq) in the log
    with DraftLogServer(
        server_binary, hybrid_target, drafter, log, n_max=n_max, parallel=parallel, extra=("-lv", "4")
    ) as spec:
        got = _parallel(spec, prompts, 48)
        steps = spec.steps()
    assert got == expected
    assert len(steps) >= 5 and any(s.accepted for s in steps)
    assert sum(1 for s in steps if s.accepted is not None and s.accepted < len(s.drafted)) >= 2  # rollbacks ran
    assert f"n_rs_seq              = {n_max}" in log.read_text()  # DSpine counts its drafts' state rows
    if parallel > 1:
        assert {s.seq for s in steps} == set(range(parallel))


def test_a_draft_longer_than_the_snapshots_falls_back_to_a_checkpoint(server_binary, hybrid_target, tmp_path):
    """The target keeps DSpine's n_max (3) recurrent-state snapshots. An n-gram copy chained before
    it drafts up to 16 (the request asks for 16; DSpine keeps its launch length): a copy cut back by
    more than 3 tokens cannot use a snapshot, so the server restores the checkpoint it took
    before verifying and replays what was accepted. The answer is still plain greedy's."""
    drafter = drafter_file(tmp_path, DSPINE, 6)
    # A prompt that repeats itself: the n-gram drafter finds copies to make from the start.
    repeated = prompt(40, 10) * 5
    with DraftLogServer(server_binary, hybrid_target, None, tmp_path / "plain.log") as plain:
        expected = plain.complete(repeated, 48, logit_bias=REQUEST_BIAS)
    log = tmp_path / "chain.log"
    ngram = ("--spec-ngram-mod-n-max", "16", "--spec-ngram-mod-n-min", "4", "--spec-ngram-mod-n-match", "4")
    with DraftLogServer(
        server_binary, hybrid_target, drafter, log, n_max=3, spec_type="ngram-mod,draft-dspine",
        extra=(*ngram, "-lv", "5"),  # 5: the debug lines that say a checkpoint was restored
    ) as spec:  # fmt: skip
        got = spec.complete(repeated, 48, logit_bias=REQUEST_BIAS, **{"speculative.n_max": 16})
        steps = spec.steps()
    text = log.read_text()
    assert got == expected
    assert "n_rs_seq              = 3" in text  # snapshots for DSpine's 3 drafts, not the copies' 16
    assert "restoring speculative checkpoint" in text, "no draft was cut back past the snapshots"
    assert all(len(s.drafted) <= 3 for s in steps)  # DSpine's own drafts keep their launch length


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"drop": ("dspine_message.weight",)}, "DSpine model is missing dspine_message.weight"),
        ({"drop": ("blk.1.dspine_write.weight",)}, "blk.1.dspine_write.weight"),
        ({"top_k": 8}, "DSpine top_k = 8 does not fit the refinement lattice (hidden size 64)"),
        ({"top_k": None}, "DSpine top_k = 16 does not fit"),  # the reference's default when the key is left out
        ({"sample_from_anchor": True}, "DSpine drafts in place"),
        ({"causal": False}, "DSpine attends causally inside the block: dflash.attention.causal must be true"),
    ],
    ids=["no message", "no write", "top-k too wide", "default top-k", "anchor-first", "bidirectional"],
)
def test_a_bad_dspine_file_stops_the_load_naming_what_is_wrong(change, message, server_binary, dense_target, tmp_path):
    drafter = drafter_file(tmp_path, replace(DSPINE, **change), 1)
    with pytest.raises(RuntimeError, match="llama-server exited") as failed:
        DraftLogServer(server_binary, dense_target, drafter, tmp_path / "bad.log").close()  # closed if it starts
    assert message in str(failed.value)


def test_a_tap_past_the_targets_last_layer_is_named_and_nothing_is_drafted(server_binary, dense_target, tmp_path):
    """The drafter's file is whole but made for a deeper target: llama-server (as upstream does when
    a drafter cannot start) serves without speculation, and says why, instead of stopping on an
    assert at the first draft."""
    drafter = drafter_file(tmp_path, replace(DSPINE, target_layers=(0, 2)), 1)
    log = tmp_path / "tap.log"
    with DraftLogServer(server_binary, dense_target, drafter, log) as server:
        assert len(server.complete(prompt(1, 12), 8)) == 8
        assert server.steps() == []
    assert "the drafter taps target layer 2, but the target has layers 0..1" in log.read_text()


def test_sampled_dspine_on_a_hybrid_target_draws_what_plain_decoding_draws(server_binary, hybrid_target, tmp_path):
    """Sampled requests keep the target's distribution: the verify step draws every position from
    the target under the request's sampler, so with the same seed the speculative answer is the
    plain answer token for token, drafts kept or rolled back."""
    drafter = drafter_file(tmp_path, DSPINE, 6)
    outputs = {}
    for name, draft in (("plain", None), ("dspine", drafter)):
        with DraftLogServer(server_binary, hybrid_target, draft, tmp_path / f"{name}.log") as server:
            outputs[name] = [
                server.complete(prompt(30, 16), 24, temperature=0.9, seed=seed, logit_bias=REQUEST_BIAS)
                for seed in range(6)
            ]
            steps = server.steps()
    assert outputs["dspine"] == outputs["plain"]
    assert len({tuple(o) for o in outputs["plain"]}) >= 4  # the seeds really draw different answers
    assert any(s.accepted for s in steps) and any(s.accepted == 0 for s in steps)


def test_blocks_that_do_not_all_fit_one_ubatch_take_turns(server_binary, hybrid_target, tmp_path):
    """Each block must be one run of one ubatch (the graph finds the anchors and the shifts by
    block). With a 24-token ubatch two blocks of 16 do not fit: one sequence drafts a step while
    the other waits, rather than a block cut in two (an abort, or drafts read from the wrong row)."""
    drafter = drafter_file(tmp_path, replace(DSPINE, block_size=None), 6)  # the key left out: 16
    prompts = [prompt(50 + i, 16) for i in range(2)]
    small = ("-ub", "24", "-b", "24")
    with DraftLogServer(server_binary, hybrid_target, None, tmp_path / "plain.log", parallel=2, extra=small) as plain:
        expected = _parallel(plain, prompts, 32)
    with DraftLogServer(server_binary, hybrid_target, drafter, tmp_path / "spec.log", parallel=2, extra=small) as spec:
        got = _parallel(spec, prompts, 32)
        steps = spec.steps()
    assert got == expected
    assert {s.seq for s in steps} == {0, 1}
