"""Asks the user before an edit, a write or a command runs: the diff (or the
command) and keys for yes, no and "always for this chat".

Only a key pressed for the question answers it. A question can appear while the user is
typing a message ("sure, go ahead" would say "always" with its `a`), so the screen takes
no answer until the keyboard has been quiet for `ARM_S` after it appeared: every key in
that time is swallowed and starts the wait again (the characters typed go back into the
message box once the question is answered), and the answer keys are shown only once they
work.
"""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Static

from ...agent.consent import Decision
from ...terminal_text import controls_shown

ARM_S = 0.8  # quiet keyboard needed before a key answers: longer than the pause between typed keys
ANSWER_KEYS = frozenset({"y", "n", "a", "escape"})
# Keys that look at the question (scroll a long diff) without being typing.
LOOK_KEYS = frozenset({"up", "down", "pageup", "pagedown", "home", "end", "tab", "shift+tab"})


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

    def __init__(self, question: str, body: str, always: str | None, arm_s: float | None = None) -> None:
        super().__init__()
        # Shown, not stripped: the user judges exactly what would run or be written.
        self.question = controls_shown(question)
        self.body = controls_shown(body)
        self.always = always
        self.arm_s = ARM_S if arm_s is None else arm_s
        self.armed = False
        self.swallowed = 0  # keys typed before the question could be answered
        self.typed = ""  # what they wrote: it goes back into the message box (typing loses nothing)
        self._arming: Timer | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="consent"):
            yield Static(self.question, id="consent-question", markup=False)
            with VerticalScroll(id="consent-body"):
                yield Static(self.body, id="consent-text", markup=False)
            yield Static(self._keys_text(), id="consent-keys")

    def on_mount(self) -> None:
        self._arming = self.set_timer(self.arm_s, self._arm)

    def _keys_text(self) -> str:
        if not self.armed:
            if self.swallowed:
                return "[i]keys typed while this appeared were ignored: stop typing, then answer[/]"
            return "[i]…[/]"
        return "[b]y[/] yes · [b]n[/] no" + (f" · [b]a[/] {self.always}" if self.always else "")

    def _arm(self) -> None:
        self.armed = True
        self.query_one("#consent-keys", Static).update(self._keys_text())

    def on_key(self, event: events.Key) -> None:
        # Runs before the screen's bindings (a key bubbles up to the app, which checks them):
        # a key before the quiet wait is over is stopped here and never reaches them. Once
        # armed, a key that is neither an answer nor a look around means the user is typing
        # again (a pause mid-sentence): the question waits for quiet once more.
        if self.armed and (event.key in ANSWER_KEYS or event.key in LOOK_KEYS):
            return
        if event.key in LOOK_KEYS:
            return
        self.armed = False
        event.stop()
        event.prevent_default()
        self.swallowed += 1
        if event.is_printable and event.character:
            self.typed += event.character
        elif event.key == "backspace":
            self.typed = self.typed[:-1]
        if self._arming is not None:
            self._arming.stop()
        self._arming = self.set_timer(self.arm_s, self._arm)
        self.query_one("#consent-keys", Static).update(self._keys_text())

    def action_decide(self, decision: Decision) -> None:
        if not self.armed or (decision == "always" and not self.always):
            return
        self.dismiss(decision)
