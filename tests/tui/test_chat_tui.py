"""The chat, driven by Textual's pilot against a scripted engine."""

from __future__ import annotations

import pytest
from textual.app import App
from textual.widgets import Collapsible, Markdown

from app.chat.store import ChatStore
from app.tui.app import ChatApp
from app.tui.reply import merge_deltas
from app.tui.widgets.message_view import MessageView
from app.tui.widgets.readout import Readout
from backends.events import Delta, End, StatsUpdate
from backends.stats import Stats
from tests.support.pilot import assistant_views, send, until
from tests.support.scripted_engine import ScriptedEngine


async def test_reply_streams_and_keeps_its_figures(store):
    engine = ScriptedEngine()
    app = ChatApp(engine, store, model="test")
    async with app.run_test() as pilot:
        await send(pilot, "write hello world")
        await until(pilot, lambda: app.last_end is not None and not app.streaming, what="the reply")
        view = assistant_views(app)[-1]
        assert "the **answer**" in view.answer and "print(1)" in view.answer
        assert view.answer_markdown.text == view.answer
        assert "answer" in view.answer_markdown.segments[-1].source
        figures = str(view.query_one(".figures").render())
        assert "tok/s" in figures and "accept len" in figures and "drafted" in figures
        assert engine.calls[-1]["messages"][-1] == {"role": "user", "content": "write hello world"}
        assert "tok/s" in str(app.query_one("#figures-live").render())


async def test_thinking_streams_then_collapses(store):
    engine = ScriptedEngine(thinking=["Let me ", "think."], answer=["Done."])
    app = ChatApp(engine, store)
    async with app.run_test() as pilot:
        await send(pilot, "why?")
        await until(pilot, lambda: app.last_end is not None and not app.streaming, what="the reply")
        view = assistant_views(app)[-1]
        box = view.query_one(Collapsible)
        assert box.collapsed and box.title.startswith("Thought for")
        assert view.thinking == "Let me think." and view.answer == "Done."


async def test_ctrl_t_switches_thinking_for_the_next_reply(store):
    engine = ScriptedEngine()
    app = ChatApp(engine, store, think=True)
    async with app.run_test() as pilot:
        await pilot.press("ctrl+t")
        assert "think off" in str(app.query_one("#mode").render())
        await send(pilot, "hi")
        await until(pilot, lambda: len(engine.calls) == 1 and not app.streaming, what="the reply")
        assert engine.calls[0]["think"] is False
        await send(pilot, "/think")
        await send(pilot, "again")
        await until(pilot, lambda: len(engine.calls) == 2 and not app.streaming, what="the second reply")
        assert engine.calls[1]["think"] is True


@pytest.mark.parametrize("key", ["escape", "ctrl+c"])  # Ctrl+C: a new user's first try only said how to quit
async def test_escape_cancels_and_keeps_what_arrived(store, key):
    engine = ScriptedEngine(answer=[f"word{i} " for i in range(2000)], tokens_per_s=200)
    app = ChatApp(engine, store)
    async with app.run_test() as pilot:
        await send(pilot, "go on")
        await until(pilot, lambda: len(assistant_views(app)[-1].answer) > 20, what="some text")
        await pilot.press(key)
        await until(pilot, lambda: not app.streaming, what="the stop")
        assert app.last_end.reason == "cancelled"
        kept = assistant_views(app)[-1].answer
        assert kept.startswith("word0 ") and len(kept) < len("".join(engine.answer))
        saved = store.messages(app.chat.id)[-1]
        assert saved.content == kept and saved.complete


async def test_no_drafter_says_so(store):
    app = ChatApp(ScriptedEngine(speculative=False), store)
    async with app.run_test() as pilot:
        await send(pilot, "hi")
        await until(pilot, lambda: app.last_end is not None and not app.streaming, what="the reply")
        figures = str(assistant_views(app)[-1].query_one(".figures").render())
        assert "no drafter" in figures and "accept" not in figures
        assert "no drafter" in str(app.query_one(Readout).query_one("#mode").render())


async def test_chat_survives_a_restart(tmp_path):
    path = tmp_path / "chats.db"
    first = ChatStore(path)
    app = ChatApp(ScriptedEngine(), first)
    async with app.run_test() as pilot:
        await send(pilot, "remember me")
        await until(pilot, lambda: app.last_end is not None and not app.streaming, what="the reply")
    first.close()
    again = ChatStore(path)
    reopened = ChatApp(ScriptedEngine(), again)
    async with reopened.run_test() as pilot:
        await pilot.pause()
        views = list(reopened.query(MessageView))
        assert [v.role for v in views] == ["user", "assistant"]
        assert views[0].answer == "remember me" and "print(1)" in views[1].answer
        assert "tok/s" in str(views[1].query_one(".figures").render())
    again.close()


