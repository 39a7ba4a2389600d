"""The todo list the model keeps (issue 49, item 4): written and updated with todo_write,
shown above the input, saved with the chat so --continue brings it back, kept through a
compaction, reported by a headless stream-json run; the model's words are text."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess

import pytest

from app.agent import todos
from app.agent.headless import Decider
from app.agent.headless_output import HeadlessOutput
from app.agent.project import open_project, system_prompt
from app.agent.session import Session
from app.agent.toolbox import Toolbox
from app.tui.app import ChatApp
from app.tui.widgets.todo_list import TodoList
from tests.support.pilot import send, until
from tests.support.scripted_engine import ScriptedEngine
from tests.support.scripted_engine import tool_call as call

PLAN = [
    {"content": "read calc.py", "status": "completed"},
    {"content": "fix add [@click=app.quit]", "status": "in_progress"},
    {"content": "run the tests", "status": "pending"},
]


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def test_the_list_is_parsed_whole_and_refused_with_a_reason():
    parsed = todos.parse(PLAN)
    assert [t.status for t in parsed] == ["completed", "in_progress", "pending"]
    assert todos.render(parsed).splitlines()[1] == "▶ fix add [@click=app.quit]"
    with pytest.raises(todos.TodoProblem, match="only one todo can be in_progress"):
        todos.parse([{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}])
    with pytest.raises(todos.TodoProblem, match="status 'done'"):
        todos.parse([{"content": "a", "status": "done"}])
    with pytest.raises(todos.TodoProblem):
        todos.parse("read, fix, test")
    assert todos.from_json(todos.to_json(parsed)) == parsed and todos.from_json("{broken") == []


def test_a_refused_list_tells_the_model_and_keeps_the_old_one(repo):
    box = Toolbox(repo)
    assert "the todo list is now" in box.prepare("todo_write", {"todos": PLAN}).result  # type: ignore[union-attr]
    refused = box.prepare("todo_write", {"todos": [{"content": "x", "status": "maybe"}]})
    assert refused.result.startswith("error:") and len(box.todos) == 3  # type: ignore[union-attr]


async def test_the_chat_shows_saves_and_brings_back_the_list(repo, store):
    engine = ScriptedEngine(turns=[[call("todo_write", todos=PLAN)], ["On it."]])
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, "fix add and test it")
        await until(pilot, lambda: not app.streaming and len(engine.calls) == 2, what="the reply")
        shown = app.query_one(TodoList)
        assert shown.display and "▶ fix add [@click=app.quit]" in str(shown.render())  # text, not markup
        await send(pilot, "/compact")
        await until(pilot, lambda: not app.streaming, what="the compaction")
        assert app.query_one(TodoList).display and len(app.toolbox.todos) == 3
        chat_id = app.chat.id
    again = ChatApp(ScriptedEngine(), store, model="test", project=open_project(repo), continue_last=True)
    async with again.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: again.chat is not None and again.chat.id == chat_id, what="the chat")
        await until(pilot, lambda: again.query_one(TodoList).display, what="the list back")
        assert [t.content for t in again.toolbox.todos][0] == "read calc.py"


def test_a_headless_stream_reports_the_list(repo):
    decider = Decider()
    out = io.StringIO()
    output = HeadlessOutput("stream-json", out, io.StringIO(), decider)
    toolbox = Toolbox(repo)
    output.todos = lambda: toolbox.todos
    engine = ScriptedEngine(turns=[[call("todo_write", todos=PLAN)], ["Planned."]])
    session = Session(engine, toolbox, decider.ask, output.emit, system=system_prompt(open_project(repo), True))
    asyncio.run(session.send("plan it"))
    output.finish(1, "scripted")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    (listed,) = [line for line in lines if line["type"] == "todos"]
    assert [t["status"] for t in listed["todos"]] == ["completed", "in_progress", "pending"]
