"""One message in the conversation: a user prompt, or an assistant reply with
its thinking (collapsible), its streamed Markdown answer and its figures."""

from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Collapsible, Markdown, Static


class MessageView(Vertical):
    DEFAULT_CSS = ""

    def __init__(self, role: str, text: str = "", thinking: str = "", figures: str = "", **kwargs) -> None:
        super().__init__(classes=f"message {role}", **kwargs)
        self.role = role
        self.answer = text
        self.thinking = thinking
        self._figures = figures
        self._stream = None
        self._thinking_stream = None
        self._thinking_started: float | None = None

    def compose(self) -> ComposeResult:
        if self.role == "assistant":
            with Collapsible(title="Thinking", collapsed=bool(self.thinking), classes="thinking") as box:
                box.display = bool(self.thinking)
                yield Markdown(self.thinking, classes="thinking-text")
            yield Markdown(self.answer, classes="answer")
            yield Static(self._figures, classes="figures")
        else:
            yield Static(self.answer, classes="prompt-text", markup=False)

    @property
    def answer_markdown(self) -> Markdown:
        return self.query_one(".answer", Markdown)

    async def add_thinking(self, text: str) -> None:
        box = self.query_one(Collapsible)
        if self._thinking_stream is None:
            self._thinking_started = time.monotonic()
            box.display = True
            box.collapsed = False
            box.title = "Thinking…"
            self._thinking_stream = Markdown.get_stream(self.query_one(".thinking-text", Markdown))
        self.thinking += text
        await self._thinking_stream.write(text)

    async def _close_thinking(self) -> None:
        if self._thinking_stream is not None:
            await self._thinking_stream.stop()
            self._thinking_stream = None
            seconds = time.monotonic() - (self._thinking_started or time.monotonic())
            box = self.query_one(Collapsible)
            box.title = f"Thought for {seconds:.0f} s"
            box.collapsed = True

    async def add_answer(self, text: str) -> None:
        await self._close_thinking()
        if self._stream is None:
            self._stream = Markdown.get_stream(self.answer_markdown)
        self.answer += text
        await self._stream.write(text)

    async def finish(self, figures: str) -> None:
        await self._close_thinking()
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        # No final re-render of the whole reply: Markdown.append re-parses from the last block,
        # so the streamed blocks are the ones a fresh render would give (tested), and a re-render
        # would cost a long reply hundreds of milliseconds just as it ends.
        self.set_figures(figures)

    def set_figures(self, figures: str) -> None:
        self.query_one(".figures", Static).update(figures)
