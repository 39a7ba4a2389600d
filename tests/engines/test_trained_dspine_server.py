"""A drafter trained by scripts/train_dspine/, exported in SpecForge's layout and converted by
dspine's converter, drafts through the patched llama-server what the trainer's own JAX forward
drafts (its `reference-drafts.json`: the first draft after a held-out prompt's prefill),
position by position up to the first near tie.

The export is not in the repository (it is a training run's output): set
DSPINE_TRAINED_EXPORT to an export folder (`RUNS/export/dspine`); without it this skips."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.draft_log_server import DraftLogServer

pytestmark = pytest.mark.slow  # llama-server launches, and the patched build the first time

EXPORT = os.environ.get("DSPINE_TRAINED_EXPORT")
# The server's taps come from the Q8_0 target with 8-bit activations, the trainer's from the
# dequantised weights in float32: calls closer than reference.py's margin may flip, so only the
# positions before the first of them (`clear_refined`) are compared.
EXACT = ("-fa", "off", "-ctk", "f32", "-ctv", "f32", "-ctkd", "f32", "-ctvd", "f32")


@pytest.mark.skipif(not EXPORT, reason="DSPINE_TRAINED_EXPORT names no trained export")
def test_the_server_drafts_what_the_trainer_drafts(server_binary, tmp_path):
    from app.hub.convert_run import convert_checkpoint

    folder = Path(EXPORT)
    reference = json.loads((folder / "reference-drafts.json").read_text())
    target = Path(reference["target"])
    gguf_file = tmp_path / "drafter.gguf"
    convert_checkpoint(folder / "config.json", [folder / "model.safetensors"], target, gguf_file, "F32")
    cases = [case for case in reference["drafts"] if "refined" in case]
    assert cases, "the export is not a DSpine drafter's (no refined drafts)"
    with DraftLogServer(server_binary, target, gguf_file, tmp_path / "server.log", n_max=15, n_ctx=2048,
                        extra=EXACT) as server:  # fmt: skip
        firsts, seen = [], 0
        for case in cases:
            # more tokens than a block, so the server's first draft is a whole block of 15
            server.complete(case["prompt_tokens"], 20, **{"speculative.n_max": 15})
            steps = server.steps()
            assert len(steps) > seen, "the server drafted nothing"
            firsts.append(steps[seen])
            seen = len(steps)
    compared = 0
    for case, first in zip(cases, firsts, strict=True):
        assert first.pos0 == len(case["prompt_tokens"]) and first.id_last == case["anchor"], (first, case["anchor"])
        n = case["clear_refined"]
        assert first.drafted[:n] == case["refined"][:n], (case["family"], first.drafted, case["refined"], n)
        compared += n
    # the comparison must cover something: a drafter whose every first call is a near tie proves nothing
    assert compared >= len(cases), f"only {compared} positions clear of near ties"
