"""The chat's /tune as a new user meets it (issue 47: "offered once on a model's first run, never
forced"): the first chat on an untuned model offers it once; /tune closes the model, measures,
shows what it picked and opens the model again with it; the next chat names the pick and does
not offer again. In a real terminal (tmux), on a generated model in process."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import ROOT, wait_for
from tests.support.gguf_models import chat_model, write_model
from tests.support.tmux import dspine_in_tmux, keys, screen

pytestmark = [
    pytest.mark.slow,  # a real terminal around a real dspine process that tunes
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

OFFER = "has not been tuned on this machine yet"


def test_tune_offered_once_run_in_the_chat_and_used_after(env, tmp_path):
    model = write_model(tmp_path / "tiny.gguf", chat_model(n_layer=1, n_embd=64))
    args = ("chat", "--model", str(model), "--engine", "inproc", "--think", "off", "--no-tools")
    tunes = tmp_path / "data" / "dspine" / "tunes.json"
    with dspine_in_tmux(env, tmp_path, *args, cwd=ROOT, name="tune", size=(110, 40)) as session:
        wait_for(lambda: OFFER in screen(session), timeout=60, what="the offer to tune")
        keys(session, "/tune", "Enter")
        try:
            wait_for(lambda: "Tuned." in screen(session), timeout=240, what="the tune's result")
            wait_for(lambda: "ready" in screen(session).splitlines()[-4:][0] or "tuned:" in screen(session),
                     timeout=60, what="the model open again")  # fmt: skip
        finally:
            print("\n--- /tune in the chat ---\n" + screen(session))
        shown = screen(session)
        assert "Picked" in shown and "plain" in shown and "n-gram" in shown  # the setups it measured
        (entry,) = (v for k, v in json.loads(tunes.read_text()).items() if k != "offered")
        assert entry["summary"] and entry["table"]
        keys(session, "say hi", "Enter")
        wait_for(lambda: "tokens ·" in screen(session), timeout=60, what="a reply after the tune")
        keys(session, "C-q")
    with dspine_in_tmux(env, tmp_path, *args, cwd=ROOT, name="tune2", size=(110, 40)) as session:
        wait_for(lambda: "tuned:" in screen(session), timeout=60, what="the pick named in the readout")
        keys(session, "say hi", "Enter")
        wait_for(lambda: "tokens ·" in screen(session), timeout=60, what="a reply")
        assert OFFER not in screen(session)  # said once
        keys(session, "C-q")
