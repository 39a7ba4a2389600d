"""A few dozen lines of a message's Markdown. A finished segment far from the
viewport sleeps: it keeps its height and drops its block widgets. Every layout
of the conversation places every widget in it, so without sleeping a long
chat, or one long reply, would make each streamed update slower than the last.

With `tint` set, text that came from accepted draft tokens is drawn tinted: each
block, as it is built, is aligned with its source lines (see tint.py). Without
it the blocks are Textual's own, untouched."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from markdown_it.token import Token
from textual.color import Color
from textual.content import Content
from textual.message import Message
from textual.style import Style
from textual.widgets import Markdown
from textual.widgets._markdown import MarkdownBlock, MarkdownFence, MarkdownTable

from ...terminal_text import controls_shown
from ..tint import Spans, line_starts, tinted_ranges

# A subtle background: the theme's colours show through it, light or dark.
DRAFTED_STYLE = Style(background=Color(80, 170, 255, 0.16))


class TintedFence(MarkdownFence):
    """A code block that keeps its tint when it highlights its code again (it does so once
    mounted, and on a change of theme), and is not highlighted while it is open.

    An open fence is the streaming reply's growing tail: every update parses it again into a
    new block, and Textual highlights each new block's whole code, so a long code block cost
    more with every line (11 ms a frame at 200 lines here). Until its closing fence arrives it
    is shown as plain monospaced text; the block that closes it is highlighted once."""

    drafted_ranges: list[tuple[int, int]] = []

    def __init__(self, markdown: Markdown, token: Token, code: str) -> None:
        self.open = isinstance(markdown, MarkdownSegment) and markdown.fence_is_open(token)
        super().__init__(markdown, token, code)

    def highlight(self, code: str, language: str, ansi: bool = False, dark: bool = False) -> Content:  # type: ignore[override]
        if self.open:
            return Content(code)
        return MarkdownFence.highlight(code, language, ansi=ansi, dark=dark)

    def close(self) -> None:
        """The reply ended inside this block: highlight what there is."""
        if self.open:
            self.open = False
            self.notify_style_update()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.drafted_ranges:
            self.set_content(_stylized(self._highlighted_code, self.drafted_ranges))

    def set_content(self, content: Content) -> None:
        self._highlighted_code = content
        super().set_content(content)

    def _copy_context(self, block: MarkdownBlock) -> None:
        super()._copy_context(block)
        if isinstance(block, TintedFence):
            self.drafted_ranges = block.drafted_ranges
            self.open = block.open


def _stylized(content: Content, ranges: list[tuple[int, int]]) -> Content:
    for a, b in ranges:
        content = content.stylize(DRAFTED_STYLE, a, b)
    return content


class MarkdownSegment(Markdown):
    BLOCKS = {**Markdown.BLOCKS, "fence": TintedFence, "code_block": TintedFence}

    class Placed(Message):
        """A sleeping segment was mounted: the conversation decides whether it wakes."""

    def __init__(self, text: str = "", asleep_height: int | None = None, origin: int = 0, **kwargs) -> None:
        # Asleep from the start: a placeholder height and no parsing until it comes into view.
        super().__init__(None if asleep_height is not None else text, open_links=False, **kwargs)
        self.text = text
        self.final = asleep_height is not None  # no more text will come
        self.asleep = asleep_height is not None
        self.origin = origin  # where its text starts in the whole reply (drafted spans index that)
        self.tint: Spans | None = None  # the reply's drafted spans, while they are shown
        self._parse_base = 0  # the source line the text being parsed starts at
        if asleep_height is not None:
            self.styles.height = asleep_height

    def on_mount(self) -> None:
        if self.asleep:
            self.post_message(self.Placed())

    def on_markdown_link_clicked(self, event: Markdown.LinkClicked) -> None:
        # A link is the model's words: a click opens a web page, never a file or a program
        # (`file:`, a custom scheme the desktop hands to an app); anything else is only shown.
        event.stop()
        href = event.href.strip()
        if urlsplit(href).scheme.lower() in ("http", "https"):
            self.app.open_url(href)
        else:
            self.app.notify(f"not opened (only http and https links open): {controls_shown(href)[:200]}")

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

    def fence_is_open(self, token: Token) -> bool:
        """Whether a fence being parsed still waits for its closing line (only the last block
        of a live segment can)."""
        if token.type != "fence" or token.map is None or self.final:
            return False
        first, end = token.map[0] + self._parse_base, token.map[1] + self._parse_base
        lines = self.source.splitlines()
        if end - first < 2 or end > len(lines):
            return True
        return not lines[end - 1].strip().startswith(token.markup)

    def close_fences(self) -> None:
        for fence in self.query_children(TintedFence):
            fence.close()

    # -- tint --------------------------------------------------------------------------------

    def update(self, markdown: str):
        self._parse_base = 0
        return super().update(markdown)

    def append(self, markdown: str):
        # Markdown.append parses from its last top-level block's line on; the blocks' token
        # maps count from there.
        self._parse_base = self._last_parsed_line
        return super().append(markdown)

    def _parse_markdown(self, tokens: Iterable[Token]) -> Iterable[MarkdownBlock]:
        if not self.tint:
            yield from super()._parse_markdown(tokens)
            return
        source = self.source
        starts = line_starts(source)
        for block in super()._parse_markdown(tokens):
            self._tint(block, source, starts)
            yield block

    def _tint(self, block: MarkdownBlock, source: str, starts: list[int]) -> None:
        if isinstance(block, MarkdownTable):
            return  # cells are drawn from copies of their content: left untinted
        for child in block._blocks:
            self._tint(child, source, starts)
        if isinstance(block, MarkdownFence):
            token = block._token
            if token.map is None:
                return
            # A fenced block's code starts on the line after its opening fence.
            first = token.map[0] + (1 if token.type == "fence" else 0)
            region = self._region(source, starts, first, token.map[1])
            if region is None:
                return
            start, text = region
            ranges = tinted_ranges(block._highlighted_code.plain, text, self.origin + start, self.tint or [])
            if ranges and isinstance(block, TintedFence):
                block.drafted_ranges = ranges
                block.set_content(_stylized(block._highlighted_code, ranges))
            return
        inline = block._inline_token
        if inline is None or inline.map is None:
            return
        region = self._region(source, starts, inline.map[0], inline.map[1])
        if region is None:
            return
        start, text = region
        # Skip the block's markers ("## ", "1. ", "> "): start where its own text starts.
        head = text.find(inline.content.split("\n", 1)[0]) if inline.content else 0
        if head > 0:
            start, text = start + head, text[head:]
        ranges = tinted_ranges(block._content.plain, text, self.origin + start, self.tint or [])
        if ranges:
            block.set_content(_stylized(block._content, ranges))

    def _region(self, source: str, starts: list[int], first: int, last: int) -> tuple[int, str] | None:
        """Source lines [first, last) of the text being parsed: (offset in this segment, text)."""
        first, last = first + self._parse_base, last + self._parse_base
        if first >= len(starts):
            return None
        begin = starts[first]
        end = starts[last] if last < len(starts) else len(source)
        return begin, source[begin:end]

    async def show_tint(self, spans: Spans | None) -> None:
        """Tint on (the reply's spans) or off: an awake segment draws itself again."""
        if spans is self.tint or (not spans and not self.tint):
            self.tint = spans
            return
        self.tint = spans
        if not self.asleep and self.text:
            await self.update(self.text)
