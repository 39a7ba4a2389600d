"""Driving the chat with Textual's pilot: wait for a condition with a deadline, type a
message, find the replies; and `store`, a chats database of the test's own (a fixture,
registered for every test by tests/conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # the chat's modules load Textual: not for every layer's collection
    from app.chat.store import ChatStore
    from app.tui.widgets.message_view import MessageView


async def until(pilot, predicate: Callable[[], object], timeout: float = 20.0, what: str = "condition") -> None:
    """Let the app run until `predicate()` holds; fail naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def answer(pilot, key: str, timeout: float = 20.0) -> None:
    """Press `key` for the question on screen once it takes an answer (a consent question
    ignores keys until the keyboard has been quiet a moment, and a long one until it has
    been scrolled to its end: this reads it to the end first, as its keys line asks)."""
    screen = pilot.app.screen

    def ready() -> bool:
        return getattr(screen, "armed", True) or (getattr(screen, "_quiet", False) and not screen.read_to_end)

    await until(pilot, ready, timeout, "the question to take keys")
    if not getattr(screen, "armed", True):
        await pilot.press("end")
        await until(pilot, lambda: screen.armed, timeout, "the question read to its end")
    await pilot.press(key)


async def send(pilot, text: str) -> None:
    """Type `text` into the prompt and press Enter, as a user would."""
    pilot.app.query_one("#prompt").load_text(text)
    await pilot.press("enter")


def drawn_answer_chars(view: MessageView) -> int:
    """Characters of a reply's answer on screen: earlier segments whole (finished, or asleep
    after being drawn), the live one up to the end of its last mounted block."""
    from textual.css.query import NoMatches
    from textual.widgets.markdown import MarkdownBlock

    try:
        segments = view.answer_markdown.segments
    except NoMatches:  # not composed yet
        return 0
    if not segments:
        return 0
    *finished, live = segments
    blocks = list(live.query_children(MarkdownBlock))
    lines = live.source.splitlines(keepends=True)
    drawn = len("".join(lines[: max(block.source_range[1] for block in blocks)])) if blocks else 0
    return sum(len(segment.text) for segment in finished) + drawn


def assistant_views(app) -> list[MessageView]:
    from app.tui.widgets.message_view import MessageView

    return [v for v in app.query(MessageView) if v.role == "assistant"]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ChatStore]:
    from app.chat.store import ChatStore

    chats = ChatStore(tmp_path / "chats.db")
    yield chats
    chats.close()
