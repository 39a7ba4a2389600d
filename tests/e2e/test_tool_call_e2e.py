"""A tool call end to end on both local engines: a generated model (tests/support/script_model.py)
writes one Qwen3-Coder XML call, the engine parses it (llama-server's own parser, or
ours as the in-process engine streams), the chat runs the read at once, the file's
text goes back to the model, and the model's next turn answers from it. The drafter
is the model itself, so speculation runs through the tool-call turn too."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from app.agent.project import open_project
from app.chat.store import ChatStore
from app.tui.app import ChatApp
from app.tui.widgets.tool_line import ToolLine
from backends.events import Delta, End, ToolCall
from tests.support.local_engines import KINDS, Recorded, open_local
from tests.support.pilot import until
from tests.support.script_model import ANSWER_TEXT, MARKER, write_script_model

README = f"# Demo\n\nThe word is {MARKER}.\n"


@pytest.fixture(scope="module")
def script_model(tmp_path_factory) -> Path:
    return write_script_model(tmp_path_factory.mktemp("script") / "script.gguf")


@pytest.fixture(params=KINDS)
def engine(request, script_model, tmp_path):
    opened = open_local(request.param, script_model, 4096, tmp_path, self_draft=True)
    yield Recorded(opened)
    opened.close()


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "README.md").write_text(README)
    return root


async def test_a_tool_call_goes_through_the_chat_and_the_model_answers_from_the_result(engine, repo, tmp_path):
    store = ChatStore(tmp_path / "chats.db")
    app = ChatApp(engine, store, model="script", project=open_project(repo))
    try:
        async with app.run_test() as pilot:
            app.query_one("#prompt").load_text("What does the README say?")
            await pilot.press("enter")
            await until(pilot, lambda: len(engine.replies) == 2 and not app.streaming, 180, "the second turn")

            first, second = engine.replies
            calls = [e for e in first if isinstance(e, ToolCall)]
            assert [(c.name, json.loads(c.arguments)) for c in calls] == [("read_file", {"path": "README.md"})]
            end = first[-1]
            assert isinstance(end, End) and end.reason == "tool_calls"
            assert end.stats.drafted > 0 and end.stats.accepted > 0  # speculation ran through the call
            assert not "".join(e.text for e in first if isinstance(e, Delta)).strip()  # no tags leak as text

            results = [m for m in engine.sent[1] if m["role"] == "tool"]
            assert len(results) == 1 and MARKER in results[0]["content"] and results[0]["tool_call_id"] == calls[0].id
            assert "".join(e.text for e in second if isinstance(e, Delta)) == ANSWER_TEXT
            assert isinstance(second[-1], End) and second[-1].reason == "stop"

            (line,) = app.query(ToolLine)
            assert line.decision == "auto"  # a read runs without asking
            saved = store.messages(app.chat.id)
            assert [m.role for m in saved] == ["user", "assistant", "tool", "assistant"]
            assert saved[1].tool_calls[0]["function"]["name"] == "read_file"
            assert saved[-1].content == ANSWER_TEXT
    finally:
        store.close()
