"""A reply that loops, in a real terminal (issue 68): the model writes a function and then
lines of `#` without end (what SmolLM2 did to a new user's first prompt). The chat stops it
after a bounded number of repeats (LINE_REPEATS), its figures say "stopped: it looped", a note names what
repeated, and the prompt is free again for the next message."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from backends.reply_guard import LINE_REPEATS
from tests.conftest import wait_for
from tests.support.repos import scratch_repo
from tests.support.stand_in import StandIn, choice, stand_in
from tests.support.tmux import dspine_in_tmux, keys, screen

pytestmark = [
    pytest.mark.slow,  # a real terminal around a real dspine process
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

LOOP = 3000  # lines of `#` the stand-in would send: far past what the chat lets through


def chunks(messages: list[dict]) -> list[dict]:
    head = [choice({"content": "def reverse(head):\n"}), choice({"content": "    return head\n"})]
    return head + [choice({"content": "#\n"}) for _ in range(LOOP)] + [choice({}, "stop")]


@pytest.fixture
def model() -> Iterator[StandIn]:
    with stand_in(chunks) as served:
        yield served


def test_the_chat_stops_a_looping_reply_and_says_so(env, model, tmp_path):
    repo = scratch_repo(tmp_path)
    args = ("chat", "--engine", "remote", "--url", model.url, "--think", "off", "--no-tools")
    with dspine_in_tmux(env, tmp_path, *args, cwd=repo, name="loop") as session:
        wait_for(lambda: "Ask about code" in screen(session), timeout=60, what="the chat to open")
        keys(session, "write a python function that reverses a linked list", "Enter")
        # The figures line first, then the note (a toast, drawn a frame later).
        wait_for(lambda: "stopped: it looped" in screen(session), timeout=60, what="the loop to be stopped")
        wait_for(lambda: "(a loop)" in screen(session), timeout=30, what="the note")
        shown = screen(session)
        print("\n--- the screen after the loop ---\n" + shown)
        # The note (a toast, its words wrapped over two lines) and the stopped reply's figures.
        assert f"stopped: the reply repeated '#' {LINE_REPEATS} times in a row" in shown and "(a loop)" in shown
        assert f"{LINE_REPEATS + 2} tokens" in shown  # the function's 2 lines and the repeats: no more came
        keys(session, "thanks", "Enter")  # the prompt is free again: a second request goes out
        wait_for(lambda: len(model.requests) == 2, timeout=30, what="the next message to be sent")
        keys(session, "C-q")
