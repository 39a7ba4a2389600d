"""Text from accepted draft tokens, tinted in the chat: exactly on those spans, in
paragraphs and code blocks, across a segment cut, toggled, and kept in the history."""

from __future__ import annotations

from textual.widgets._markdown import MarkdownBlock, MarkdownFence

from app.chat.store import ChatStore
from app.tui.app import ChatApp
from app.tui.reply import Reply
from app.tui.tint import add_span, align, tinted_ranges
from app.tui.widgets.markdown_segment import DRAFTED_STYLE
from app.tui.widgets.message_view import MessageView
from backends.events import Delta
from tests.support.pilot import assistant_views, send, until
from tests.support.scripted_engine import ScriptedEngine

# Each piece is one "token" of the script; the drafted ones are marked below.
PIECES = [
    "Here is ",
    "**bold draft**",
    " then mine.\n\n",
    "```python\n",
    "x = 1",
    "\n",
    "y = 2\n",
    "```\n\n",
]
DRAFTED = {1, 4}
FILLER = [f"filler paragraph {i}\n\n" for i in range(40)]  # more than a segment's 40 lines
ACROSS_CUT = "closing words\n\nopening words\n\n"  # one drafted piece over the cut after filler
LONG = PIECES + FILLER + [ACROSS_CUT, "own tail\n"]
LONG_DRAFTED = DRAFTED | {len(PIECES) + len(FILLER)}


def tinted_text(view: MessageView) -> list[str]:
    """The rendered text drawn with the drafted style, block by block, in order."""
    found = []
    for block in view.query(MarkdownBlock):
        content = block._highlighted_code if isinstance(block, MarkdownFence) else block._content
        for span in content.spans:
            if span.style == DRAFTED_STYLE:
                found.append(content.plain[span.start : span.end])
    return found


def test_spans_and_alignment_are_pure_arithmetic():
    spans: list[list[int]] = []
    add_span(spans, 0, 3)
    add_span(spans, 3, 5)  # touching: one span
    add_span(spans, 8, 9)
    assert spans == [[0, 5], [8, 9]]
    assert align("bold x", "**bold**\nx") == [2, 3, 4, 5, 8, 9]  # a soft break renders as a space
    # "Here is **bold draft** then" with "**bold draft**" drafted (offsets 8-22)
    source = "Here is **bold draft** then"
    assert tinted_ranges("Here is bold draft then", source, 0, [[8, 22]]) == [(8, 18)]
    assert tinted_ranges("abc", "abc", 100, [[0, 50]]) == []  # spans elsewhere in the reply


def test_the_reply_keeps_drafted_spans_as_deltas_arrive():
    reply = Reply()
    reply.feed([Delta("own ", drafted=0), Delta("drafted", drafted=1), Delta(" own")])
    reply.feed([Delta("think", "thinking", drafted=1), Delta("more", drafted=1)])
    assert reply.answer == "own drafted ownmore"
    assert reply.answer_drafted == [[4, 11], [15, 19]]
    assert reply.thinking_drafted == [[0, 5]]


async def test_drafted_text_is_tinted_exactly_in_paragraphs_code_and_across_a_cut(tmp_path):
    store = ChatStore(tmp_path / "chats.db")
    engine = ScriptedEngine(answer=LONG, drafted_pieces=LONG_DRAFTED, tokens_per_s=2000)
    app = ChatApp(engine, store, show_drafts=True)
    async with app.run_test(size=(100, 40)) as pilot:
        await send(pilot, "show me")
        await until(pilot, lambda: app.last_end is not None and not app.streaming, what="the reply")
        view = assistant_views(app)[-1]
        assert len(view.answer_markdown.segments) >= 2  # the reply was cut into segments
        await view.answer_markdown.segments[0].wake()
        for segment in view.answer_markdown.segments:
            await segment.wake()
        await pilot.pause()
        assert tinted_text(view) == ["bold draft", "x = 1", "closing words", "opening words"]

        await pilot.press("ctrl+g")  # off
        await until(pilot, lambda: not tinted_text(view), what="the tint to go")
        await send(pilot, "/drafts on")
        await until(pilot, lambda: bool(tinted_text(view)), what="the tint to come back")
        assert "bold draft" in tinted_text(view)
    store.close()

    # Reopened, the old reply can be looked at the same way.
    store = ChatStore(tmp_path / "chats.db")
    assert store.messages(1)[-1].drafted["answer"][0] == [8, 22]
    app = ChatApp(ScriptedEngine(), store, show_drafts=False)
    async with app.run_test(size=(100, 40)) as pilot:
        view = assistant_views(app)[-1]
        first = view.answer_markdown.segments[0]
        await first.wake()
        await pilot.pause()
        assert tinted_text(view) == []  # off by default
        await send(pilot, "/drafts")
        await until(pilot, lambda: "bold draft" in tinted_text(view), what="the old reply tinted")
        assert tinted_text(view)[:2] == ["bold draft", "x = 1"]
    store.close()


async def test_no_drafter_means_nothing_tinted(tmp_path):
    store = ChatStore(tmp_path / "chats.db")
    app = ChatApp(ScriptedEngine(answer=PIECES, speculative=False), store, show_drafts=True)
    async with app.run_test() as pilot:
        await send(pilot, "hi")
        await until(pilot, lambda: app.last_end is not None and not app.streaming, what="the reply")
        assert tinted_text(assistant_views(app)[-1]) == []
    store.close()


def test_a_version_1_history_upgrades_and_keeps_its_messages(tmp_path):
    import sqlite3

    from app.chat.store import SCHEMA

    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(SCHEMA[0])
    db.execute("PRAGMA user_version = 1")
    db.execute("INSERT INTO chats (title, created) VALUES ('old', 0)")
    db.execute("INSERT INTO messages (chat_id, role, content, complete, created) VALUES (1, 'assistant', 'hi', 1, 0)")
    db.commit()
    db.close()
    store = ChatStore(path)
    [message] = store.messages(1)
    assert message.content == "hi" and message.drafted is None
    store.update_message(message.id, "hi there", "", drafted={"answer": [[3, 8]], "thinking": []})
    assert store.messages(1)[0].drafted == {"answer": [[3, 8]], "thinking": []}
    store.close()
