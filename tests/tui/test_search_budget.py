"""`search` has a time budget (issue 22, item 3): a pattern that backtracks without end on a long
line stops within it, and the model is told why and what to do."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest

from app.agent import files
from app.agent.project import open_project
from app.agent.toolbox import Done, Toolbox
from app.chat.store import ChatStore
from app.tui.app import ChatApp
from backends.events import ToolCall
from tests.support.scripted_engine import ScriptedEngine

EVIL = r"(a+)+$"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "a.txt").write_text("aaa!\nneedle here\n")
    (tmp_path / "b.txt").write_text("a" * 5000 + "!\n")
    return tmp_path


def timed_search(toolbox: Toolbox, pattern: str, limit_s: float) -> tuple[str, float]:
    """The search's result and its wall time; fails (instead of hanging) past `limit_s`."""
    box: list[str] = []
    started = time.monotonic()
    step_thread = threading.Thread(target=lambda: box.append(_result(toolbox, pattern)), daemon=True)
    step_thread.start()
    step_thread.join(limit_s)
    assert box, f"search was still running after {limit_s} s"
    return box[0], time.monotonic() - started


def _result(toolbox: Toolbox, pattern: str) -> str:
    step = toolbox.prepare("search", {"pattern": pattern})
    assert isinstance(step, Done)
    return step.result


def test_a_catastrophic_pattern_stops_within_the_budget(root, monkeypatch):
    monkeypatch.setattr(files, "SEARCH_BUDGET_S", 0.5)
    result, took = timed_search(Toolbox(root), EVIL, limit_s=10)
    assert took < 0.5 + 1.5, took  # the regex module looks at its clock every so often
    assert result.startswith("error: the search ran out of its 0.5 s budget at b.txt:1")
    assert "nested repeats" in result


def test_matches_found_before_the_budget_ran_out_are_kept(root):
    result = files.search(root, r"needle|(a+)+$", budget_s=0.5)
    lines = result.splitlines()
    assert lines[0].startswith("error: the search ran out") and "a.txt:2: needle here" in lines


def test_an_ordinary_search_is_unchanged(root):
    assert files.search(root, r"need(le)", budget_s=0.5) == "a.txt:2: needle here"
    assert files.search(root, r"^a{3}!$", budget_s=0.5) == "a.txt:1: aaa!"


def test_an_invalid_pattern_is_still_a_clear_refusal(root):
    result = _result(Toolbox(root), "(unclosed")
    assert result.startswith("error: the pattern '(unclosed' is not a valid Python regular expression")


async def test_the_chat_gets_the_budget_message_and_goes_on(root, tmp_path_factory, monkeypatch):
    """In the chat: the model's catastrophic search comes back as an error it can act on,
    and its next turn follows. (Esc and a responsive screen while a tool runs come with
    moving tools off the event loop: the long-sessions work.)"""
    monkeypatch.setattr(files, "SEARCH_BUDGET_S", 0.5)
    engine = ScriptedEngine(turns=[[ToolCall("c1", "search", json.dumps({"pattern": EVIL}))], ["Simpler then."]])
    store = ChatStore(tmp_path_factory.mktemp("chats") / "chats.db")
    app = ChatApp(engine, store, model="test", project=open_project(root))
    try:
        async with app.run_test() as pilot:
            app.query_one("#prompt").load_text("find it")
            await pilot.press("enter")
            # The search runs in a child process (app/agent/apart.py, Esc can kill it), with
            # the budget that module has there: 5 s, not the 0.5 s set above.
            deadline = time.monotonic() + 30
            while len(engine.calls) < 2 or app.streaming:
                assert time.monotonic() < deadline, "the chat did not go on after the search"
                await pilot.pause(0.02)
        [result] = [m for m in engine.calls[-1]["messages"] if m["role"] == "tool"]
        assert re.match(r"error: the search ran out of its [\d.]+ s budget", result["content"]), result["content"]
    finally:
        store.close()
