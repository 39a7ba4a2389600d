"""A few dozen lines of a message's Markdown. A finished segment far from the
viewport sleeps: it keeps its height and drops its block widgets. Every layout
of the conversation places every widget in it, so without sleeping a long
chat, or one long reply, would make each streamed update slower than the last."""

from __future__ import annotations

from textual.message import Message
from textual.widgets import Markdown


class MarkdownSegment(Markdown):
    class Placed(Message):
        """A sleeping segment was mounted: the conversation decides whether it wakes."""

    def __init__(self, text: str = "", asleep_height: int | None = None, **kwargs) -> None:
        # Asleep from the start: a placeholder height and no parsing until it comes into view.
        super().__init__(None if asleep_height is not None else text, **kwargs)
        self.text = text
        self.final = asleep_height is not None  # no more text will come
        self.asleep = asleep_height is not None
        if asleep_height is not None:
            self.styles.height = asleep_height

    def on_mount(self) -> None:
        if self.asleep:
            self.post_message(self.Placed())

    async def sleep(self) -> None:
        if self.asleep or not self.final or not self.outer_size.height:
            return
        if self.lock.is_locked or self.source != self.text:  # its last text is still being drawn
            return
        self.asleep = True
        self.styles.height = self.outer_size.height
        await self.remove_children()

    async def wake(self) -> None:
        if not self.asleep:
            return
        self.asleep = False
        self.styles.height = "auto"
        await self.update(self.text)
