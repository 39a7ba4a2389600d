"""One message in the conversation: a user prompt, or an assistant reply with
its thinking (collapsible), its streamed Markdown answer and its figures."""

from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Collapsible, Static

from ...terminal_text import for_terminal
from ..tint import Spans
from .streamed_markdown import StreamedMarkdown


class MessageView(Vertical):
    DEFAULT_CSS = ""

    def __init__(
        self,
        role: str,
        text: str = "",
        thinking: str = "",
        figures: str = "",
        live: bool = False,
        drafted: dict[str, Spans] | None = None,
        tinted: bool = False,
        **kwargs,
    ) -> None:
        """`live`: a reply about to stream; otherwise a finished message, whose text is
        drawn only as it comes into view. `drafted`: the spans of accepted draft text per
        "answer" / "thinking" (the Reply's, or the store's); `tinted`: draw them tinted."""
        super().__init__(classes=f"message {role}", **kwargs)
        self.role = role
        # Stored text may predate the Reply's cleaning: no escape sequence reaches the terminal.
        self.answer = for_terminal(text)
        self.thinking = for_terminal(thinking)
        self.drafted: dict[str, Spans] = drafted if drafted is not None else {"answer": [], "thinking": []}
        self.tinted = tinted
        self.live = live
        self._figures = figures
        self._thinking_live = False
        self._thinking_started = 0.0
        self._parked: dict | None = None  # children's display while parked

    def compose(self) -> ComposeResult:
        if self.role == "assistant":
            with Collapsible(title="Thinking", collapsed=bool(self.thinking), classes="thinking") as box:
                box.display = bool(self.thinking)
                yield StreamedMarkdown(
                    self.thinking, asleep=not self.live, tint=self._tint("thinking"), classes="thinking-text"
                )
            yield StreamedMarkdown(self.answer, asleep=not self.live, tint=self._tint("answer"), classes="answer")
            yield Static(self._figures, classes="figures", markup=False)
        else:
            yield Static(self.answer, classes="prompt-text", markup=False)

    def _tint(self, kind: str) -> Spans | None:
        return self.drafted.setdefault(kind, []) if self.tinted else None

    async def show_tint(self, on: bool) -> None:
        """Tint the text that came from accepted drafts, or stop."""
        self.tinted = on
        if self.role == "assistant":
            await self.query_one(".thinking-text", StreamedMarkdown).show_tint(self._tint("thinking"))
            await self.answer_markdown.show_tint(self._tint("answer"))

    @property
    def parked(self) -> bool:
        return self._parked is not None

    def park(self) -> None:
        """Far from the viewport: keep the height, take the children out of the layout
        (every layout places every displayed widget; a long chat has thousands)."""
        if self._parked is not None or self.live or not self.outer_size.height:
            return
        self.styles.height = self.outer_size.height
        self._parked = {child: child.display for child in self.children}
        for child in self._parked:
            child.display = False

    def unpark(self) -> None:
        if self._parked is None:
            return
        for child, display in self._parked.items():
            child.display = display
        self._parked = None
        self.styles.height = "auto"

    @property
    def answer_markdown(self) -> StreamedMarkdown:
        return self.query_one(".answer", StreamedMarkdown)

    async def add_thinking(self, text: str) -> None:
        box = self.query_one(Collapsible)
        if not self._thinking_live:
            self._thinking_live = True
            self._thinking_started = time.monotonic()
            box.display = True
            box.collapsed = False
            box.title = "Thinking…"
        self.thinking += text
        await self.query_one(".thinking-text", StreamedMarkdown).write(text)

    async def _close_thinking(self) -> None:
        if self._thinking_live:
            self._thinking_live = False
            await self.query_one(".thinking-text", StreamedMarkdown).finish()
            box = self.query_one(Collapsible)
            box.title = f"Thought for {time.monotonic() - self._thinking_started:.0f} s"
            box.collapsed = True

    async def add_answer(self, text: str) -> None:
        await self._close_thinking()
        self.answer += text
        await self.answer_markdown.write(text)

    async def finish(self, figures: str) -> None:
        await self._close_thinking()
        # No final re-render of the whole reply: Markdown.append re-parses from the last block,
        # so the streamed blocks are the ones a fresh render would give (tested), and a re-render
        # would cost a long reply hundreds of milliseconds just as it ends.
        await self.answer_markdown.finish()
        self.set_figures(figures)
        self.live = False

    def set_figures(self, figures: str) -> None:
        self._figures = figures
        self.query_one(".figures", Static).update(figures)
