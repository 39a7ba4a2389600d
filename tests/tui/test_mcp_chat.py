"""MCP tools in the chat (the TUI driven by the pilot): the model is offered `server__tool`,
every call waits for consent, "no" reaches the model as a refusal, "yes" brings the
server's answer back, the tool list changes only between turns, and `/mcp` lists the
servers with their tools and token costs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from app.agent.mcp.config import ServerSpec
from app.agent.mcp.manager import McpManager
from app.agent.project import open_project
from app.agent.session import DECLINED
from app.tui.app import ChatApp
from app.tui.screens.consent import ConsentScreen
from app.tui.widgets.message_view import MessageView
from app.tui.widgets.tool_line import ToolLine
from backends.events import ToolCall
from tests.support.mcp_servers import write_server
from tests.support.pilot import answer, send, until
from tests.support.scripted_engine import ScriptedEngine
from tests.support.scripted_engine import tool_call as call


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def manager_for(repo, tmp_path, *behaviours: str) -> McpManager:
    script = write_server(tmp_path)
    specs = [
        ServerSpec(f"s{i}", str(repo / ".mcp.json"), "stdio", command=sys.executable,
                   args=(str(script), behaviour, str(tmp_path / f"pid{i}")))
        for i, behaviour in enumerate(behaviours)
    ]  # fmt: skip
    return McpManager(specs, repo, start_timeout_s=10)


def tool_results(engine: ScriptedEngine) -> list[str]:
    return [m["content"] for m in engine.calls[-1]["messages"] if m["role"] == "tool"]


async def test_an_mcp_call_waits_for_consent_and_no_reaches_the_model(repo, store, tmp_path):
    engine = ScriptedEngine(
        turns=[
            [call("s0__echo", text="hello")],
            ["Declined, fine."],
            [call("s0__echo", text="again")],
            ["Got it."],
        ]
    )
    manager = manager_for(repo, tmp_path, "ok")
    app = ChatApp(engine, store, model="test", project=open_project(repo), mcp=manager)
    try:
        async with app.run_test() as pilot:
            await until(pilot, lambda: manager.servers["s0"].status == "ready", what="the server")
            await send(pilot, "echo hello")
            await until(pilot, lambda: isinstance(app.screen, ConsentScreen), what="the consent dialog")
            screen = app.screen
            assert screen.question == "Call echo on the MCP server s0?"
            assert json.loads(screen.body) == {"text": "hello"}
            assert screen.always == "always call s0's echo in this chat"
            names = [t["function"]["name"] for t in engine.calls[0]["tools"]]
            assert "s0__echo" in names and "read_file" in names
            await answer(pilot, "n")
            await until(pilot, lambda: not app.streaming and len(engine.calls) == 2, what="the refusal")
            assert tool_results(engine) == [DECLINED]
            assert [line.decision for line in app.query(ToolLine)] == ["no"]

            await send(pilot, "now say yes")
            await until(pilot, lambda: isinstance(app.screen, ConsentScreen), what="the second dialog")
            await answer(pilot, "y")
            await until(pilot, lambda: not app.streaming and len(engine.calls) == 4, what="the answer")
            assert tool_results(engine)[-1] == "echo: again"
            assert [line.decision for line in app.query(ToolLine)] == ["no", "yes"]
    finally:
        manager.close()


async def test_always_covers_that_server_tool_only(repo, store, tmp_path):
    engine = ScriptedEngine(
        turns=[
            [call("s0__echo", text="1")],
            [call("s0__echo", text="2")],
            [call("s0__picture")],
            ["done"],
        ]
    )
    manager = manager_for(repo, tmp_path, "ok")
    app = ChatApp(engine, store, model="test", project=open_project(repo), mcp=manager)
    try:
        async with app.run_test() as pilot:
            await until(pilot, lambda: manager.servers["s0"].status == "ready", what="the server")
            await send(pilot, "go")
            await until(pilot, lambda: isinstance(app.screen, ConsentScreen), what="the dialog")
            await answer(pilot, "a")
            # The second echo runs without asking; the picture asks.
            await until(pilot, lambda: isinstance(app.screen, ConsentScreen) and len(engine.calls) == 3, what="ask")
            assert app.screen.question == "Call picture on the MCP server s0?"
            await answer(pilot, "y")
            await until(pilot, lambda: not app.streaming and len(engine.calls) == 4, what="the end")
            assert tool_results(engine) == [
                "echo: 1",
                "echo: 2",
                "[image image/png, 600 bytes: not shown to the model]",
            ]
            assert [line.decision for line in app.query(ToolLine)] == ["always", "always (this chat)", "yes"]
    finally:
        manager.close()


async def test_the_tool_list_changes_only_between_turns_and_is_announced(repo, store, tmp_path):
    # s1 dies on its first call: within that turn the list stays as it was (a second call to s1
    # is told at once that it is gone, no dialog); the next turn has s1's tools gone, with a notice.
    engine = ScriptedEngine(
        turns=[
            [call("s1__echo", text="x")],
            [ToolCall("c_again", "s1__echo", json.dumps({"text": "again"})), call("s0__echo", text="y")],
            ["ok"],
            ["next"],
        ]
    )
    manager = manager_for(repo, tmp_path, "ok", "die")
    app = ChatApp(engine, store, model="test", project=open_project(repo), mcp=manager)
    notices: list[str] = []
    app.notify = lambda message, **kw: notices.append(str(message))  # type: ignore[method-assign]
    try:
        async with app.run_test() as pilot:
            await until(pilot, lambda: all(s.status == "ready" for s in manager.servers.values()), what="servers")
            await send(pilot, "go")
            await until(pilot, lambda: isinstance(app.screen, ConsentScreen), what="the first dialog")
            await answer(pilot, "y")
            await until(pilot, lambda: manager.servers["s1"].status == "stopped", what="s1 to die")
            await until(pilot, lambda: isinstance(app.screen, ConsentScreen), what="the second dialog")
            await answer(pilot, "y")
            await until(pilot, lambda: not app.streaming and len(engine.calls) == 3, what="the turn's end")
            first_turn = [[t["function"]["name"] for t in c["tools"]] for c in engine.calls]
            assert first_turn[0] == first_turn[1] == first_turn[2]  # fixed within the turn
            assert "s1__echo" in first_turn[0]
            assert tool_results(engine) == [
                "error: the MCP server s1 stopped during the call; its tools are gone",
                "error: the MCP server s1 is not running now; its tools are gone",
                "echo: y",
            ]
            assert [line.decision for line in app.query(ToolLine)] == ["yes", "auto", "yes"]
            assert any("MCP s1 (.mcp.json): stopped" in n for n in notices)
            await send(pilot, "again")
            await until(pilot, lambda: not app.streaming and len(engine.calls) == 4, what="the next turn")
            names = [t["function"]["name"] for t in engine.calls[3]["tools"]]
            assert "s1__echo" not in names and "s0__echo" in names
            assert any(n.startswith("MCP tools for this turn: 2 removed (s1)") for n in notices)
    finally:
        manager.close()


async def test_slash_mcp_lists_servers_tools_and_costs_and_switches_them(repo, store, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    engine = ScriptedEngine(turns=[["hi"]])
    manager = manager_for(repo, tmp_path, "ok", "exit")
    app = ChatApp(engine, store, model="test", project=open_project(repo), mcp=manager)
    try:
        async with app.run_test() as pilot:
            await until(pilot, lambda: all(s.status != "starting" for s in manager.servers.values()), what="servers")
            await send(pilot, "/mcp")
            await until(pilot, lambda: any("MCP servers" in v.answer for v in app.query(MessageView)), what="list")
            text = [v.answer for v in app.query(MessageView) if "MCP servers" in v.answer][-1]
            assert "**s0** · ready · .mcp.json" in text and "2 tools" in text and "tokens" in text
            assert "`s0__echo`: Say the text back." in text
            assert "**s1** · failed" in text and "exited at start" in text
            await send(pilot, "/mcp off s0")
            await until(pilot, lambda: manager.servers["s0"].status == "off", what="s0 off")
            await send(pilot, "hello")
            await until(pilot, lambda: not app.streaming and len(engine.calls) == 1, what="a reply")
            assert "s0__echo" not in [t["function"]["name"] for t in engine.calls[0]["tools"]]
    finally:
        manager.close()


def test_an_mcp_call_line_shows_its_first_arguments():
    from app.tui.widgets.tool_line import call_title

    assert call_title("time__get_current_time", json.dumps({"timezone": "Asia/Kathmandu"})) == (
        "time__get_current_time timezone=Asia/Kathmandu"
    )
    assert call_title("db__query", json.dumps({"limit": 5, "sql": "select 1"})) == "db__query limit=5 sql=select 1"
