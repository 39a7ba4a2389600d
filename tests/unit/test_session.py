"""The agent session without Textual: tool rounds, consent, the context budget and
compaction, tool output kept out of the way, overflow errors, resume."""

from __future__ import annotations

import asyncio
import json
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.agent.compaction import SUMMARY_PREFIX, is_stub, is_summary_request, summary_request
from app.agent.project import open_project, system_prompt
from app.agent.records import FACTS_KEY, for_engine
from app.agent.session import Compacted, Notice, Session, ToolFinished
from app.agent.toolbox import BUILTIN, NEEDS_CONSENT, TOOLS, Done, Toolbox
from app.chat.store import ChatStore
from backends.events import ToolCall
from tests.support.scripted_engine import ProjectEngine
from tests.support.session_recorder import Recorder, saving

AGENTS = "Run the tests with `pytest -q`. Never touch vendor/.\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "AGENTS.md").write_text(AGENTS)
    for n in range(40):
        body = "".join(f"def f{n}_{i}(x):\n    return x * {i}  # line {i} of module {n}\n" for i in range(60))
        (root / "src" / f"mod{n:02}.py").write_text(body)  # about 3 KB each
    return root


def make_session(repo: Path, engine, recorder: Recorder, **kwargs) -> Session:
    project = open_project(repo)
    return Session(engine, Toolbox(repo), recorder.ask, recorder.emit, system=system_prompt(project, True), **kwargs)


def test_one_record_per_tool_feeds_schemas_dispatch_and_consent(repo):
    box = Toolbox(repo)
    assert (
        [t["function"]["name"] for t in TOOLS]
        == [s.name for s in BUILTIN]
        == [t["function"]["name"] for t in box.schemas()]
    )
    assert {"edit_file", "write_file", "run_command"} == NEEDS_CONSENT
    assert all(s.source == "dspine" for s in BUILTIN)
    assert "there is no tool" in box.prepare("nope", {}).result  # type: ignore[union-attr]
    # A tool from elsewhere (an MCP server, later) joins through a record of its own.
    from app.agent.toolbox import ToolSpec

    box.add(ToolSpec("echo", "Echo.", {"type": "object", "properties": {}}, lambda b, a: Done("hi"), True, "mcp:demo"))
    assert box.schemas()[-1]["function"]["name"] == "echo" and box.needs_consent("echo")
    assert box.prepare("echo", "{}") == Done("hi")
    with pytest.raises(ValueError, match="exists already"):
        box.add(BUILTIN[0])


def test_forty_turns_at_a_3k_context_never_overflow_and_keep_what_matters(repo):
    engine = ProjectEngine(context_size=3072)
    recorder = Recorder()
    session = make_session(repo, engine, recorder, think=False)

    async def go():
        for turn in range(40):
            await session.send(f"read mod{turn:02}")

    asyncio.run(go())
    assert not recorder.of(Notice) or all(n.severity != "error" for n in recorder.of(Notice))
    assert len(engine.calls) == 80  # a tool round and an answer per turn: every request went through
    assert max(call["tokens"] for call in engine.calls) <= session.budget.n_ctx
    compactions = recorder.of(Compacted)
    assert compactions and all(c.compaction.gained for c in compactions)
    assert engine.summaries, "the older part was summarised"
    first_system = engine.calls[0]["messages"][0]
    for call in engine.calls:
        # The system prompt with AGENTS.md is the same bytes on every request (prefix cache).
        assert call["messages"][0] == first_system and AGENTS in first_system["content"]
        assert call["tools"] == engine.calls[0]["tools"]
    # The newest turn went verbatim: the prompt, the call, the whole file it read.
    last = engine.calls[-1]["messages"]
    assert last[-3]["content"] == "read mod39"
    assert last[-1]["content"].endswith((repo / "src/mod39.py").read_text().splitlines()[-1])
    # At every compaction, every path read so far and no longer in the kept messages was in what
    # the summariser was given (its transcript, earlier summaries' lists included).
    read_so_far: list[str] = []
    checked = 0
    for event in recorder.events:
        if isinstance(event, ToolFinished):
            read_so_far.append(json.loads(event.call.arguments)["path"])
        elif isinstance(event, Compacted) and event.compaction.summary_input:
            kept = json.dumps(event.compaction.history[2:])
            gone = [p for p in read_so_far if p not in kept]
            assert gone and all(p in event.compaction.summary_input for p in gone), gone
            checked += 1
    assert checked == len(engine.summaries)
    final = compactions[-1].compaction
    read = [f"src/mod{n:02}.py" for n in range(40)]
    summarised = [p for p in read if p not in json.dumps(final.history[1:])]
    assert summarised and all(p in final.summary_input or p in final.summary for p in summarised)
    # The summary message lists every file read so far, by dspine itself.
    assert all(p in final.summary for p in summarised)
    assert final.history[0]["content"].startswith(SUMMARY_PREFIX)


