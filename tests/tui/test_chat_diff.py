"""/diff in the chat, driven by the pilot: what the chat's accepted edits did, as one unified diff."""

from __future__ import annotations

import json
import subprocess

from app.agent.project import open_project
from app.tui.app import ChatApp
from app.tui.screens.consent import ConsentScreen
from app.tui.widgets.message_view import MessageView
from backends.events import ToolCall
from tests.support.pilot import answer, send, until
from tests.support.scripted_engine import ScriptedEngine


def notes(app, words: str) -> list[str]:
    return [view.answer for view in app.query(MessageView) if view.role == "assistant" and words in view.answer]


async def test_diff_says_none_then_shows_the_accepted_edit(tmp_path, store):
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    edit = ToolCall("c1", "edit_file", json.dumps({"path": "src/calc.py", "old_text": "a - b", "new_text": "a + b"}))
    app = ChatApp(ScriptedEngine(turns=[[edit], ["Fixed."]]), store, model="test", project=open_project(repo))
    async with app.run_test() as pilot:
        await send(pilot, "/diff")
        await until(pilot, lambda: notes(app, "no changes in this chat yet"), what="the empty /diff")
        await send(pilot, "fix it")
        await until(pilot, lambda: isinstance(app.screen, ConsentScreen), what="the consent question")
        await answer(pilot, "y")
        await until(pilot, lambda: not app.streaming, what="the end of the turn")
        await send(pilot, "/diff")
        await until(pilot, lambda: notes(app, "```diff"), what="the /diff note")
        shown = notes(app, "```diff")[-1]
        await send(pilot, "/undo")
        await until(pilot, lambda: (repo / "src/calc.py").read_text().endswith("a - b\n"), what="the undo")
        await send(pilot, "/diff")
        await until(pilot, lambda: len(notes(app, "no changes in this chat yet")) == 2, what="/diff after /undo")
    assert shown.startswith("**What this chat changed** (1 file)")
    assert "--- a/src/calc.py\n+++ b/src/calc.py\n" in shown
    assert "-    return a - b\n+    return a + b\n```" in shown
