"""Keys typed before the chat's prompt can take them: while `dspine chat` loads its engine the
terminal keeps what the user types, and the screen gets it all at once as it opens, before the
prompt has the focus (the screen focuses the conversation first, which takes no text). Kept
here until the prompt has the focus, then put into it, so nothing typed is lost."""

from __future__ import annotations

from textual import events


class TypeAhead:
    def __init__(self) -> None:
        self._parts: list[str] = []
        self.open = True  # until the prompt first has the focus
        self.enter_pressed = False

    def keep(self, event: events.Event) -> bool:
        """Keep `event`'s text; True if kept (the event goes no further)."""
        if isinstance(event, events.Paste):
            self._parts.append(event.text)
            return True
        if not isinstance(event, events.Key):
            return False
        if event.key in ("enter", "ctrl+j"):
            # The terminal turns Enter into a line feed (Ctrl+J) until the screen takes the
            # keyboard over. Not sent: the user sees the question first, as the screen shows it
            # (a line and an Enter typed ahead for the shell look, from here, like a question).
            self.enter_pressed = True
            self._parts.append("\n")
            return True
        if event.is_printable and event.character is not None:
            self._parts.append(event.character)
            return True
        return False  # a shortcut (Ctrl+Q, Escape): the app's, as always

    def release(self) -> str:
        """What was kept (trailing line ends trimmed); later keys go where the focus is."""
        self.open = False
        text, self._parts = "".join(self._parts), []
        return text.rstrip("\n")
