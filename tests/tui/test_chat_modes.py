"""Permission modes in the chat (issue 39): what each mode offers the model and what asks,
Shift+Tab cycling them in the readout, plan mode's refusals and its /plan accept, the mode
kept with the chat, and `dspine chat --mode`."""

from __future__ import annotations

import subprocess

import pytest

from app.agent import modes
from app.agent.project import open_project
from app.tui.app import ChatApp
from app.tui.screens.consent import ConsentScreen
from app.tui.widgets.tool_line import ToolLine
from backends.events import ToolCall
from tests.support.pilot import answer, send, until
from tests.support.scripted_engine import ScriptedEngine
from tests.support.scripted_engine import tool_call as call

READING = ["read_file", "list_files", "search", "todo_write"]  # what needs no consent: plan offers it
ALL = ["read_file", "list_files", "search", "edit_file", "write_file", "run_command", "todo_write"]


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return root


def offered(engine: ScriptedEngine, request: int) -> list[str]:
    return [t["function"]["name"] for t in engine.calls[request]["tools"] or []]


def shown_mode(app: ChatApp) -> str:
    return str(app.query_one("#mode").render())


def edit() -> ToolCall:
    return call("edit_file", path="src/calc.py", old_text="a - b", new_text="a + b")


async def settle(pilot, app) -> None:
    """The turn waits on a question or is over."""
    await until(pilot, lambda: isinstance(app.screen, ConsentScreen) or not app.streaming, what="a question or the end")


async def test_ask_offers_every_tool_and_an_edit_asks(repo, store):
    engine = ScriptedEngine(turns=[[edit()], ["Fixed."]])
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test() as pilot:
        assert app.mode == "ask" and shown_mode(app).startswith("ask · ")
        await send(pilot, "fix it")
        await settle(pilot, app)
        assert isinstance(app.screen, ConsentScreen)
        assert (repo / "src/calc.py").read_text().endswith("a - b\n")
        await answer(pilot, "y")
        await until(pilot, lambda: not app.streaming, what="the end")
        assert offered(engine, 0) == ALL


async def test_accept_edits_applies_an_edit_unasked_shows_its_diff_and_a_command_still_asks(repo, store):
    engine = ScriptedEngine(
        turns=[
            [edit(), call("write_file", path="src/new.py", content="x = 1\n")],
            [call("run_command", command="touch ran")],
            ["Done."],
        ]
    )
    app = ChatApp(engine, store, model="test", project=open_project(repo), mode="accept-edits")
    async with app.run_test() as pilot:
        assert "accept edits" in shown_mode(app)
        await send(pilot, "fix it")
        await settle(pilot, app)
        # The edit and the write went through; the command waits for the user.
        assert isinstance(app.screen, ConsentScreen) and app.screen.body.startswith("touch ran\n\n")
        assert (repo / "src/calc.py").read_text().endswith("a + b\n")
        assert (repo / "src/new.py").read_text() == "x = 1\n"
        await answer(pilot, "n")
        await until(pilot, lambda: not app.streaming, what="the end")
        assert not (repo / "ran").exists()
        assert offered(engine, 0) == ALL
        lines = list(app.query(ToolLine))
        assert [line.decision for line in lines] == ["accept edits", "accept edits", "no"]
        assert "+    return a + b" in lines[0].shown and lines[0].result.startswith("applied: edit")
        assert "a + b" in str(lines[0].query_one(".tool-output").render())  # the diff in the chat
        assert [m.decision for m in store.messages(app.chat.id) if m.role == "tool"] == [
            "accept edits",
            "accept edits",
            "no",
        ]


