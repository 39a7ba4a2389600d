"""The coding chat works on the project: tool calls from a scripted engine, driven by the pilot."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from app.agent.project import open_project
from app.chat.store import ChatStore
from app.tui.app import ChatApp
from app.tui.screens.consent import ConsentScreen
from app.tui.widgets.tool_line import ToolLine
from tests.support.pilot import answer, send, until
from tests.support.scripted_engine import ScriptedEngine
from tests.support.scripted_engine import tool_call as call


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "AGENTS.md").write_text("Tests: pytest -q\n")
    return root


def tool_messages(engine: ScriptedEngine) -> list[dict]:
    return [m for m in engine.calls[-1]["messages"] if m["role"] == "tool"]


async def run_chat(pilot, app, text: str) -> None:
    await send(pilot, text)
    await until(pilot, lambda: isinstance(app.screen, ConsentScreen) or not app.streaming, what="consent or end")


async def test_reads_and_searches_run_at_once_and_the_model_gets_the_results(repo, store):
    engine = ScriptedEngine(
        turns=[["Looking.", call("read_file", path="src/calc.py"), call("search", pattern="return")], ["A bug."]]
    )
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test() as pilot:
        await run_chat(pilot, app, "what is wrong?")
        await until(pilot, lambda: not app.streaming and len(engine.calls) == 2, what="second turn")
        first = engine.calls[0]
        assert first["tools"] and first["messages"][0]["role"] == "system"
        assert "Tests: pytest -q" in first["messages"][0]["content"]  # AGENTS.md
        results = tool_messages(engine)
        assert "return a - b" in results[0]["content"] and results[1]["content"] == "src/calc.py:2:     return a - b"
        assert [line.decision for line in app.query(ToolLine)] == ["auto", "auto"]
        assert str(repo.resolve()) in app.sub_title
        # Saved with the chat, shown folded when it is opened again.
        saved = store.messages(app.chat.id)
        assert [m.role for m in saved] == ["user", "assistant", "tool", "tool", "assistant"]
        assert saved[1].tool_calls[0]["function"]["name"] == "read_file"
        exported = [json.loads(line) for line in store.export_prompts([app.chat.id]).splitlines()]
        assert exported[-1]["category"] == "history-tools" and exported[-1]["tools"]
        assert exported[-1]["messages"][-1]["role"] == "tool"


async def test_edit_accepted_then_undone(repo, store):
    engine = ScriptedEngine(
        turns=[[call("edit_file", path="src/calc.py", old_text="a - b", new_text="a + b")], ["Fixed."]]
    )
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test() as pilot:
        await run_chat(pilot, app, "fix it")
        assert isinstance(app.screen, ConsentScreen)
        assert "+    return a + b" in app.screen.body  # the diff waits for the user
        assert (repo / "src/calc.py").read_text().endswith("a - b\n")
        await answer(pilot, "y")
        await until(pilot, lambda: not app.streaming, what="the end")
        assert (repo / "src/calc.py").read_text().endswith("a + b\n")
        assert tool_messages(engine)[0]["content"].startswith("applied")
        await send(pilot, "/undo")
        await until(pilot, lambda: (repo / "src/calc.py").read_text().endswith("a - b\n"), what="undo")


async def test_edit_rejected_leaves_the_file(repo, store):
    engine = ScriptedEngine(turns=[[call("write_file", path="src/calc.py", content="gone\n")], ["OK."]])
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test() as pilot:
        await run_chat(pilot, app, "rewrite it")
        await answer(pilot, "n")
        await until(pilot, lambda: not app.streaming, what="the end")
        assert (repo / "src/calc.py").read_text().startswith("def add")
        assert "declined" in tool_messages(engine)[0]["content"]
        assert store.messages(app.chat.id)[2].decision == "no"


async def test_command_with_consent_streams_and_always_covers_exactly_that_command(repo, store):
    engine = ScriptedEngine(
        turns=[
            [call("run_command", command="echo hello")],
            [call("run_command", command="echo  'hello'")],  # the same words: does not ask
            [call("run_command", command="echo again")],  # another word: asks
            ["Done."],
        ]
    )
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test() as pilot:
        await run_chat(pilot, app, "say hello")
        assert isinstance(app.screen, ConsentScreen) and app.screen.body.startswith("echo hello\n\nRuns in a sandbox")
        assert app.screen.always == "always run exactly this command in this chat (any other asks)"
        await answer(pilot, "a")
        await until(
            pilot,
            lambda: isinstance(app.screen, ConsentScreen) and app.screen.body.startswith("echo again\n\n"),
            what="the third command's question",
        )
        await answer(pilot, "y")
        await until(pilot, lambda: not app.streaming, what="the end")
        results = tool_messages(engine)
        assert [r["content"] for r in results] == ["exit code 0\nhello\n"] * 2 + ["exit code 0\nagain\n"]


async def test_escape_stops_a_long_command(repo, store):
    engine = ScriptedEngine(turns=[[call("run_command", command="echo started; sleep 30")], ["Stopped."]])
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test() as pilot:
        await run_chat(pilot, app, "run it")
        await answer(pilot, "y")
        line = app.query_one(ToolLine)
        await until(pilot, lambda: "started" in line.result, what="streamed output")
        started = time.monotonic()
        await pilot.press("escape")
        await until(pilot, lambda: not app.streaming, what="the end")
        assert time.monotonic() - started < 5
        assert tool_messages(engine)[0]["content"].startswith("the user stopped the command")


async def test_command_timeout(repo, store):
    engine = ScriptedEngine(turns=[[call("run_command", command="sleep 30", timeout_s=1)], ["Too slow."]])
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test() as pilot:
        await run_chat(pilot, app, "run it")
        await answer(pilot, "y")
        await until(pilot, lambda: not app.streaming, what="the end")
        assert "timed out" in tool_messages(engine)[0]["content"]


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "../secret.txt"}),
        ("read_file", {"path": "/etc/passwd"}),
        ("read_file", {"path": "link.txt"}),
        ("write_file", {"path": ".git/config", "content": "x"}),
    ],
)
async def test_escape_attempts_are_refused_without_asking(repo, store, tool, args):
    (repo.parent / "secret.txt").write_text("key")
    (repo / "link.txt").symlink_to(repo.parent / "secret.txt")
    engine = ScriptedEngine(turns=[[call(tool, **args)], ["OK."]])
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test() as pilot:
        await run_chat(pilot, app, "try it")
        await until(pilot, lambda: not app.streaming, what="the end")
        result = tool_messages(engine)[0]["content"]
        assert result.startswith("error:") and "key" not in result


async def test_a_looping_model_is_stopped_at_the_chain_limit(repo, store):
    engine = ScriptedEngine(turns=[[call("list_files")]])  # calls a tool every turn, forever
    app = ChatApp(engine, store, model="test", project=open_project(repo), chain_limit=3)
    async with app.run_test() as pilot:
        await run_chat(pilot, app, "loop")
        await until(pilot, lambda: isinstance(app.screen, ConsentScreen), what="go on?")
        assert "chained 3 rounds" in app.screen.question and len(engine.calls) == 3
        await answer(pilot, "n")
        await until(pilot, lambda: not app.streaming, what="stop")
        assert len(engine.calls) == 3


async def test_tools_off_is_a_plain_chat(repo, store):
    engine = ScriptedEngine(turns=[["Plain."]])
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test() as pilot:
        await send(pilot, "/tools off")
        await run_chat(pilot, app, "hi")
        await until(pilot, lambda: not app.streaming and engine.calls, what="the end")
        assert engine.calls[-1]["tools"] is None and "tools off" in app.sub_title
        assert engine.calls[-1]["messages"] == [{"role": "user", "content": "hi"}]


def test_a_version_1_database_is_upgraded_and_keeps_its_chats(tmp_path):
    import sqlite3

    from app.chat.store import SCHEMA

    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(SCHEMA[0])
    db.execute("INSERT INTO chats (id, title, model, created) VALUES (1, 'old', 'm', 0)")
    db.execute("INSERT INTO messages (chat_id, role, content, complete, created) VALUES (1, 'user', 'hello', 1, 0)")
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    store = ChatStore(path)
    try:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == len(SCHEMA)
        assert store.conversation(1) == [{"role": "user", "content": "hello"}]
        call = {"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
        store.set_tool_calls(store.add_message(1, "assistant", ""), [call])
        store.add_tool_result(1, call, "a.py", "auto")
        assert store.conversation(1)[1:] == [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        ]
        assert "list_files({})" in store.export_markdown(1)
    finally:
        store.close()