@pytest.mark.parametrize("context", [6144, 3072])
def test_the_summary_request_is_the_chats_last_request_plus_the_ask(repo, context):
    """The engine reads only the request to summarise anew: everything before it is the
    conversation exactly as the chat last sent it (system prompt, tools, messages), so the
    prefix cache holds it, and the chat's system prompt stays cached for after. Where the
    conversation as sent does not fit beside the summary (3072), its newest long texts
    are cut (or its old tool results go as stubs), and the rest is as sent."""
    engine = ProjectEngine(context_size=context)
    recorder = Recorder()
    session = make_session(repo, engine, recorder, think=False)

    async def go():
        for turn in range(20):
            await session.send(f"read mod{turn:02}")
            if engine.summaries:
                return

    asyncio.run(go())
    assert engine.summaries, "a compaction summarised"
    before, after = engine.calls[engine.summary_at[0] - 1], engine.calls[engine.summary_at[0]]
    summary, last_sent = engine.summaries[0], before["messages"]
    ask = summary[-1]
    assert is_summary_request(summary) and ask["role"] == "user" and "call no tool" in ask["content"]
    assert summary[0] == last_sent[0] and AGENTS in summary[0]["content"]  # the chat's own system prompt
    assert engine.summary_tools[0] == before["tools"] == after["tools"]  # and its tool list
    shared = summary[:-1]
    assert len(shared) > 3 and [m["role"] for m in last_sent[: len(shared)]] == [m["role"] for m in shared]
    changed = [m for m, was in zip(shared, last_sent, strict=False) if m != was]
    assert all(is_stub(m["content"]) or "characters left out" in m["content"] for m in changed)
    assert (not changed) if context == 6144 else changed  # as sent where it fits; else its newest long texts cut
    # The compacted chat starts with the same system prompt and tools: that prefix stays cached.
    assert after["messages"][0] == summary[0] and after["messages"][1]["content"].startswith(SUMMARY_PREFIX)


def test_a_summary_request_too_big_for_the_context_cuts_its_newest_long_texts_then_falls_back_to_a_transcript():
    def count(history):
        return sum(len(m.get("content") or "") for m in history) // 4

    sent = [
        {"role": "user", "content": "fix it " * 150},
        {"role": "assistant", "content": "y" * 8000},
        {"role": "assistant", "content": "ok"},
    ]
    request, _ = summary_request([sent], sent, sent, "the parser", count, 1000)
    assert request[0] == sent[0] and request[2] == sent[2]  # the messages before the cut as sent: cached
    assert "characters left out" in request[1]["content"] and len(request[1]["content"]) < 2000
    assert is_summary_request(request) and request[-1]["content"].endswith("Focus on: the parser")
    request, text = summary_request([sent], sent, sent, "", count, 500)  # even cut it does not fit
    assert len(request) == 1 and "<conversation>" in request[0]["content"] and count(request) <= 500
    assert "left out" in text
    fits, _ = summary_request([sent[1:]], sent[1:], sent[1:], "", count, 3000)
    assert fits[:-1] == sent[1:] and is_summary_request(fits)  # it fits: the conversation as it was, then the ask


def test_a_message_too_big_for_any_compaction_is_refused_once_without_looping(repo):
    engine = ProjectEngine(context_size=2048)
    recorder = Recorder()
    session = make_session(repo, engine, recorder, think=False)

    async def go():
        await session.send("read mod01")
        await session.send("x " * 6000)  # far over the context on its own

    asyncio.run(go())
    errors = [n for n in recorder.of(Notice) if n.severity == "error"]
    assert len(errors) == 1 and "Nothing was sent" in errors[0].text and "--ctx" in errors[0].text
    assert len(engine.calls) == 2  # the huge prompt never reached the engine
    assert len(session.compactions) == 1  # tried once; no second compaction of the same history


def test_an_agents_md_too_large_for_the_context_is_named_not_the_short_message(repo):
    # Issue 34: a 57 KB AGENTS.md in an 8K context; the error blamed the user's 2-character message.
    (repo / "AGENTS.md").write_text("Follow the house style in every file you touch.\n" * 1200)
    engine = ProjectEngine(context_size=8192)
    recorder = Recorder()
    project = open_project(repo)
    session = Session(
        engine,
        Toolbox(repo),
        recorder.ask,
        recorder.emit,
        system=system_prompt(project, True),
        instructions_file="AGENTS.md",
        think=False,
    )
    asyncio.run(session.send("hi"))
    errors = [n for n in recorder.of(Notice) if n.severity == "error"]
    assert len(errors) == 1, errors
    assert "AGENTS.md" in errors[0].text and "system prompt" in errors[0].text
    assert "newest message" not in errors[0].text and "Nothing was sent" in errors[0].text
    assert not engine.calls and not engine.summaries and not recorder.of(Compacted)


