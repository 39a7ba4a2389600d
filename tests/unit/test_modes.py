"""Permission modes (issue 39) without Textual: which tools each mode offers the model, which
calls ask, and that plan mode changes nothing whatever the model calls."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from app.agent import modes
from app.agent.project import open_project, system_prompt
from app.agent.session import Session
from app.agent.toolbox import BUILTIN, Done, ProposedCall, Toolbox, ToolSpec
from tests.support.scripted_engine import ScriptedEngine
from tests.support.scripted_engine import tool_call as call
from tests.support.session_recorder import Recorder

READING = ["read_file", "list_files", "search", "todo_write"]  # what needs no consent: plan offers it
ALL = [spec.name for spec in BUILTIN]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return root


def mcp_tool(ran: list[str]) -> ToolSpec:
    """An MCP server's tool as app/agent/mcp makes one: a call the user sees before it is made."""

    def handler(box: Toolbox, args: dict) -> ProposedCall:
        ran.append("prepared")
        return ProposedCall("Call srv post?", "{}", lambda stop: ran.append("sent") or "sent", "always srv post")

    return ToolSpec("srv__post", "Post.", {"type": "object", "properties": {}}, handler, True, "mcp:srv")


def session_in(repo: Path, mode: modes.PermissionMode, recorder: Recorder, engine=None) -> Session:
    project = open_project(repo)
    return Session(
        engine or ScriptedEngine(),
        Toolbox(repo),
        recorder.ask,
        recorder.emit,
        system=system_prompt(project, True),
        mode=mode,
    )


def names(tools: list[dict] | None) -> list[str]:
    return [t["function"]["name"] for t in tools or []]


def test_the_modes_cycle_and_parse_from_what_people_type():
    assert modes.MODES == ("ask", "accept-edits", "plan")
    assert [modes.after(m) for m in modes.MODES] == ["accept-edits", "plan", "ask"]
    assert modes.parse("accept edits") == modes.parse("Accept_Edits") == modes.parse("edits") == "accept-edits"
    assert modes.parse(" PLAN ") == "plan" and modes.parse("auto") is None and modes.parse("") is None


@pytest.mark.parametrize(
    ("mode", "offered"),
    [("ask", ALL + ["srv__post"]), ("accept-edits", ALL + ["srv__post"]), ("plan", READING)],
)
def test_each_mode_offers_its_tools(repo, mode, offered):
    session = session_in(repo, mode, Recorder())
    assert session.toolbox is not None
    session.toolbox.add(mcp_tool([]))
    assert names(session.tools()) == offered
    # A tool from elsewhere that needs no consent is a reading tool: plan offers it too.
    session.toolbox.add(ToolSpec("srv__get", "Get.", {"type": "object", "properties": {}}, lambda b, a: Done("x")))
    assert names(session.tools())[-1] == "srv__get"


def test_the_engine_receives_the_tools_of_the_mode_in_force_and_plan_says_so_to_the_model(repo):
    engine = ScriptedEngine(turns=[["A plan."]])
    recorder = Recorder()
    session = session_in(repo, "plan", recorder, engine)
    asyncio.run(session.send("fix calc"))
    assert names(engine.calls[0]["tools"]) == READING
    assert engine.calls[0]["messages"][-1]["content"] == f"fix calc\n\n{modes.PLAN_NOTE}"
    session.mode = "ask"
    asyncio.run(session.send("go ahead"))
    assert names(engine.calls[1]["tools"]) == ALL
    assert engine.calls[1]["messages"][-1]["content"] == "go ahead"


def test_ask_asks_for_edits_writes_and_commands(repo):
    recorder = Recorder()
    session = session_in(repo, "ask", recorder)

    async def go():
        await session._run_tool(call("edit_file", path="src/calc.py", old_text="a - b", new_text="a + b"))
        await session._run_tool(call("write_file", path="src/new.py", content="x = 1\n"))
        await session._run_tool(call("run_command", command="echo hi"))

    asyncio.run(go())
    assert [q.tool for q in recorder.questions] == ["edit_file", "write_file", "run_command"]
    assert [e.decision for e in recorder.finished()] == ["yes", "yes", "yes"]