async def test_help_and_unknown_commands(store):
    app = ChatApp(ScriptedEngine(), store)
    async with app.run_test() as pilot:
        await send(pilot, "/help")
        await until(pilot, lambda: any("Ctrl+T" in v.answer for v in assistant_views(app)), what="help")
        await send(pilot, "/bogus")
        await pilot.pause()
        assert not app.streaming


async def test_attachments_copy_and_export(store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "util.py").write_text("def add(a, b):\n    return a + b\n")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01binary")
    engine = ScriptedEngine()
    app = ChatApp(engine, store)
    copied = []
    app.copy_to_clipboard = copied.append
    async with app.run_test() as pilot:
        await send(pilot, "explain @util.py")
        await until(pilot, lambda: app.last_end is not None and not app.streaming, what="the reply")
        sent = engine.calls[-1]["messages"][-1]["content"]
        assert sent.startswith("explain @util.py") and "def add(a, b):" in sent
        await send(pilot, "look at @blob.bin")
        await pilot.pause()
        assert len(engine.calls) == 1  # refused: binary
        await pilot.press("ctrl+o")
        assert copied and "the **answer**" in copied[-1]
        await send(pilot, "/copy 1")
        assert copied[-1] == "print(1)\n"
        await send(pilot, "/export chat.md")
        await until(pilot, lambda: (tmp_path / "chat.md").exists(), what="the export")
        exported = (tmp_path / "chat.md").read_text()
        assert "## user" in exported and "def add(a, b):" in exported and "## assistant" in exported


async def test_chat_list_switches_renames_and_deletes(store):
    first = store.new_chat("first chat")
    store.add_message(first.id, "user", "hello from the first")
    second = store.new_chat("second chat")
    store.add_message(second.id, "user", "hello from the second")
    app = ChatApp(ScriptedEngine(), store)
    async with app.run_test() as pilot:
        await pilot.pause()
        assert app.chat.id == second.id  # the newest opens
        await pilot.press("ctrl+l")
        await pilot.pause()
        await pilot.press("down", "enter")  # the list is newest first: down is "first chat"
        await until(pilot, lambda: app.chat.id == first.id, what="the switch")
        assert [v.answer for v in app.query(MessageView)] == ["hello from the first"]
        await pilot.press("ctrl+l")
        await pilot.pause()
        await pilot.press("down", "r")
        app.screen.query_one("#title").value = "renamed"
        await pilot.press("enter")
        await until(pilot, lambda: any(c.title == "renamed" for c in store.chats()), what="the rename")
        await pilot.press("d")
        await until(pilot, lambda: len(store.chats()) == 1, what="the delete")
        await pilot.press("escape")
        # The open chat was deleted: the app moves on to a fresh one, never a dead id.
        await until(
            pilot, lambda: app.chat.id != first.id and app.chat.id in {c.id for c in store.chats()}, what="a live chat"
        )


async def test_first_run_shows_the_fit_pulls_with_progress_then_chats(store, hub, env, models_dir):
    from textual.widgets import ProgressBar

    from app.hub.pull import make_request, pull
    from app.models.catalog import load_catalog
    from app.settings import load_settings
    from app.tui.screens.first_run import FirstRun, FirstRunScreen

    settings = load_settings()
    request = make_request("qwen3.8-27b", load_catalog(), None, "dspine-gguf")
    first_run = FirstRun(
        "qwen3.8-27b", lambda: "Fits: Q4_K_M + dspine-gguf on this test GPU", lambda p: pull(request, settings, p)
    )
    engine = ScriptedEngine()
    app = ChatApp(None, store, first_run=first_run, open_engine=lambda model: engine)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, FirstRunScreen), what="the first-run screen")
        await until(pilot, lambda: "Fits: Q4_K_M" in str(app.screen.query_one("#plan").render()), what="the plan")
        progress = app.screen.query_one(ProgressBar)
        await pilot.click("#pull")
        await until(pilot, lambda: not isinstance(app.screen, FirstRunScreen), timeout=30, what="the pull")
        assert progress.progress == progress.total > 0
        await until(pilot, lambda: app.engine is engine, what="the engine")
        assert (models_dir / "unsloth/Qwen3.8-27B-GGUF/Qwen3.8-27B-Q4_K_M.gguf").exists()
        await send(pilot, "hello")
        await until(pilot, lambda: app.last_end is not None, what="the first reply")


async def test_model_and_fit_commands(store):
    app = ChatApp(
        ScriptedEngine(), store, model="tiny.gguf", fit_summary=lambda: "1,024 MiB of 24,576 MiB at context 8,192"
    )
    async with app.run_test() as pilot:
        await send(pilot, "/fit")
        await until(pilot, lambda: any("24,576 MiB" in v.answer for v in assistant_views(app)), what="the fit")
        await send(pilot, "/model")
        await pilot.pause()
        assert not app.streaming


