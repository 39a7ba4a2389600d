"""The mission's main path with the authors' DSpine checkpoint (issue 67): `dspine pull
qwen3.8-27b` on a machine whose llama-server is dspine's patched one fetches the checkpoint in
the reference's own layout (made by SpecForge's DSpineDraftModel: the server golden case,
tests/engines/golden/dspine/server/ckpt-s0) from the hub on 127.0.0.1 and converts it here;
`dspine fit` and `dspine doctor --model` say it runs; `dspine chat` in a real terminal drafts
with it (the readout's acceptance); greedy output with it is plain decoding's. The target is
the tiny llama the golden drafts were made against, under the catalog's file name."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from tests.conftest import ROOT, TARGET_Q4, TARGET_REPO, wait_for
from tests.support.dspine_golden_target import GOLDEN, write_target
from tests.support.nvml import RTX_3090, nvml_env
from tests.support.tmux import dspine_in_tmux, keys, screen

pytestmark = [
    pytest.mark.slow,  # the patched llama-server, a pull, a real terminal
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

AUTHORS = "tencent/Qwen3.8-27B-DSpine-b16"
CONVERTED = "Qwen3.8-27B-DSpine-b16-Q4_K_M.gguf"


@pytest.fixture
def pulled(dspine, hub, tmp_path, patched_server, models_dir):
    target = write_target(tmp_path / "target.gguf")
    hub.repos[TARGET_REPO].files[TARGET_Q4] = target.read_bytes()
    checkpoint = GOLDEN / "ckpt-s0"
    hub.add_repo(AUTHORS, {p.name: p.read_bytes() for p in checkpoint.iterdir() if p.is_file()})
    here = {"DSPINE_LLAMA_SERVER": str(patched_server), "DSPINE_DRAFT_P_MIN": "0"}
    result = dspine("pull", "qwen3.8-27b", extra_env=here, timeout=300)
    assert result.returncode == 0, result.stderr
    assert (models_dir / AUTHORS / CONVERTED).is_file()
    return here


def test_the_authors_checkpoint_converted_at_pull_drafts_in_the_chat(env, dspine, pulled, tmp_path, models_dir):
    here = pulled
    fit = dspine(
        "fit",
        "qwen3.8-27b",
        "--quant",
        "Q4_K_M",
        "--draft",
        "dspine",
        "--json",
        "--no-measure",
        extra_env={**here, **nvml_env(RTX_3090)},
    )
    assert fit.returncode == 0, fit.stderr
    settings = json.loads(fit.stdout)["settings"]
    assert settings["drafter"] == "dspine" and settings["drafter_file"].endswith(CONVERTED)
    doctor = dspine("doctor", "--model", "qwen3.8-27b", "--json", "--quick", extra_env=here)
    checks = {c["name"]: c for c in json.loads(doctor.stdout)}
    assert "runs it (--spec-type draft-dspine)" in checks["drafter file of qwen3.8-27b"]["detail"]

    # Greedy: drafting with the converted drafter writes what plain decoding writes.
    ask = ("run", "qwen3.8-27b", "hello there", "--temp", "0", "--max-tokens", "40", "--think", "off")
    # No GPU here: the default drafts only copies on a CPU (app/run/drafting_choice.py); the drafter
    # is asked for by name, as a user with a GPU gets it by default.
    drafted = dspine(*ask, "--draft", "dspine", extra_env=here, timeout=120)
    plain = dspine(*ask, "--draft", "none", extra_env=here, timeout=120)
    assert drafted.returncode == 0 and plain.returncode == 0, drafted.stderr + plain.stderr
    assert drafted.stdout.strip() and drafted.stdout == plain.stdout
    # ... and it did draft: the run's figures count the drafter's tokens (a random drafter's
    # against a random target's: few or none are kept, which is not what this shows).
    counted = re.search(r"accepted (\d+)/(\d+)", drafted.stderr)
    assert counted and int(counted[2]) > 0, drafted.stderr[-600:]

    args = ("chat", "--model", "qwen3.8-27b", "--draft", "dspine", "--think", "off", "--ctx", "768")
    with dspine_in_tmux(env, tmp_path, *args, cwd=ROOT, name="authors", size=(150, 32), extra_env=here) as session:
        wait_for(lambda: "Ask about code" in screen(session), timeout=90, what="the chat to open")
        keys(session, "write a poem", "Enter")
        wait_for(lambda: "drafted" in screen(session), timeout=60, what="the drafting figures")
        keys(session, "Escape")
        wait_for(lambda: "tokens ·" in screen(session) or "cancelled" in screen(session), timeout=30, what="the end")
        shown = screen(session)
        print("\n--- dspine chat with the authors' DSpine, converted at pull ---\n" + shown)
        assert "Qwen3.8-27B-DSpine-b1" in shown and "accept len" in shown  # the drafter named, its figures
        keys(session, "C-q")
