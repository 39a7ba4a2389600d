"""`dspine chat` in a real terminal (tmux), the way the README runs it, on a
generated model with llama-server; the screen is printed into the test log."""

from __future__ import annotations

import shutil
import subprocess

import psutil
import pytest

from tests.conftest import ROOT, wait_for
from tests.support.tmux import dspine_in_tmux, keys, screen, tmux

pytestmark = [
    pytest.mark.slow,  # a real terminal around a real dspine process
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def test_chat_in_tmux(env, models, tmp_path):
    files = models["dense"]
    # A short context keeps the whole reply on one screen with the prompt above it: on a quiet
    # machine the reply reaches the context's end before the Escape lands, and at 2048 its
    # 1,670 tokens had scrolled the prompt off (CI, 2026-12-02).
    args = ("chat", "--model", str(files["target"]), "--draft", str(files["same"]), "--think", "off", "--ctx", "768")
    floor = {"DSPINE_DRAFT_P_MIN": "0"}  # the generated drafter never passes the draft kind's floor
    # 150 columns: room for the whole mode line with the drafter's file name beside the figures
    # (narrower, the name gives way to the speed and acceptance figures: tests/tui/test_readout.py).
    wide = (150, 32)
    with dspine_in_tmux(env, tmp_path, *args, cwd=ROOT, name="chat", size=wide, extra_env=floor) as session:
        wait_for(lambda: "Ask about code" in screen(session), timeout=60, what="the chat to open")
        keys(session, "Write hello world in C", "Enter")
        wait_for(lambda: "accept len" in screen(session), timeout=60, what="live figures")
        keys(session, "Escape")
        wait_for(
            lambda: "tokens ·" in screen(session) or "cancelled" in screen(session),
            timeout=30,
            what="the stopped reply",
        )
        shown = screen(session)
        print("\n--- dspine chat in tmux ---\n" + shown)
        assert (
            "Write hello world in C" in shown and "think off" in shown and "dense-same.gguf" in shown
        )  # the drafter, named in the readout
        pane = int(
            subprocess.run(tmux("display", "-p", "-t", session, "#{pane_pid}"), capture_output=True, text=True).stdout
        )
        servers_before = [p for p in psutil.Process(pane).children(recursive=True) if p.name() == "llama-server"]
        assert servers_before, "the chat runs its own llama-server"
        keys(session, "C-q")
        wait_for(
            lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in servers_before),
            timeout=30,
            what="llama-server to stop with the chat",
        )