async def test_a_reply_and_gpu_readings_arrive_while_a_dialog_is_open(store):
    # A dialog (first run, chat list, any modal) is a screen of its own: the chat's widgets
    # must still be found under it while the reply and the GPU readings come in.
    from textual.screen import ModalScreen

    engine = ScriptedEngine(answer=[f"word{i} " for i in range(40)], tokens_per_s=100)
    app = ChatApp(engine, store)
    async with app.run_test() as pilot:
        await send(pilot, "hello")
        await until(pilot, lambda: engine.last_token_at > 0, what="the first token")
        dialog = ModalScreen()
        await app.push_screen(dialog)
        app._refresh_gpu()
        await until(pilot, lambda: app.last_end is not None and not app.streaming, what="the reply")
        await app.workers.wait_for_complete()
        assert app.screen is dialog
        assert assistant_views(app)[-1].answer.endswith("word39 ")
        assert store.messages(app.chat.id)[-1].content.endswith("word39 ")


def test_a_batch_becomes_one_delta_per_run_whatever_stats_arrive_between_tokens():
    first, second, last = Stats(generated_tokens=1), Stats(generated_tokens=2), Stats(generated_tokens=3)
    batch = [
        Delta("Let ", "thinking"),
        StatsUpdate(first),
        Delta("me.", "thinking"),
        StatsUpdate(second),
        Delta("Hel", "answer"),
        StatsUpdate(second),
        Delta("lo", "answer"),
        StatsUpdate(last),
        End("stop", last),
    ]
    merged = merge_deltas(batch)
    assert merged[:2] == [Delta("Let me.", "thinking"), Delta("Hello", "answer")]
    assert isinstance(merged[2], StatsUpdate) and merged[2].stats is last
    assert merged[3] == End("stop", last)
    assert merge_deltas([Delta("a", "answer"), StatsUpdate(first)]) == [Delta("a", "answer"), StatsUpdate(first)]


STREAMED_MARKDOWN = """Intro with **bold** and `code`.

# Heading

Setext heading
--------------

- item one
- item two
  continued

1. first
2. second

```python
def f(x):
    return x + 1
```

> quote line
> more

| a | b |
|---|---|
| 1 | 2 |
| 3 | 4 |

Tail paragraph with a [link](http://x).
"""


async def test_streamed_markdown_ends_as_a_fresh_render_would():
    # Why a finished reply is not rendered again: appends in odd-sized pieces give the same blocks.
    import random

    class TwoDocuments(App):
        def compose(self):
            yield Markdown(id="streamed")
            yield Markdown(id="fresh")

    def blocks(markdown: Markdown) -> list:
        return [(type(block).__name__, block.source_range) for block in markdown.children]

    for seed in range(4):
        rng = random.Random(seed)
        app = TwoDocuments()
        async with app.run_test() as pilot:
            streamed, fresh = app.query_one("#streamed", Markdown), app.query_one("#fresh", Markdown)
            at = 0
            while at < len(STREAMED_MARKDOWN):
                size = rng.randint(1, 6)
                await streamed.append(STREAMED_MARKDOWN[at : at + size])
                at += size
            await fresh.update(STREAMED_MARKDOWN)
            await pilot.pause()
            assert len(blocks(fresh)) >= 8
            assert blocks(streamed) == blocks(fresh), f"seed {seed}"


def long_reply(paragraphs: int, tag: str = "") -> str:
    return "".join(
        f"Paragraph {tag}{i} says something useful.\n\n```python\nprint({i})\n```\n\n" for i in range(paragraphs)
    )


async def test_a_long_chat_opens_asleep_and_wakes_what_comes_into_view(tmp_path):
    from app.tui.widgets.conversation import Conversation
    from app.tui.widgets.markdown_segment import MarkdownSegment

    chats = ChatStore(tmp_path / "long.db")
    chat = chats.new_chat("long")
    for turn in range(12):
        chats.add_message(chat.id, "user", f"question {turn}")
        chats.add_message(chat.id, "assistant", long_reply(40, f"t{turn}-"))
    app = ChatApp(ScriptedEngine(), chats)
    async with app.run_test(size=(100, 30)) as pilot:
        conversation = app.query_one(Conversation)
        await until(pilot, lambda: conversation.drawn, what="the end drawn")
        segments = list(conversation.query(MarkdownSegment))
        asleep = [s for s in segments if s.asleep]
        assert len(segments) > 12 * 3 and len(asleep) > len(segments) * 0.8
        assert conversation.scroll_y == conversation.max_scroll_y  # opens at the end
        first = assistant_views(app)[0].answer_markdown.segments[0]
        assert first.asleep
        conversation.scroll_home(animate=False)
        await until(pilot, lambda: conversation.drawn and not first.asleep, what="the top drawn")
        assert "Paragraph t0-0 says" in first.source
        assert conversation.scroll_y == 0
        # Everything in the chat is still there to copy, asleep or not.
        assert assistant_views(app)[5].answer == long_reply(40, "t5-")
    chats.close()


