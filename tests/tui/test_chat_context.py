"""The chat as a view of the agent session, driven by the pilot: the context meter,
/context, /compact, the compaction notice, resume, and Esc on a runaway tool."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from app.agent.compaction import SUMMARY_PREFIX
from app.agent.records import FACTS_KEY, for_engine
from app.tui.app import ChatApp
from app.tui.widgets.compaction_note import CompactionNote
from app.tui.widgets.message_view import MessageView
from app.tui.widgets.tool_line import ToolLine
from backends.events import ToolCall
from tests.support.pilot import send, until
from tests.support.scripted_engine import ProjectEngine, ScriptedEngine


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "AGENTS.md").write_text("Tests: pytest -q\n")
    for n in range(12):
        (root / "src" / f"mod{n:02}.py").write_text("".join(f"def f{n}_{i}(): return {i}\n" for i in range(120)))
    return root


def meter(app) -> str:
    return str(app.query_one("#context").render())


async def turn(pilot, app, text: str) -> None:
    await send(pilot, text)
    await until(pilot, lambda: not app.streaming, what=f"the turn {text!r}")


def project_app(repo, store, engine, **kwargs) -> ChatApp:
    from app.agent.project import open_project

    return ChatApp(engine, store, model="test", project=open_project(repo), think=False, **kwargs)


async def test_the_meter_moves_and_context_shows_the_breakdown(repo, store):
    engine = ProjectEngine(context_size=4096)
    app = project_app(repo, store, engine)
    async with app.run_test() as pilot:
        assert meter(app) == ""
        await turn(pilot, app, "read mod00")
        first = meter(app)
        assert first.startswith("ctx ") and "/3.6k" in first  # 4096 less the reply's reserve
        await turn(pilot, app, "read mod01")
        assert meter(app) != first
        await send(pilot, "/context")
        await until(pilot, lambda: "What fills the context" in app.query(MessageView)[-1].answer, what="/context")
        note = app.query(MessageView)[-1].answer
        for part in ("system prompt + AGENTS.md", "tools", "history", "this turn", "kept for the reply"):
            assert part in note


async def test_compact_by_hand_with_a_focus_and_the_notice_opens_the_summary(repo, store):
    engine = ProjectEngine(context_size=8192)
    app = project_app(repo, store, engine)
    async with app.run_test() as pilot:
        for n in range(3):
            await turn(pilot, app, f"read mod{n:02}")
        await send(pilot, "/compact the failing test")
        await until(pilot, lambda: app.query(CompactionNote), what="the compaction notice")
        await until(pilot, lambda: not app.streaming, what="the end of /compact")
        note = app.query_one(CompactionNote)
        assert "→" in note.title and "kept verbatim" in note.title
        assert note.summary.startswith(SUMMARY_PREFIX) and "src/mod00.py" in note.summary
        assert "Focus on: the failing test" in engine.summaries[-1][-1]["content"]
        # The saved chat keeps the transcript whole and the compacted context apart.
        assert store.compactions(app.chat.id) and store.context(app.chat.id) == app.session.history
        assert len(store.conversation(app.chat.id)) > len(app.session.history)
        await turn(pilot, app, "read mod05")
        sent = engine.calls[-1]["messages"]
        assert sent[1]["content"].startswith(SUMMARY_PREFIX)
        assert sent[0]["content"] == engine.calls[0]["messages"][0]["content"]  # AGENTS.md, verbatim


async def test_resume_and_continue_restore_the_compacted_context(repo, store, tmp_path):
    engine = ProjectEngine(context_size=8192)
    app = project_app(repo, store, engine)
    async with app.run_test() as pilot:
        for n in range(3):
            await turn(pilot, app, f"read mod{n:02}")
        await send(pilot, "/compact")
        await until(pilot, lambda: app.query(CompactionNote) and not app.streaming, what="compaction")
        await turn(pilot, app, "after the compaction")
        chat_id, context = app.chat.id, list(app.session.history)
    other = store.new_chat("another project's chat", project=str(tmp_path / "elsewhere"))
    assert other.id > chat_id

    for kwargs in ({"open_chat": chat_id}, {"continue_last": True}):
        resumed_engine = ProjectEngine(context_size=8192)
        resumed = project_app(repo, store, resumed_engine, **kwargs)
        async with resumed.run_test() as pilot:
            assert resumed.chat.id == chat_id
            assert resumed.query(CompactionNote)  # the notice is where it happened
            await turn(pilot, resumed, "go on")
            sent = resumed_engine.calls[0]["messages"]
            # The saved context as the engine takes it: dspine's records beside the summary kept
            # back (they come back with the context: see test_compaction_records).
            assert sent[1:-1] == for_engine(context) and sent[-1] == {"role": "user", "content": "go on"}
            assert FACTS_KEY in resumed.session.history[0] and FACTS_KEY not in sent[1]
            assert sent[1]["content"].startswith(SUMMARY_PREFIX)
            context = list(resumed.session.history)  # the next resume goes on from here


async def test_escape_stops_a_runaway_search_and_the_chat_stays_responsive(repo, store):
    (repo / "trap.txt").write_text("a" * 60 + "!\n")
    engine = ScriptedEngine(turns=[[ToolCall("c1", "search", json.dumps({"pattern": "(a|aa)+$"}))], ["Stopped it."]])
    app = project_app(repo, store, engine)
    async with app.run_test() as pilot:
        await send(pilot, "find it")
        await until(pilot, lambda: app.query(ToolLine), what="the search")
        # The chat keeps drawing and taking keys while the regex runs.
        app.query_one("#prompt").load_text("typed while it runs")
        started = time.monotonic()
        await pilot.pause(0.5)
        assert time.monotonic() - started < 2 and app.streaming
        assert app.query_one("#prompt").text == "typed while it runs"
        await pilot.press("escape")
        stopped = time.monotonic()
        await until(pilot, lambda: not app.streaming, what="the end after Esc")
        assert time.monotonic() - stopped < 3
        assert engine.calls[-1]["messages"][-1]["content"].startswith("the user stopped")
        assert app.query_one(ToolLine).decision == "stopped"


def test_resume_of_a_chat_that_does_not_exist_is_a_clear_error(dspine):
    result = dspine("chat", "--resume", "999")
    assert result.returncode == 2, result.stderr
    assert "no saved chat 999" in result.stderr and "Traceback" not in result.stderr
    both = dspine("chat", "--resume", "1", "--continue")
    assert both.returncode == 2 and "--continue and --resume" in both.stderr


def test_the_start_says_the_context_and_what_the_fit_plan_allows(tmp_path, monkeypatch):
    from app.cli.chat import _context_note
    from app.fit.hardware import Gpu, Hardware
    from app.run.engines import ModelFiles
    from app.settings import load_settings
    from tests.support.gguf_models import QTYPE, qwen38_27b, write_header_only

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no settings of this machine's user
    monkeypatch.delenv("DSPINE_CONFIG", raising=False)
    target = write_header_only(tmp_path / "q4.gguf", qwen38_27b(QTYPE.Q4_K))
    files = ModelFiles("qwen3.8-27b", target, None, None)
    card = Hardware([Gpu(0, "RTX 3090", 24 * 2**30, 24 * 2**30)], 64 * 2**30, 60 * 2**30, "nvml")
    monkeypatch.setattr("app.fit.hardware.detect", lambda: card)
    note = _context_note(files, 8192, load_settings())
    assert note is not None and note.startswith("context 8,192 tokens; the fit plan allows up to ")
    most = int(note.rsplit("--ctx ", 1)[1].rstrip(")"))
    assert most > 8192
    over = _context_note(files, most * 2, load_settings())
    assert over is not None and "more than the fit plan allows" in over and f"--ctx {most}" in over
    monkeypatch.setattr("app.fit.hardware.detect", lambda: Hardware([], 0, 0, "none"))
    assert "no GPU found" in (_context_note(files, 8192, load_settings()) or "")


def counted_meter(app) -> str:
    """The meter the restored context should show: counted as the session counts a request."""
    from app.agent.context import Usage

    session = app.session
    used = session.budget.count(session.messages(), session.tools())
    return Usage(session.budget.n_ctx, session.budget.reserve, history=used).meter()


async def test_the_meter_shows_a_reopened_chats_context_at_once(repo, store, tmp_path):
    engine = ProjectEngine(context_size=8192)
    app = project_app(repo, store, engine)
    async with app.run_test() as pilot:
        for n in range(2):
            await turn(pilot, app, f"read mod{n:02}")
        chat_id = app.chat.id

    for kwargs in ({"open_chat": chat_id}, {"continue_last": True}):
        resumed = project_app(repo, store, ProjectEngine(context_size=8192), **kwargs)
        async with resumed.run_test() as pilot:
            assert resumed.chat.id == chat_id and resumed.session.history
            await until(pilot, lambda app=resumed: meter(app) != "", what="the meter of the restored context")
            assert meter(resumed).strip() == counted_meter(resumed)  # nothing sent, already counted
            assert resumed.session.requests == []

    # A new chat empties the meter; opening the saved one from the list fills it again.
    listed = project_app(repo, store, ProjectEngine(context_size=8192), open_chat=chat_id)
    async with listed.run_test() as pilot:
        await until(pilot, lambda: meter(listed) != "", what="the first meter")
        await pilot.press("ctrl+n")
        await until(pilot, lambda: meter(listed) == "", what="the meter emptied by a new chat")
        assert listed.chat.id != chat_id
        await pilot.press("ctrl+l")
        await pilot.pause()
        chats = listed.screen.chats  # the list, newest first
        for _ in range([c.id for c in chats].index(chat_id)):
            await pilot.press("down")
        await pilot.press("enter")
        await until(pilot, lambda: listed.chat.id == chat_id and meter(listed) != "", what="the reopened chat")
        assert meter(listed).strip() == counted_meter(listed)


async def test_a_chat_goes_on_in_the_thinking_mode_it_was_left_in(repo, store):
    from app.agent.project import open_project

    app = project_app(repo, store, ProjectEngine(context_size=8192))  # starts with thinking off
    async with app.run_test() as pilot:
        await turn(pilot, app, "read mod00")
        chat_id = app.chat.id
    assert store.chat(chat_id).think is False
    other = store.new_chat("a chat never switched", project=str(repo))
    assert store.chat(other.id).think is None

    def reopened(**kwargs) -> ChatApp:
        return ChatApp(ProjectEngine(context_size=8192), store, model="test", project=open_project(repo), **kwargs)

    # The command line named no mode (think=True is its default): the chat's own mode wins.
    resumed = reopened(think=True, open_chat=chat_id)
    async with resumed.run_test() as pilot:
        await until(pilot, lambda: resumed.chat is not None, what="the chat")
        assert resumed.think is False and "think off" in str(resumed.query_one("#mode").render())
        await pilot.press("ctrl+t")  # switched: remembered at once
        assert resumed.think is True
    assert store.chat(chat_id).think is True
    # --think off named on the command line wins over the saved mode, and is then saved.
    named = reopened(think=False, think_given=True, open_chat=chat_id)
    async with named.run_test() as pilot:
        await until(pilot, lambda: named.chat is not None, what="the chat")
        assert named.think is False
        await turn(pilot, named, "read mod01")
    assert store.chat(chat_id).think is False


async def test_a_hard_linked_claude_md_is_named_and_left_out(tmp_path, store):
    # Issue 34: a CLAUDE.md hard-linked to a file outside went into the system prompt.
    root = tmp_path / "linked"
    root.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2\n")
    os.link(secret, root / "CLAUDE.md")
    engine = ProjectEngine(context_size=4096)
    app = project_app(root, store, engine)
    notices: list[str] = []
    app.notify = lambda message, **kw: notices.append(str(message))  # type: ignore[method-assign]
    async with app.run_test() as pilot:
        await until(pilot, lambda: any("hard link" in n for n in notices), what="the notice")
        await turn(pilot, app, "hi")
    assert any("CLAUDE.md" in n and "outside the project" in n for n in notices)
    assert "hunter2" not in json.dumps(engine.calls)


async def test_an_agents_md_too_large_for_the_context_is_named_in_the_chat(repo, store):
    (repo / "AGENTS.md").write_text("Follow the house style in every file you touch.\n" * 1200)  # about 57 KB
    engine = ProjectEngine(context_size=8192)
    app = project_app(repo, store, engine)
    notices: list[str] = []
    app.notify = lambda message, **kw: notices.append(str(message))  # type: ignore[method-assign]
    async with app.run_test() as pilot:
        await turn(pilot, app, "hi")
        await until(pilot, lambda: any("Nothing was sent" in n for n in notices), what="the error")
    error = next(n for n in notices if "Nothing was sent" in n)
    assert "AGENTS.md" in error and "system prompt" in error and "newest message" not in error
    assert not engine.calls


async def test_a_template_that_drops_the_tools_is_announced_at_the_start(repo, store):
    """Issue 37: only /context said it; a new user saw prose where tool calls were wanted."""

    class ToolBlind(ScriptedEngine):
        def count_tokens(self, messages, tools=None, think=True) -> int:
            return super().count_tokens(messages, None)

    warned = "cannot read, search, edit or run anything"

    def said(app) -> bool:
        return any(warned in view.answer for view in app.query(MessageView))

    def system_sent(engine) -> str:
        first = engine.calls[0]["messages"][0]
        assert first["role"] == "system"
        return first["content"]

    blind = ToolBlind()
    app = project_app(repo, store, blind)
    async with app.run_test() as pilot:
        # In the conversation, where it stays: a toast covered the status line for 30 s.
        await until(pilot, lambda: said(app), what="the note")
        assert not any(warned in str(n.message) for n in app._notifications)
        await turn(pilot, app, "hi")
    # Nor is the model told of tools it cannot see: SmolLM2 recited that paragraph back.
    assert "coding assistant working in the project" in system_sent(blind)
    assert "tools" not in system_sent(blind) and "consent" not in system_sent(blind)
    engine = ScriptedEngine()
    seeing = project_app(repo, store, engine)
    async with seeing.run_test() as pilot:
        await until(pilot, lambda: seeing.tools_unseen is not None, what="the tool count")
        assert seeing.tools_unseen is False
        assert not said(seeing)
        await turn(pilot, seeing, "hi")
    assert "Use the tools to read, search, edit and run" in system_sent(engine)