async def test_plan_offers_only_reads_refuses_changes_and_accepting_goes_ahead(repo, store):
    engine = ScriptedEngine(
        turns=[
            [
                edit(),
                call("write_file", path="src/new.py", content="x = 1\n"),
                call("run_command", command="touch ran"),
                call("read_file", path="src/calc.py"),
            ],
            ["Plan: change a - b to a + b."],
            [edit()],
            ["Done."],
        ]
    )
    app = ChatApp(engine, store, model="test", project=open_project(repo), mode="plan")
    async with app.run_test() as pilot:
        assert "plan" in shown_mode(app)
        await send(pilot, "fix it")
        await settle(pilot, app)
        assert not app.streaming and not isinstance(app.screen, ConsentScreen)  # nothing asked
        assert (repo / "src/calc.py").read_text().endswith("a - b\n")
        assert not (repo / "src/new.py").exists() and not (repo / "ran").exists()
        assert offered(engine, 0) == READING and offered(engine, 1) == READING
        results = [m["content"] for m in engine.calls[1]["messages"] if m["role"] == "tool"]
        assert results[:3] == [modes.PLAN_REFUSAL] * 3 and "return a - b" in results[3]
        assert [line.decision for line in app.query(ToolLine)] == ["refused (plan mode)"] * 3 + ["auto"]
        assert modes.PLAN_NOTE in engine.calls[0]["messages"][-1]["content"]
        assert store.messages(app.chat.id)[0].content == "fix it"  # the transcript keeps the user's words
        # Accepting the plan: back to ask, and the model is told to go ahead, with every tool.
        await send(pilot, "/plan accept")
        await settle(pilot, app)
        assert app.mode == "ask" and shown_mode(app).startswith("ask · ")
        assert engine.calls[2]["messages"][-1]["content"] == modes.GO_AHEAD
        assert offered(engine, 2) == ALL
        assert isinstance(app.screen, ConsentScreen)  # in ask mode the edit asks
        await answer(pilot, "y")
        await until(pilot, lambda: not app.streaming, what="the end")
        assert (repo / "src/calc.py").read_text().endswith("a + b\n")


async def test_plan_accept_edits_goes_ahead_applying_edits(repo, store):
    engine = ScriptedEngine(turns=[["A plan."], [edit()], ["Done."]])
    app = ChatApp(engine, store, model="test", project=open_project(repo), mode="plan")
    async with app.run_test() as pilot:
        await send(pilot, "/plan accept")  # nothing to accept before a plan? It is plan mode: allowed
        await settle(pilot, app)
        await until(pilot, lambda: not app.streaming, what="the end")
        assert app.mode == "ask"
        app.mode = "plan"
        await send(pilot, "/plan accept edits")
        await settle(pilot, app)
        await until(pilot, lambda: not app.streaming, what="the end")
        assert app.mode == "accept-edits" and (repo / "src/calc.py").read_text().endswith("a + b\n")
        await send(pilot, "/plan accept")  # not in plan mode: nothing is sent
        await pilot.pause()
        assert len(engine.calls) == 3


async def test_shift_tab_cycles_the_mode_in_the_readout_and_the_chat_keeps_it(repo, store):
    engine = ScriptedEngine(turns=[["Hi."]])
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test() as pilot:
        seen = []
        for _ in range(3):
            await pilot.press("shift+tab")
            seen.append((app.mode, shown_mode(app).split(" · ")[0].strip()))
        assert seen == [("accept-edits", "accept edits"), ("plan", "plan"), ("ask", "ask")]
        await pilot.press("shift+tab", "shift+tab")
        assert app.mode == "plan" and store.chat(app.chat.id).mode == "plan"
        chat_id = app.chat.id
    # Reopened, the chat is in plan mode again; the command line's --mode wins when given.
    again = ChatApp(
        ScriptedEngine(turns=[["A plan."]]), store, model="test", project=open_project(repo), continue_last=True
    )
    async with again.run_test() as pilot:
        await until(pilot, lambda: again.chat is not None, what="the chat")
        assert again.chat.id == chat_id and again.mode == "plan" and "plan" in shown_mode(again)
        await send(pilot, "what would you do?")
        await until(pilot, lambda: not again.streaming and again.session.engine.calls, what="the reply")
        assert offered(again.session.engine, 0) == READING
    named = ChatApp(
        ScriptedEngine(),
        store,
        model="test",
        project=open_project(repo),
        open_chat=chat_id,
        mode="ask",
        mode_given=True,
    )
    async with named.run_test() as pilot:
        await until(pilot, lambda: named.chat is not None, what="the chat")
        assert named.mode == "ask"


