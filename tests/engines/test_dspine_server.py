"""DSpine on dspine's patched llama-server (installers/patches/llama-server-dspine.patch),
held against the NumPy reference of docs/dspine-variant.md (tests/support/dspine_reference.py).

Tiny f32 drafters with random weights, a tiny target whose tapped hidden state is its token
embedding (target_layers [0]), greedy requests whose logit bias leaves the target and the
drafter three likely tokens (so drafts are kept some of the time, not never). The server logs
every draft it makes (DSPINE_LOG_DRAFTS=1); each is compared with the reference's, position
by position, and each verify step's kept count with what the reference's draft predicts
against the target's own output."""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.support.block_drafters import BlockDrafter, write_block_drafter
from tests.support.draft_log_server import DraftLogServer, Step, by_request
from tests.support.dspine_reference import DSpineReference, _read, accepted
from tests.support.gguf_models import QTYPE, Shape, write_model

N_VOCAB = 300
FAVOURED = (101, 102, 103)  # "e", "f", "g": what the logit bias leaves likely
BIAS = dict.fromkeys(FAVOURED, 30.0)
REQUEST_BIAS = [[t, b] for t, b in BIAS.items()]
TIE = 0.02  # logits of about 20 in f32 move by a few thousandths: closer calls are not compared
# The drafter's cache in f32 and attention without flash attention (which reads K and V in f16 on
# the CPU): otherwise drafts past a few dozen positions differ from an f64 reference by f16 noise.
EXACT = ("-fa", "off", "-ctkd", "f32", "-ctvd", "f32")


pytestmark = pytest.mark.slow  # llama-server launches, and the patched build the first time


@pytest.fixture(scope="module")
def server_binary(request) -> Path:
    # A llama-server built from a dev tree of the same patches (DSPINE_TEST_LLAMA_SERVER) spares
    # the rebuild while the patch is being written.
    dev = os.environ.get("DSPINE_TEST_LLAMA_SERVER")
    return Path(dev) if dev else request.getfixturevalue("patched_server")


@pytest.fixture(scope="module")
def dense_target(tmp_path_factory) -> Path:
    shape = Shape(arch="llama", n_layer=2, n_embd=64, n_vocab=N_VOCAB, weight_type=QTYPE.F32)
    return write_model(tmp_path_factory.mktemp("target") / "target.gguf", shape, seed=5, scale=0.3)


def features_of(target: Path) -> np.ndarray:
    """The target's layer-0 input for each token: its embedding row."""
    return _read(target)[1]["token_embd.weight"]


def prompt(seed: int, n: int) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(32, 127, size=n)]


def drafter_file(tmp_path: Path, d: BlockDrafter, seed: int, name: str = "drafter") -> Path:
    return write_block_drafter(tmp_path / f"{name}-{seed}.gguf", replace(d, favoured=FAVOURED), seed)


def compare(steps: list[Step], sequences: list[list[int]], ref: DSpineReference, n_max: int, bias=BIAS) -> dict:
    """Each logged draft against the reference's for the same context; counts of what was checked."""
    checked = {"positions": 0, "ties": 0, "steps": 0, "verifies": 0}
    runs = by_request(steps)
    assert len(runs) == len(sequences), [len(r) for r in runs]
    for run, seq in zip(runs, sequences, strict=True):
        for step in run:
            assert seq[step.pos0] == step.id_last, step
            check_step(step, seq, ref, n_max, bias, checked)
    return checked


def check_step(step: Step, seq: list[int], ref: DSpineReference, n_max: int, bias, checked: dict) -> None:
    expected = ref.draft(seq[: step.pos0], step.id_last, n_max, bias=bias)
    for i, (got, want) in enumerate(zip(step.drafted, expected.tokens, strict=False)):
        if expected.margin[i] < TIE:
            checked["ties"] += 1
            break
        assert got == want, (step, expected.tokens, i)
        checked["positions"] += 1
    else:
        assert len(step.drafted) == len(expected.tokens), (step, expected.tokens)
    checked["steps"] += 1
    if step.accepted is not None and step.pos0 + n_max + 1 < len(seq):
        assert step.accepted == accepted(step.drafted, seq[step.pos0 + 1 :]), (step, seq[step.pos0 :])
        checked["verifies"] += 1


