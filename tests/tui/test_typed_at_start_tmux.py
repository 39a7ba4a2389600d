"""Keys typed while `dspine chat` opens its engine, before the chat's screen is drawn, land in
the prompt (nothing the user typed is dropped): the README's user types their first question
while the model loads. A real terminal (tmux), the in-process engine on a generated model."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import ROOT, wait_for
from tests.support.tmux import dspine_in_tmux, keys, screen

pytestmark = [
    pytest.mark.slow,  # a real terminal around a real dspine process
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def test_keys_typed_while_the_chat_opens_reach_the_prompt(env, models, tmp_path):
    files = models["dense"]
    args = ("chat", "--model", str(files["target"]), "--draft", "none", "--engine", "inproc", "--think", "off")
    with dspine_in_tmux(env, tmp_path, *args, cwd=ROOT, name="typed", size=(120, 30)) as session:
        # Typed at once: the Python start-up, the engine's load and the first paint are all ahead.
        keys(session, "-l", "why is the sky blue")
        # The footer says the chat is drawn (the terminal echoes the typed words before it is).
        wait_for(lambda: "Quit" in screen(session), timeout=60, what="the chat")
        wait_for(lambda: "why is the sky blue" in screen(session), timeout=15, what="the typed words in the prompt")
        shown = screen(session)
        print("\n--- typed before the chat opened ---\n" + shown)
        assert "why is the sky blue" in shown


def test_a_question_and_enter_typed_ahead_wait_in_the_prompt_unsent(env, models, tmp_path):
    files = models["dense"]
    args = ("chat", "--model", str(files["target"]), "--draft", "none", "--engine", "inproc", "--think", "off")
    with dspine_in_tmux(env, tmp_path, *args, cwd=ROOT, name="typed-enter", size=(120, 30)) as session:
        keys(session, "-l", "what is a monad")
        keys(session, "Enter")
        wait_for(lambda: "Typed while" in screen(session), timeout=60, what="the note on the kept question")
        shown = screen(session)
        print("\n--- a question and Enter typed before the chat opened ---\n" + shown)
        prompt_line = next(line for line in shown.splitlines() if "what is a monad" in line)
        assert prompt_line.startswith("▊"), shown  # in the prompt's box, not a sent message
        assert "tokens ·" not in shown  # no reply ran
