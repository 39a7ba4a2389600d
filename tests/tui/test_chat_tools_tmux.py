"""`dspine chat` working on a scratch git repository in a real terminal (tmux): the model
(a stand-in OpenAI server on 127.0.0.1, through `--engine remote`) proposes one edit,
the diff waits for consent on screen, `y` applies it and the model's next turn follows.
The screen with the diff is printed into the test log."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest

from tests.conftest import wait_for
from tests.support.repos import scratch_repo
from tests.support.stand_in import StandIn, choice, stand_in
from tests.support.tmux import dspine_in_tmux, keys, screen

pytestmark = [
    pytest.mark.slow,  # a real terminal around a real dspine process
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

EDIT = {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}


def chunks(messages: list[dict]) -> list[dict]:
    """First turn: a sentence, then one edit_file call. After the tool's result: a last word."""
    if any(m["role"] == "tool" for m in messages):
        return [choice({"content": "Fixed: add adds now."}), choice({}, "stop")]
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "edit_file", "arguments": ""}}
    arguments = json.dumps(EDIT)
    return [
        choice({"content": "The subtraction is the bug; here is the fix."}),
        choice({"tool_calls": [call]}),
        choice({"tool_calls": [{"index": 0, "function": {"arguments": arguments[:20]}}]}),
        choice({"tool_calls": [{"index": 0, "function": {"arguments": arguments[20:]}}]}),
        choice({}, "tool_calls"),
    ]


@pytest.fixture
def model() -> Iterator[StandIn]:
    with stand_in(chunks) as served:
        yield served


def test_a_diff_waits_for_consent_in_tmux(env, model, tmp_path):
    repo = scratch_repo(tmp_path)
    calc = repo / "calc.py"
    calc.write_text("def add(a, b):\n    return a - b\n")
    # The chat runs in the scratch repository (its project); this checkout's code runs it.
    args = ("chat", "--engine", "remote", "--url", model.url, "--think", "off")
    with dspine_in_tmux(env, tmp_path, *args, cwd=repo, name="tools") as session:
        wait_for(lambda: "Ask about code" in screen(session), timeout=60, what="the chat to open")
        keys(session, "Fix the bug in calc.py", "Enter")
        # The dialog, and under it the reply so far and its folded tool line.
        wait_for(
            lambda: all(text in screen(session) for text in ("y yes", "here is the fix", "edit_file calc.py")),
            timeout=30,
            what="the consent dialog over the reply",
        )
        shown = screen(session)
        print("\n--- dspine chat in tmux: a diff waiting for consent ---\n" + shown)
        assert "edit calc.py (+1 -1)?" in shown
        assert "-    return a - b" in shown and "+    return a + b" in shown
        assert calc.read_text().endswith("a - b\n")  # nothing is written before the user says so
        keys(session, "y")
        wait_for(lambda: calc.read_text().endswith("a + b\n"), timeout=30, what="the edit")
        wait_for(lambda: "Fixed: add adds now." in screen(session), timeout=30, what="the next turn")
        assert "edit_file calc.py · yes" in screen(session)
        tool_results = [m for m in model.requests[-1]["messages"] if m["role"] == "tool"]
        assert len(tool_results) == 1 and tool_results[0]["content"].startswith("applied")
        keys(session, "C-q")