def test_no_second_compaction_when_the_first_gained_nothing(repo):
    engine = ProjectEngine(context_size=2048)
    recorder = Recorder()
    session = make_session(repo, engine, recorder, think=False)

    async def go():
        await session.send("y " * 6000)
        await session._fit()  # the same history again: not compacted again

    asyncio.run(go())
    assert len(session.compactions) == 1 and not session.compactions[0].gained
    assert not engine.summaries and not engine.calls


def test_overflow_error_compacts_and_retries_once(repo):
    engine = ProjectEngine(context_size=8192, overflow_on={7})
    recorder = Recorder()
    session = make_session(repo, engine, recorder, think=False)

    async def go():
        for turn in range(4):
            await session.send(f"read mod{turn:02}")

    asyncio.run(go())
    assert [n for n in recorder.of(Notice) if "does not fit its context" in n.text]
    assert len(engine.summaries) == 1 and recorder.of(Compacted)
    assert len(engine.calls) == 9  # the refused request, then the same turn again after compacting
    assert engine.calls[7]["tokens"] < engine.calls[6]["tokens"]


def test_an_engine_that_keeps_overflowing_gets_a_clear_message(repo):
    engine = ProjectEngine(context_size=3072, always_overflow=True)
    recorder = Recorder()
    session = make_session(repo, engine, recorder, think=False)
    session.history = [
        {"role": "user", "content": f"question {n}"} if n % 2 == 0 else {"role": "assistant", "content": "answer " * 40}
        for n in range(10)
    ]
    asyncio.run(session.send("go on"))
    assert len(engine.calls) == 2  # the first try and one retry, no more
    error = [n for n in recorder.of(Notice) if n.severity == "error"][-1]
    assert "still refuses the prompt as too long" in error.text and "--ctx" in error.text


def test_huge_command_output_head_and_tail_reach_the_model_and_the_file_holds_all(repo):
    script = "print('FIRST LINE')\nfor i in range(20000): print(f'middle {i}')\nprint('=== 5 passed in 0.1s ===')\n"
    (repo / "noisy.py").write_text(script)
    engine = ProjectEngine(context_size=4096)
    recorder = Recorder()
    session = make_session(repo, engine, recorder, think=False)
    call = ToolCall("c1", "run_command", json.dumps({"command": f"{sys.executable} noisy.py"}))
    session.history = [{"role": "user", "content": "run it"}, {"role": "assistant", "content": ""}]
    session.history[-1]["tool_calls"] = [call.as_message_part()]
    asyncio.run(session._run_tool(call))
    asyncio.run(session.run_turn())  # the model gets the result
    result = recorder.of(ToolFinished)[0].result
    assert engine.calls[-1]["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": result}
    assert result.startswith("exit code 0\nFIRST LINE") and result.rstrip().endswith("=== 5 passed in 0.1s ===")
    assert len(result) <= session.result_cap() + 400
    saved = result.split("the whole output is in ", 1)[1].split(":", 1)[0]
    path = repo / saved
    whole = path.read_text()
    assert "middle 10000\n" in whole and whole.startswith("FIRST LINE") and "5 passed" in whole
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert (repo / ".dspine" / ".gitignore").read_text() == "*\n"
    # read_file on the saved file reads the middle, whatever its size.
    step = session.toolbox.prepare("read_file", {"path": saved, "start_line": 10002, "end_line": 10003})
    assert isinstance(step, Done) and "middle 10000" in step.result and "middle 10001" in step.result
    # git does not see the scratch folder.
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
    assert ".dspine" not in status


def test_an_endless_output_costs_bounded_memory(repo):
    from app.agent.commands import run_command
    from app.agent.scratch import MAX_FILE_BYTES, Scratch

    started = time.monotonic()
    ran = run_command(repo, "head -c 200000000 /dev/zero | tr '\\0' 'z'", 60, scratch=Scratch(repo))
    assert ran.exit_code == 0 and len(ran.output) < 20_000 and time.monotonic() - started < 60
    assert ran.saved is not None and (repo / ran.saved).stat().st_size <= MAX_FILE_BYTES + 200


def test_a_long_file_read_keeps_head_and_tail_and_says_how_to_read_the_rest(repo):
    big = "".join(f"line {i}\n" for i in range(3000))
    (repo / "big.txt").write_text(big)
    engine = ProjectEngine(context_size=2048)
    recorder = Recorder()
    session = make_session(repo, engine, recorder, think=False)
    asyncio.run(session._run_tool(ToolCall("c1", "read_file", json.dumps({"path": "big.txt"}))))
    result = recorder.of(ToolFinished)[0].result
    assert "line 0" in result and "line 2999" in result and "start_line and end_line" in result
    assert len(result) <= session.result_cap() + 400