VARIANTS = {
    "injection": BlockDrafter(transfer_dim=16),
    "norm, message, silu, gate per channel": BlockDrafter(
        transfer_dim=16, message_dim=8, inj_norm=True, activation="silu", gate_width=64
    ),
    "tanh, no gate, layer 1 only": BlockDrafter(transfer_dim=16, gate="none", activation="tanh", injection_layers=(1,)),
    "window 32, anchor-first": BlockDrafter(transfer_dim=16, sliding_window=32, sample_from_anchor=True),
    # SpecForge's mask: the sliding layer causal, the full one bidirectional in the block
    "full layer bidirectional": BlockDrafter(
        transfer_dim=16, sliding_window=32, swa_pattern=(True, False), causal_full_layers=False
    ),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_servers_drafts_are_the_references_position_by_position(variant, server_binary, dense_target, tmp_path):
    d = VARIANTS[variant]
    n_max = 16 if d.sample_from_anchor else 15
    kept = 0
    for seed in (1, 2):
        drafter = drafter_file(tmp_path, d, seed)
        ref = DSpineReference(drafter, features_of(dense_target))
        with DraftLogServer(
            server_binary, dense_target, drafter, tmp_path / f"{seed}.log", n_max=n_max, extra=EXACT
        ) as server:
            sequences = []
            for p in (prompt(seed, 12), prompt(seed + 10, 48 if d.sliding_window else 20)):
                sequences.append(p + server.complete(p, 48, logit_bias=REQUEST_BIAS))
            steps = server.steps()
        assert steps and all(s.spec_type == "draft-dspine" for s in steps)
        checked = compare(steps, sequences, ref, n_max)
        assert checked["positions"] >= 8 * checked["steps"], checked
        assert checked["verifies"] >= 4, checked
        kept += sum(s.accepted or 0 for s in steps)
    assert kept > 0, "no draft kept at all: the bias leaves too little to test"


def test_the_last_write_refinement_walks_the_lattice_as_the_reference(server_binary, dense_target, tmp_path):
    d = BlockDrafter(transfer_dim=16, selector_rank=8, selector_top_k=4)
    drafter = drafter_file(tmp_path, d, 3)
    ref = DSpineReference(drafter, features_of(dense_target))
    with DraftLogServer(server_binary, dense_target, drafter, tmp_path / "walk.log", extra=EXACT) as server:
        sequences = [p + server.complete(p, 32) for p in (prompt(3, 12), prompt(4, 20))]
        steps = server.steps()
    # The lattice drafts no logits, so no bias follows it into the walk (as DFlash2's).
    checked = compare(steps, sequences, ref, 15, bias=None)
    assert checked["positions"] >= 8 * checked["steps"], checked


def test_drafter_is_recognised_from_its_tensors_without_spec_type(server_binary, dense_target, tmp_path):
    drafter = drafter_file(tmp_path, VARIANTS["injection"], 1)
    with DraftLogServer(
        server_binary, dense_target, drafter, tmp_path / "auto.log", spec_type=None, extra=EXACT
    ) as server:
        server.complete(prompt(1, 12), 16, logit_bias=REQUEST_BIAS)
        steps = server.steps()
    assert steps and {s.spec_type for s in steps} == {"draft-dspine"}
    assert "auto-detected speculative type 'draft-dspine'" in (tmp_path / "auto.log").read_text()


def test_a_shorter_launch_drafts_the_first_tokens_of_the_full_block(server_binary, dense_target, tmp_path):
    """Prefix consistency: causal attention and forward-only injection make position t depend
    on positions <= t only, so n_max k drafts the first k of the block of 15."""
    drafter = drafter_file(tmp_path, VARIANTS["norm, message, silu, gate per channel"], 2)
    ref = DSpineReference(drafter, features_of(dense_target))
    p = prompt(7, 16)
    runs: dict[int, tuple[list[int], list[Step]]] = {}
    for k in (1, 3, 7, 15):
        with DraftLogServer(
            server_binary, dense_target, drafter, tmp_path / f"k{k}.log", n_max=k, extra=EXACT
        ) as server:
            seq = p + server.complete(p, 40, logit_bias=REQUEST_BIAS)
            runs[k] = (seq, server.steps())
    full_seq, full_steps = runs[15]
    by_pos = {s.pos0: s.drafted for s in full_steps}
    shared = 0
    for k in (1, 3, 7):
        seq, steps = runs[k]
        assert seq == full_seq  # greedy: speculation never changes the answer
        for step in steps:
            block = ref.draft(seq[: step.pos0], step.id_last, 15, bias=BIAS)
            if min(block.margin[:k]) >= TIE:
                assert step.drafted == block.tokens[:k], (k, step)
            if step.pos0 in by_pos:
                assert step.drafted == by_pos[step.pos0][:k], (k, step)
                shared += 1
    assert shared >= 3


def test_bidirectional_dflash_breaks_prefix_consistency(server_binary, dense_target, tmp_path):
    """The same test on a DFlash file with bidirectional block attention: a shorter block sees
    fewer MASK positions after it, and its drafts move."""
    drafter = drafter_file(tmp_path, BlockDrafter(causal=False), 2)
    ref = DSpineReference(drafter, features_of(dense_target))
    p = prompt(7, 16)
    log = tmp_path / "bi.log"
    with DraftLogServer(server_binary, dense_target, drafter, log, n_max=3, spec_type="draft-dflash", extra=EXACT) as s:
        seq = p + s.complete(p, 40, logit_bias=REQUEST_BIAS)
        steps = s.steps()
    moved = 0
    for step in steps:
        own = ref.draft(seq[: step.pos0], step.id_last, 3, bias=BIAS)
        if min(own.margin) >= TIE:
            assert step.drafted == own.tokens  # the reference models bidirectional DFlash too
        moved += ref.draft(seq[: step.pos0], step.id_last, 15, bias=BIAS).tokens[:3] != step.drafted
    assert moved >= 1


def test_zeroed_injection_drafts_as_a_causal_dflash(server_binary, dense_target, tmp_path):
    base = VARIANTS["norm, message, silu, gate per channel"]
    zeroed = drafter_file(tmp_path, replace(base, zero_write=True), 4, "zeroed")
    dflash = drafter_file(tmp_path, BlockDrafter(causal=True), 4, "dflash")
    p = prompt(9, 16)
    drafts = {}
    for name, path, spec in (("zeroed", zeroed, "draft-dspine"), ("dflash", dflash, "draft-dflash")):
        with DraftLogServer(
            server_binary, dense_target, path, tmp_path / f"{name}.log", spec_type=spec, extra=EXACT
        ) as s:
            s.complete(p, 40, logit_bias=REQUEST_BIAS)
            drafts[name] = [(st.pos0, st.drafted) for st in s.steps()]
    assert drafts["zeroed"] == drafts["dflash"] and len(drafts["zeroed"]) >= 3
    ref = DSpineReference(zeroed, features_of(dense_target))
    live = DSpineReference(drafter_file(tmp_path, base, 4), features_of(dense_target))
    context, last = p[:-1], p[-1]
    assert ref.draft(context, last, 15).tokens == ref.draft(context, last, 15, inject=False).tokens
    assert live.draft(context, last, 15).tokens != live.draft(context, last, 15, inject=False).tokens


def test_changing_position_js_input_leaves_earlier_positions_unchanged(dense_target, tmp_path):
    ref = DSpineReference(
        drafter_file(tmp_path, VARIANTS["norm, message, silu, gate per channel"], 5), features_of(dense_target)
    )
    context = prompt(11, 10)
    block = [65] + [ref.mask_token] * 15
    base = ref.forward(context, 65, 16, block=block)
    for j in (1, 5, 15):
        changed = block.copy()
        changed[j] = 66
        moved = ref.forward(context, 65, 16, block=changed)
        assert np.allclose(moved[:j], base[:j]) and not np.allclose(moved[j:], base[j:])


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
    drafter = drafter_file(tmp_path, BlockDrafter(transfer_dim=16, sliding_window=window), 6)
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
    drafter = drafter_file(tmp_path, BlockDrafter(transfer_dim=16), 6)
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


def test_a_bidirectional_full_layer_is_read_from_the_file(server_binary, dense_target, tmp_path):
    """dflash.attention.causal_full_layers = false: the server's drafts are the reference's with the
    full layer bidirectional, and not those of the same file read as all causal."""
    drafter = drafter_file(tmp_path, VARIANTS["full layer bidirectional"], 3)
    ref = DSpineReference(drafter, features_of(dense_target))
    p = prompt(13, 40)
    with DraftLogServer(server_binary, dense_target, drafter, tmp_path / "full.log", extra=EXACT) as server:
        seq = p + server.complete(p, 24)
        steps = server.steps()
    checked = compare(steps, [seq], ref, 15, bias=None)
    assert checked["positions"] >= 8 * checked["steps"], checked
    ref.causal_full = True
    assert any(ref.draft(seq[: s.pos0], s.id_last, 15).tokens != s.drafted for s in steps)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"gate": "relu"}, "unknown dflash.injection.gate 'relu' (sigmoid or none)"),
        ({"activation": "gelu"}, "unknown dflash.injection.activation 'gelu' (identity, silu or tanh)"),
        ({"injection_layers": (0, 1), "inj_read_layers": (0,)}, "lists layer 1, which has no blk.1.inj_read.weight"),
    ],
)
def test_a_bad_dspine_file_stops_the_load_naming_the_key(change, message, server_binary, dense_target, tmp_path):
    drafter = drafter_file(tmp_path, replace(VARIANTS["injection"], **change), 1)
    with pytest.raises(RuntimeError, match="llama-server exited") as failed:
        DraftLogServer(server_binary, dense_target, drafter, tmp_path / "bad.log")
    assert message in str(failed.value)
