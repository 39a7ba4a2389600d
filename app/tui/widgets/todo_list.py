"""The model's todo list, pinned above the input while it has items (app/agent/todos.py):
one line an item with its mark; the one in progress bold, the done ones dim. The items
are the model's words: text, never markup."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from ...agent.todos import MARKS, Todo
from ..plain import plain

STYLES = {"pending": "", "in_progress": "bold", "completed": "dim"}


class TodoList(Static):
    DEFAULT_CSS = """
    TodoList { height: auto; max-height: 8; padding: 0 1; border-left: thick $accent; display: none; }
    """

    def show(self, todos: list[Todo]) -> None:
        self.display = bool(todos)
        lines = [plain(f"{MARKS[t.status]} {t.content}", STYLES[t.status]) for t in todos]
        self.update(Content("\n").join(lines) if lines else "")
