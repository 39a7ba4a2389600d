"""What kept the chat's screen updates from keeping up with a fast reply: full
garbage collections (held back while a reply streams) and code blocks highlighted
again on every update while they grow (plain until their closing line)."""

from __future__ import annotations

import gc
from dataclasses import dataclass, field

from textual.app import App

from app.tui.app import ChatApp
from app.tui.full_gc import HELD_THRESHOLD, FullCollections
from app.tui.widgets.markdown_segment import TintedFence
from app.tui.widgets.streamed_markdown import StreamedMarkdown
from backends.events import End
from tests.support.pilot import send, until
from tests.support.scripted_engine import ScriptedEngine


class OneDocument(App):
    def compose(self):
        yield StreamedMarkdown()


def fences(app: App) -> list[TintedFence]:
    return list(app.query(TintedFence))


def highlighted(fence: TintedFence) -> bool:
    return bool(fence._highlighted_code.spans)


async def test_an_open_code_block_is_plain_until_its_closing_line():
    app = OneDocument()
    async with app.run_test() as pilot:
        document = app.query_one(StreamedMarkdown)
        await document.write("Some code:\n\n```python\ndef f(x):\n")
        await until(pilot, lambda: len(fences(app)) == 1, what="the code block")
        await document.write("    return x + 1\n")
        await until(pilot, lambda: "return" in fences(app)[0].code, what="the second line")
        fence = fences(app)[0]
        assert fence.open and not highlighted(fence)
        assert fence._highlighted_code.plain == "def f(x):\n    return x + 1"
        await document.write("```\n\nAfter.\n")
        await until(pilot, lambda: not fences(app)[0].open, what="the closing line")
        closed = fences(app)[0]
        assert highlighted(closed)
        # As a fresh render of the whole text highlights it.
        fresh = TintedFence.highlight(closed, closed.code, "python")
        assert closed._highlighted_code.spans == fresh.spans


async def test_a_partial_closing_line_keeps_the_block_open():
    app = OneDocument()
    async with app.run_test() as pilot:
        document = app.query_one(StreamedMarkdown)
        await document.write("```python\nx = 1\n``")
        await until(pilot, lambda: fences(app) and "``" in fences(app)[0].code, what="the partial line")
        assert fences(app)[0].open


async def test_a_reply_that_ends_inside_a_code_block_is_highlighted_when_it_ends():
    app = OneDocument()
    async with app.run_test() as pilot:
        document = app.query_one(StreamedMarkdown)
        await document.write("```python\nx = 1\n")
        await until(pilot, lambda: len(fences(app)) == 1, what="the code block")
        assert fences(app)[0].open
        await document.finish()
        assert not fences(app)[0].open and highlighted(fences(app)[0])


def test_full_collections_are_held_and_released_once():
    before = gc.get_threshold()
    held = FullCollections()
    try:
        held.hold()
        held.hold()  # a second hold changes nothing
        assert gc.get_threshold() == (before[0], before[1], HELD_THRESHOLD) and held.held
    finally:
        held.release()
    assert gc.get_threshold() == before and not held.held
    held.release()  # and a second release neither
    assert gc.get_threshold() == before


@dataclass
class ThresholdAtTheEnd(ScriptedEngine):
    """Notes the full-collection threshold as the reply's last event leaves the engine: a
    reply that streams still. (The pilot's key press waits while the process is busy, so a
    fast reply may be over before the test could look from the loop.)"""

    seen: list[int] = field(default_factory=list)

    def stream(self, messages, think=True, sampling=None, n_max=None, tools=None):
        for event in super().stream(messages, think, sampling, n_max, tools):
            if isinstance(event, End):
                self.seen.append(gc.get_threshold()[2])
            yield event


async def test_the_chat_holds_full_collections_only_while_a_reply_streams(tmp_path):
    from app.chat.store import ChatStore

    before = gc.get_threshold()
    store = ChatStore(tmp_path / "chats.db")
    seen_while_streaming: list[int] = []
    engine = ThresholdAtTheEnd(seen=seen_while_streaming, answer=[f"word{i} " for i in range(200)], tokens_per_s=400)
    app = ChatApp(engine, store)
    try:
        async with app.run_test() as pilot:
            await send(pilot, "hi")
            await until(pilot, lambda: app.last_end is not None and not app.streaming, what="the reply")
            await until(pilot, lambda: not app.full_collections.held, what="the release after the last frame")
            assert gc.get_threshold() == before
    finally:
        store.close()
    assert seen_while_streaming == [HELD_THRESHOLD]
    assert gc.get_threshold() == before