def test_accept_edits_applies_edits_and_writes_without_asking_and_shows_their_diffs(repo):
    recorder = Recorder()
    recorder.answer = "no"
    ran: list[str] = []
    session = session_in(repo, "accept-edits", recorder)
    assert session.toolbox is not None
    session.toolbox.add(mcp_tool(ran))

    async def go():
        await session._run_tool(call("edit_file", path="src/calc.py", old_text="a - b", new_text="a + b"))
        await session._run_tool(call("write_file", path="src/new.py", content="x = 1\n"))
        await session._run_tool(call("run_command", command="touch ran"))
        await session._run_tool(call("srv__post"))

    asyncio.run(go())
    assert (repo / "src/calc.py").read_text().endswith("a + b\n") and (repo / "src/new.py").read_text() == "x = 1\n"
    # The command and the MCP call still asked (and were declined).
    assert [q.tool for q in recorder.questions] == ["run_command", "srv__post"]
    assert not (repo / "ran").exists() and "sent" not in ran
    finished = recorder.finished()
    assert [e.decision for e in finished] == ["accept edits", "accept edits", "no", "no"]
    assert finished[0].result.startswith("applied: edit") and "+    return a + b" in finished[0].shown
    assert "+x = 1" in finished[1].shown and finished[2].shown == ""
    # /undo still reverts a change made without a question.
    assert session.toolbox.changes.undo().startswith("undone")


def test_accept_edits_never_writes_outside_the_project(repo, tmp_path):
    recorder = Recorder()
    session = session_in(repo, "accept-edits", recorder)
    outside = tmp_path / "outside.txt"

    async def go():
        await session._run_tool(call("write_file", path=str(outside), content="x"))
        await session._run_tool(call("write_file", path="../outside.txt", content="x"))
        await session._run_tool(call("write_file", path=".git/config", content="x"))

    asyncio.run(go())
    assert not outside.exists() and not recorder.questions
    assert all(e.result.startswith("error:") and e.shown == "" for e in recorder.finished())


def test_plan_refuses_every_call_that_would_change_something_and_nothing_changes(repo):
    recorder = Recorder()
    recorder.answer = "always"  # would let anything through, were it asked
    ran: list[str] = []
    session = session_in(repo, "plan", recorder)
    assert session.toolbox is not None
    session.toolbox.add(mcp_tool(ran))
    before = (repo / "src/calc.py").read_text()

    async def go():
        await session._run_tool(call("edit_file", path="src/calc.py", old_text="a - b", new_text="a + b"))
        await session._run_tool(call("write_file", path="src/new.py", content="x = 1\n"))
        await session._run_tool(call("run_command", command="touch ran"))
        await session._run_tool(call("srv__post"))
        await session._run_tool(call("read_file", path="src/calc.py"))

    asyncio.run(go())
    assert (repo / "src/calc.py").read_text() == before
    assert not (repo / "src/new.py").exists() and not (repo / "ran").exists() and ran == []
    assert recorder.questions == []
    finished = recorder.finished()
    assert [e.result for e in finished[:4]] == [modes.PLAN_REFUSAL] * 4
    assert [e.decision for e in finished] == ["refused (plan mode)"] * 4 + ["auto"]
    assert "return a - b" in finished[4].result  # reading still works
    # The refusal is what the model gets back.
    tool_results = [m["content"] for m in session.history if m["role"] == "tool"]
    assert tool_results[:4] == [modes.PLAN_REFUSAL] * 4 and "plan mode" in modes.PLAN_REFUSAL


def test_always_answers_keep_working_in_every_mode(repo):
    recorder = Recorder()
    recorder.answer = "always"
    session = session_in(repo, "ask", recorder)

    async def go():
        await session._run_tool(call("run_command", command="echo same"))
        session.mode = "accept-edits"
        await session._run_tool(call("run_command", command="echo same"))
        await session._run_tool(call("run_command", command="echo other"))

    asyncio.run(go())
    assert [q.body.split("\n\n")[0] for q in recorder.questions] == ["echo same", "echo other"]
    assert [e.decision for e in recorder.finished()] == ["always", "always (this chat)", "always"]


def test_the_chats_store_keeps_a_chats_mode(tmp_path):
    from app.chat.store import SCHEMA, ChatStore

    store = ChatStore(tmp_path / "chats.db")
    try:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == len(SCHEMA) >= 7
        chat = store.new_chat("c")
        assert store.chat(chat.id).mode is None  # never set: the chat takes the mode in force
        store.set_mode(chat.id, "accept-edits")
        assert store.chat(chat.id).mode == "accept-edits" and store.chats()[0].mode == "accept-edits"
        # A word this dspine does not know (a newer one wrote it) is no mode.
        with store.db:
            store.db.execute("UPDATE chats SET mode = 'yolo' WHERE id = ?", (chat.id,))
        assert store.chat(chat.id).mode is None
    finally:
        store.close()
