"""Asks the user before an edit, a write or a command runs: the diff (or the
command) and keys for yes, no and "always for this chat"."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ...agent.consent import Decision
from ...terminal_text import controls_shown


class ConsentScreen(ModalScreen[Decision]):
    BINDINGS = [
        Binding("y", "decide('yes')", "Yes"),
        Binding("n", "decide('no')", "No"),
        Binding("escape", "decide('no')", "No", show=False),
        Binding("a", "decide('always')", "Always"),
    ]
    DEFAULT_CSS = """
    ConsentScreen { align: center middle; }
    #consent { width: 90%; height: auto; max-height: 90%; border: thick $warning; background: $surface; padding: 0 1; }
    #consent-body { height: auto; max-height: 30; }
    #consent-keys { color: $text-muted; }
    """

    def __init__(self, question: str, body: str, always: str | None) -> None:
        super().__init__()
        # Shown, not stripped: the user judges exactly what would run or be written.
        self.question = controls_shown(question)
        self.body = controls_shown(body)
        self.always = always

    def compose(self) -> ComposeResult:
        keys = "[b]y[/] yes · [b]n[/] no" + (f" · [b]a[/] {self.always}" if self.always else "")
        with Vertical(id="consent"):
            yield Static(self.question, id="consent-question", markup=False)
            with VerticalScroll(id="consent-body"):
                yield Static(self.body, id="consent-text", markup=False)
            yield Static(keys, id="consent-keys")

    def action_decide(self, decision: Decision) -> None:
        if decision == "always" and not self.always:
            return
        self.dismiss(decision)