async def test_shift_tab_does_not_change_the_mode_while_a_question_waits(repo, store):
    engine = ScriptedEngine(turns=[[call("run_command", command="echo hi")], ["Done."]])
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test() as pilot:
        await send(pilot, "run it")
        await settle(pilot, app)
        assert isinstance(app.screen, ConsentScreen)
        await until(pilot, lambda: app.screen.armed, what="the question to take keys")
        await pilot.press("shift+tab")
        assert app.mode == "ask" and isinstance(app.screen, ConsentScreen)
        await answer(pilot, "n")
        await until(pilot, lambda: not app.streaming, what="the end")


async def test_slash_mode_shows_and_sets_the_mode(repo, store):
    app = ChatApp(ScriptedEngine(), store, model="test", project=open_project(repo))
    async with app.run_test() as pilot:
        await send(pilot, "/mode accept edits")
        await until(pilot, lambda: app.mode == "accept-edits", what="the mode set")
        assert "accept edits" in shown_mode(app) and store.chat(app.chat.id).mode == "accept-edits"
        await send(pilot, "/mode sometimes")
        await pilot.pause()
        assert app.mode == "accept-edits"
        assert any("/mode sometimes: say ask, accept-edits, plan" in str(n.message) for n in app._notifications)
        await send(pilot, "/plan")
        await until(pilot, lambda: app.mode == "plan", what="plan mode")


async def test_a_chat_without_tools_shows_no_mode_and_shift_tab_leaves_it(repo, store):
    app = ChatApp(ScriptedEngine(), store, model="test", project=open_project(repo), tools=False)
    async with app.run_test() as pilot:
        assert shown_mode(app).startswith("think on")
        await pilot.press("shift+tab")
        assert app.mode == "ask"


def test_dspine_chat_mode_reaches_the_chat(tmp_path, monkeypatch):
    from app import cli
    from app.cli import chat as chat_command

    (tmp_path / "config.toml").write_text(f'data_dir = "{tmp_path / "data"}"\n')
    monkeypatch.setenv("DSPINE_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.delenv("DSPINE_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)
    started: list[ChatApp] = []
    monkeypatch.setattr(ChatApp, "run", lambda self: started.append(self))
    monkeypatch.setattr(chat_command, "_has_terminal", lambda: True)  # the screen is stood in for
    from tests.support.stand_in import stand_in

    with stand_in(lambda messages: []) as served:  # the remote engine asks the server what it serves first
        url = ("--engine", "remote", "--url", served.url)
        assert cli.run(["chat", *url, "--mode", "accept-edits"]) == 0
        assert started[-1].mode == "accept-edits" and started[-1]._mode_given
        assert cli.run(["chat", *url]) == 0
        assert started[-1].mode == "ask" and not started[-1]._mode_given


async def test_a_plain_start_does_not_bring_back_accept_edits_from_another_day(repo, store):
    """Fifth hostile trial (low): `dspine chat` shows the project's last chat, and kept the
    accept-edits it was left in; a plain start is in ask, --continue goes on in the saved mode."""
    app = ChatApp(ScriptedEngine(), store, model="test", project=open_project(repo))
    async with app.run_test() as pilot:
        await send(pilot, "/mode accept edits")
        await until(pilot, lambda: store.chat(app.chat.id).mode == "accept-edits", what="the mode saved")
        chat_id = app.chat.id
    plain = ChatApp(ScriptedEngine(), store, model="test", project=open_project(repo))
    async with plain.run_test() as pilot:
        await until(pilot, lambda: plain.chat is not None, what="the chat")
        await pilot.pause()
        assert plain.chat.id == chat_id and plain.mode == "ask"
        assert any("left in accept edits" in str(n.message) for n in plain._notifications)
    going_on = ChatApp(ScriptedEngine(), store, model="test", project=open_project(repo), continue_last=True)
    async with going_on.run_test() as pilot:
        await until(pilot, lambda: going_on.chat is not None, what="the chat")
        await until(pilot, lambda: going_on.mode == "accept-edits", what="the saved mode")
