"""The prompt: Enter sends, Ctrl+J adds a line, Up/Down walk the history."""

from __future__ import annotations

from textual import events
from textual.message import Message
from textual.widgets import TextArea


class PromptArea(TextArea):
    class Submitted(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, **kwargs) -> None:
        super().__init__(placeholder="Ask about code. Enter sends, Ctrl+J new line, /help", **kwargs)
        self.sent: list[str] = []
        self._cursor = 0

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.prevent_default()
            event.stop()
            text = self.text.strip()
            if text:
                self.sent.append(text)
                self._cursor = len(self.sent)
                self.clear()
                self.post_message(self.Submitted(text))
            return
        if event.key == "ctrl+j":
            event.prevent_default()
            event.stop()
            self.insert("\n")
            return
        if event.key in ("up", "down") and "\n" not in self.text and self.sent:
            event.prevent_default()
            event.stop()
            step = -1 if event.key == "up" else 1
            self._cursor = max(0, min(len(self.sent), self._cursor + step))
            self.load_text(self.sent[self._cursor] if self._cursor < len(self.sent) else "")
            self.move_cursor(self.document.end)
            return
        await super()._on_key(event)