def test_consent_comes_from_the_tool_record_and_always_is_remembered(repo):
    engine = ProjectEngine()
    recorder = Recorder()
    recorder.answer = "always"
    session = make_session(repo, engine, recorder)
    calls = [ToolCall(f"c{n}", "run_command", json.dumps({"command": "echo same"})) for n in range(2)]

    async def go():
        for c in calls:
            await session._run_tool(c)
        await session._run_tool(ToolCall("c9", "list_files", "{}"))

    asyncio.run(go())
    assert len(recorder.questions) == 1 and recorder.questions[0].tool == "run_command"  # the same command again
    assert [e.decision for e in recorder.of(ToolFinished)] == ["always", "always (this chat)", "auto"]


def test_stop_abandons_a_runaway_search_at_once(repo):
    (repo / "trap.txt").write_text("a" * 60 + "!\n")
    engine = ProjectEngine()
    recorder = Recorder()
    session = make_session(repo, engine, recorder)
    call = ToolCall("c1", "search", json.dumps({"pattern": "(a|aa)+$"}))

    async def go():
        task = asyncio.ensure_future(session._run_tool(call))
        gaps: list[float] = []
        last = time.monotonic()
        deadline = last + 1.0
        while time.monotonic() < deadline:  # the loop keeps turning while the regex runs
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now
        assert not task.done()
        stopped_at = time.monotonic()
        session.stop()
        await asyncio.wait_for(task, 5)
        return gaps, time.monotonic() - stopped_at

    gaps, after_stop = asyncio.run(go())
    # A search in the event loop's own thread would hold it for its whole 5 s budget: one
    # gap of a second or more. Counting ticks instead failed on a loaded machine.
    assert len(gaps) >= 5 and max(gaps) < 0.75, gaps
    assert after_stop < 2
    assert recorder.of(ToolFinished)[0].result.startswith("the user stopped")


def test_resume_restores_the_compacted_context(repo, tmp_path):
    store = ChatStore(tmp_path / "chats.db")
    chat = store.new_chat("work", project=str(repo))
    engine = ProjectEngine(context_size=3072)
    recorder = Recorder()

    emit = saving(recorder, store, chat.id)  # what the chat saves, as the TUI does

    session = Session(engine, Toolbox(repo), recorder.ask, emit, system=system_prompt(open_project(repo), True))
    session.think = False

    async def turns(s: Session, texts: list[str]) -> None:
        for text in texts:
            store.add_message(chat.id, "user", text)
            await s.send(text)

    asyncio.run(turns(session, [f"read mod{n:02}" for n in range(12)]))
    assert recorder.of(Compacted)
    assert store.context(chat.id) == session.history  # the saved context is the model's
    assert len(store.conversation(chat.id)) > len(session.history)  # the transcript keeps everything

    resumed_engine = ProjectEngine(context_size=3072)
    resumed = Session(
        resumed_engine, Toolbox(repo), recorder.ask, recorder.emit, system=system_prompt(open_project(repo), True)
    )
    resumed.restore(store.context(chat.id))
    resumed.think = False
    asyncio.run(resumed.send("what next?"))
    sent = resumed_engine.calls[0]["messages"]
    assert sent[0] == engine.calls[-1]["messages"][0]  # the same system prompt, AGENTS.md included
    # The engine gets the history without dspine's own records (kept beside the summary).
    assert sent[1:-1] == for_engine(session.history) and sent[1]["content"].startswith(SUMMARY_PREFIX)
    assert FACTS_KEY in session.history[0] and FACTS_KEY not in sent[1]
    assert sent[-1] == {"role": "user", "content": "what next?"}
    store.close()


def test_a_reply_stopped_for_a_loop_goes_back_to_the_model_with_its_repeats_folded(repo):
    """Issue 68: the loop the guard stopped (a function, then `#` line after line) stayed in the
    history whole, and the next request showed the model 64 lines of `#` to go on with."""
    from tests.support.scripted_engine import ScriptedEngine

    looping = ["def reverse(head):\n", "    return head\n"] + ["#\n"] * 500
    engine = ScriptedEngine(turns=[looping, ["Renamed."]])
    recorder = Recorder()
    session = make_session(repo, engine, recorder, think=False)

    async def two_turns() -> None:
        await session.send("write a function that reverses a linked list")
        await session.send("now rename it to rev")

    asyncio.run(two_turns())
    assert any("(a loop)" in n.text for n in recorder.of(Notice))
    sent_back = [m for m in engine.calls[1]["messages"] if m["role"] == "assistant"]
    assert sent_back[-1]["content"] == "def reverse(head):\n    return head\n#"
