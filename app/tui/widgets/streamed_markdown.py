"""A Markdown document that grows by appends (a reply, or its thinking), kept as
segments of about SEGMENT_LINES lines cut where cutting changes nothing (see
markdown_split). Only the last segment is live; the others are final and may
sleep (see MarkdownSegment)."""

from __future__ import annotations

import asyncio
import math

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownStream

from ..markdown_split import split_all, split_point
from ..tint import Spans
from .markdown_segment import MarkdownSegment

SEGMENT_LINES = 40  # a segment costs a parse of this many lines when it wakes


def estimated_height(text: str, width: int) -> int:
    """Lines a segment will take before it is ever drawn: only a placeholder, the real
    height replaces it when the segment wakes."""
    width = max(width - 4, 10)  # the Markdown's padding
    return sum(max(1, math.ceil(len(line) / width)) for line in text.splitlines() or [""]) + 1


class StreamedMarkdown(Vertical):
    DEFAULT_CSS = """
    StreamedMarkdown {
        height: auto;
    }
    """

    def __init__(self, text: str = "", asleep: bool = False, tint: Spans | None = None, **kwargs) -> None:
        """`asleep`: a finished text shown from history: all segments start asleep.
        `tint`: drafted spans of the text to draw tinted (the Reply's list, growing with it)."""
        super().__init__(**kwargs)
        self._initial = text
        self._asleep = asleep
        self._tint = tint
        self._stream: MarkdownStream | None = None
        self._finishing: set[asyncio.Task] = set()  # full segments still drawing their last lines

    def compose(self) -> ComposeResult:
        if not self._asleep:
            yield self._segment(MarkdownSegment(self._initial))
            return
        width = self.app.size.width or 80
        origin = 0
        for piece in split_all(self._initial, SEGMENT_LINES):
            yield self._segment(MarkdownSegment(piece, asleep_height=estimated_height(piece, width), origin=origin))
            origin += len(piece)

    def _segment(self, segment: MarkdownSegment) -> MarkdownSegment:
        segment.tint = self._tint
        return segment

    async def show_tint(self, spans: Spans | None) -> None:
        """Draw the drafted spans tinted (a list) or not (None)."""
        self._tint = spans
        for segment in self.segments:
            await segment.show_tint(spans)

    @property
    def segments(self) -> list[MarkdownSegment]:
        return list(self.query_children(MarkdownSegment))

    @property
    def text(self) -> str:
        return "".join(segment.text for segment in self.segments)

    async def write(self, text: str) -> None:
        live = self.segments[-1]
        combined = live.text + text
        cut = split_point(combined, SEGMENT_LINES)
        if cut is None:
            live.text = combined
            await self._live_stream(live).write(text)
            return
        # The full segment is finished off the critical path (its stream stopped, its last
        # lines drawn) while the text after the cut streams into a new one at once: awaiting
        # stop, append and mount in turn held the whole screen update up.
        stream, self._stream = self._stream, None
        shown = len(live.text)
        live.text = combined[:cut]
        live.final = True
        following = self._segment(MarkdownSegment("", origin=live.origin + cut))
        await self.mount(following)
        task = asyncio.create_task(self._finish_segment(live, stream, shown, combined[:cut]))
        self._finishing.add(task)
        task.add_done_callback(self._finishing.discard)
        if combined[cut:]:
            await self.write(combined[cut:])

    async def _finish_segment(self, segment: MarkdownSegment, stream: MarkdownStream | None, shown: int, text: str):
        if stream is not None:
            await stream.stop()
        if len(text) < shown:
            # The cut falls inside text already shown (the line after a blank line has
            # just ended): draw the segment again without it.
            await segment.update(text)
        elif len(text) > shown:
            await segment.append(text[shown:])

    def _live_stream(self, live: MarkdownSegment) -> MarkdownStream:
        if self._stream is None:
            self._stream = Markdown.get_stream(live)
        return self._stream

    async def _stop(self) -> None:
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None

    async def finish(self) -> None:
        """No more text: the last segment becomes final."""
        await self._stop()
        if self._finishing:
            await asyncio.gather(*list(self._finishing))
        for segment in self.segments:
            segment.final = True
        if self.segments:
            self.segments[-1].close_fences()  # a reply that stopped inside a code block
