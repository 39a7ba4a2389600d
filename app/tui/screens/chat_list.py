"""The saved chats: pick one to open, rename or delete it."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, ListItem, ListView

from ...chat.store import Chat, ChatStore
from ...terminal_text import controls_shown


class ChatList(ModalScreen[int | None]):
    """Dismisses with the chosen chat's id, or None."""

    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("r", "rename", "Rename"),
        Binding("d", "delete", "Delete"),
    ]
    DEFAULT_CSS = """
    ChatList { align: center middle; }
    ChatList > Vertical { width: 70; height: 24; border: round $primary; background: $surface; padding: 0 1; }
    ChatList ListView { height: 1fr; }
    ChatList Input { display: none; }
    ChatList Input.renaming { display: block; }
    """

    def __init__(self, store: ChatStore) -> None:
        super().__init__()
        self.store = store
        self.chats: list[Chat] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Chats: Enter opens, r renames, d deletes, Esc closes")
            yield ListView(id="chats")
            yield Input(placeholder="new title, Enter to keep it", id="title")

    def on_mount(self) -> None:
        self._fill()

    def _fill(self, index: int = 0) -> None:
        self.chats = self.store.chats()
        view = self.query_one(ListView)
        view.clear()
        for chat in self.chats:
            # The title is the user's first words and the model a file name: text, never markup
            # (a title such as "fix the [/] tag" is not Rich markup to parse, nor a style to apply).
            line = Text(f"{controls_shown(chat.title)}  ")
            line.append(controls_shown(chat.model), style="dim")
            view.append(ListItem(Label(line)))
        if self.chats:
            view.index = min(index, len(self.chats) - 1)
        view.focus()

    def _selected(self) -> Chat | None:
        index = self.query_one(ListView).index
        return self.chats[index] if index is not None and 0 <= index < len(self.chats) else None

    def on_list_view_selected(self, event: ListView.Selected) -> None:
        chat = self._selected()
        self.dismiss(chat.id if chat else None)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_rename(self) -> None:
        chat = self._selected()
        if chat is None:
            return
        box = self.query_one(Input)
        box.value = chat.title
        box.add_class("renaming")
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        chat = self._selected()
        if chat is not None and event.value.strip():
            self.store.rename(chat.id, event.value.strip())
        event.input.remove_class("renaming")
        self._fill(self.query_one(ListView).index or 0)

    def action_delete(self) -> None:
        chat = self._selected()
        if chat is not None:
            index = self.query_one(ListView).index or 0
            self.store.delete(chat.id)
            self._fill(index)
