"""`search` has a time budget (issue 22, item 3): a pattern that backtracks without end on a long
line stops within it, and the model is told why and what to do."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from app.agent import files
from app.agent.toolbox import Done, Toolbox

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
