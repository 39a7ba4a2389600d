"""The chat's earlier prompts, newest first: go back to one, putting back the conversation,
the files this chat changed since, or both (/rewind, Esc Esc)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, ListItem, ListView

from ...terminal_text import controls_shown

What = Literal["both", "conversation", "files"]


@dataclass(frozen=True)
class Prompt:
    id: int  # the user message
    text: str
    files: int  # files the chat changed at or after it


@dataclass(frozen=True)
class Rewind:
    prompt: Prompt
    what: What


class RewindScreen(ModalScreen[Rewind | None]):
    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("enter", "choose('both')", "Both", show=False),
        Binding("b", "choose('both')", "Both"),
        Binding("c", "choose('conversation')", "Conversation"),
        Binding("f", "choose('files')", "Files"),
    ]
    DEFAULT_CSS = """
    RewindScreen { align: center middle; }
    RewindScreen > Vertical { width: 90%; height: 24; border: round $primary; background: $surface; padding: 0 1; }
    RewindScreen ListView { height: 1fr; }
    """

    def __init__(self, prompts: list[Prompt]) -> None:
        super().__init__()
        self.prompts = prompts  # newest first

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(
                "Go back to before a prompt: Enter or b both, c the conversation only, f the files only, Esc closes"
            )
            yield ListView(*(ListItem(Label(self._line(p))) for p in self.prompts), id="prompts")

    @staticmethod
    def _line(prompt: Prompt) -> Text:
        first = controls_shown(prompt.text.strip().splitlines()[0] if prompt.text.strip() else "")
        line = Text(first[:100] + ("…" if len(first) > 100 else ""))
        changed = f"  {prompt.files} file{'s' if prompt.files != 1 else ''} changed since" if prompt.files else ""
        line.append(changed, style="dim")
        return line

    def on_mount(self) -> None:
        view = self.query_one(ListView)
        if self.prompts:
            view.index = 0
        view.focus()

    def action_choose(self, what: What) -> None:
        index = self.query_one(ListView).index
        if index is None or not 0 <= index < len(self.prompts):
            return
        self.dismiss(Rewind(self.prompts[index], what))

    def on_list_view_selected(self, event: ListView.Selected) -> None:
        event.stop()
        self.action_choose("both")

    def action_close(self) -> None:
        self.dismiss(None)
