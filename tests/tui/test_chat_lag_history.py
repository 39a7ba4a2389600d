"""The live reply reaches the screen while it streams in a chat that already holds earlier
replies (issue 40), and the lag benchmark times that reply, not a summary the session
streams before it (its `--history 3` run reported 12 s of "lag" at 200 tok/s: the chat
compacted the earlier replies first, and the summary's text was timed as the reply's)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from app.agent.compaction import SUMMARY_PROMPT
from app.tui.app import ChatApp
from app.tui.widgets.message_view import MessageView
from tests.support.pilot import drawn_answer_chars, send, until
from tests.support.scripted_engine import ScriptedEngine

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "chat_ui.py"


def load_benchmark():
    spec = importlib.util.spec_from_file_location("chat_ui_benchmark", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_times_the_live_reply_not_a_summary_before_it():
    chat_ui = load_benchmark()
    engine = chat_ui.TimedEngine(ScriptedEngine(answer=["ab", "cd"], tokens_per_s=1e6))
    list(engine.stream([{"role": "user", "content": "x"}, {"role": "user", "content": SUMMARY_PROMPT}]))
    assert engine.text == "" and engine.sent == [] and engine.summaries == 1
    list(engine.stream([{"role": "user", "content": "hi"}]))
    assert engine.text == "abcd" and [chars for _, chars in engine.sent] == [2, 4]


async def test_a_reply_is_drawn_as_it_streams_in_a_chat_with_earlier_replies(store):
    chat_ui = load_benchmark()
    pieces = chat_ui.reply_tokens(600)
    answer = "".join(pieces)
    earlier = "".join(chat_ui.reply_tokens(3000))
    chat = store.new_chat("a long day")
    for turn in range(3):  # more than the 8,192-token context holds: the chat compacts first
        store.add_message(chat.id, "user", f"question {turn}")
        store.add_message(chat.id, "assistant", earlier)
    scripted = ScriptedEngine(answer=pieces, tokens_per_s=150)
    engine = chat_ui.TimedEngine(scripted)
    app = ChatApp(engine, store, model="t", open_chat=chat.id)
    async with app.run_test(size=(120, 40)) as pilot:
        await send(pilot, "go on")
        await until(pilot, lambda: any(v.live for v in app.query(MessageView)), what="the live reply")
        live = next(v for v in app.query(MessageView) if v.live)
        # A quarter of the reply on screen while the engine is still far from its end (the
        # whole reply takes about 4 s at this rate).
        await until(pilot, lambda: drawn_answer_chars(live) >= len(answer) // 4, 30, "a quarter of the reply drawn")
        produced = engine.sent[-1][1]
        assert app.streaming and produced < len(answer) * 3 // 4  # drawn while it streams, not at its end
        assert engine.summaries == 1 and len(scripted.calls) == 2  # the summary, then the reply
        await until(pilot, lambda: not app.streaming, 30, "the end")
        assert drawn_answer_chars(live) > 0