async def test_a_long_reply_streams_in_segments_and_follows_unless_scrolled_up(store):
    from app.tui.widgets.conversation import Conversation

    text = long_reply(60)
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    engine = ScriptedEngine(answer=pieces, tokens_per_s=4000)
    app = ChatApp(engine, store)
    async with app.run_test(size=(100, 30)) as pilot:
        conversation = app.query_one(Conversation)
        await send(pilot, "long please")
        await until(pilot, lambda: app.last_end is not None and not app.streaming, what="the reply")
        await until(pilot, lambda: conversation.scroll_y == conversation.max_scroll_y, what="the end in view")
        view = assistant_views(app)[-1]
        segments = view.answer_markdown.segments
        assert view.answer == text and view.answer_markdown.text == text
        assert len(segments) >= 5 and segments[0].asleep  # scrolled far out of view while following
        assert [s.text for s in segments] == [s.text for s in segments if s.text]

        # Scrolled up during the next reply: the view stays where the user put it.
        engine.answer, engine.tokens_per_s = pieces, 400
        await send(pilot, "again")
        await until(
            pilot, lambda: len(assistant_views(app)) == 2 and assistant_views(app)[-1].answer, what="the second reply"
        )
        conversation.scroll_to(y=5, animate=False, immediate=True)
        await pilot.pause()
        assert not conversation.following
        await until(pilot, lambda: app.last_end is not None and not app.streaming, what="the second reply to end")
        assert conversation.scroll_y == 5
        conversation.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        assert conversation.following


async def test_chat_list_shows_titles_as_text_never_markup(store):
    """A title is the user's first words: `[/]` or `[red]` in it is text to show, not markup
    that would fail to parse (the list could not open) or restyle the line."""
    from textual.widgets import Label

    from app.tui.screens.chat_list import ChatList

    store.new_chat("fix the [/] closing tag", model="m[bold].gguf")
    store.new_chat("[red]alarm[/red] in the title")
    app = ChatApp(ScriptedEngine(), store)
    async with app.run_test() as pilot:
        await pilot.press("ctrl+l")
        await until(pilot, lambda: isinstance(app.screen, ChatList) and app.screen.query(Label), what="the list")
        shown = [str(label.render()) for label in app.screen.query(Label)]
        assert any("fix the [/] closing tag" in line and "m[bold].gguf" in line for line in shown)
        assert any("[red]alarm[/red] in the title" in line for line in shown)


async def test_notices_show_what_the_user_typed_as_text(store):
    """`/[/]` is an unknown command; the notice naming it is text, not markup that fails to
    parse and takes the chat down."""
    app = ChatApp(ScriptedEngine(), store)
    async with app.run_test() as pilot:
        await send(pilot, "/[/]x")
        await until(pilot, lambda: app._notifications, what="the notice")
        (notice,) = list(app._notifications)
        assert notice.message == "unknown command /[/]x; /help lists them" and not notice.markup
        assert app.is_running


async def test_a_model_that_cannot_start_leaves_a_lasting_error_and_no_prompt_is_lost(store):
    """Issue 47, dead end 2: the first screen's pull opened a drafter no engine here runs, a
    toast faded, the readout said "ready", and every prompt typed then vanished. Now the chat
    says what failed where it stays, the readout says no model runs, and a prompt sent then
    goes back into the input with the reason."""
    from app.errors import ConfigError
    from app.tui.screens.first_run import FirstRun, FirstRunScreen, OpenFile

    def cannot_start(model: str):
        raise ConfigError(
            "no llama-server here runs a dspine drafter", "install dspine's llama-server, or use --draft none"
        )

    first_run = FirstRun("smollm2-135m", lambda: "Fits", lambda progress: OpenFile("/models/tiny.gguf"))
    app = ChatApp(None, store, first_run=first_run, open_engine=cannot_start)
    async with app.run_test(size=(110, 32)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, FirstRunScreen), what="the first-run screen")
        app.screen.dismiss(OpenFile("/models/tiny.gguf"))
        await until(pilot, lambda: app.engine_problem is not None, what="the failed start")
        await pilot.pause()
        notes = [v.answer for v in assistant_views(app)]
        assert any("did not start" in n and "install dspine's llama-server" in n for n in notes)
        live = str(app.query_one(Readout).query_one("#figures-live").render())
        assert "no model running" in live and "ready" not in live
        await send(pilot, "fix the bug in calc.py")
        await pilot.pause()
        assert app.prompt_area.text == "fix the bug in calc.py"  # kept, not swallowed
        assert any("did not start" in str(n.message) for n in app._notifications)
