"""Asks the user before an edit, a write or a command runs: the diff (or the
command) and keys for yes, no and "always for this chat".

Only a key pressed for the question answers it. A question can appear while the user is
typing a message ("sure, go ahead" would say "always" with its `a`), so the screen takes
no answer until the keyboard has been quiet for `ARM_S` (counted from the last key pressed
anywhere, so a pause mid-sentence is not consent): every key in that time is swallowed and
starts the wait again (the characters typed go back into the message box once the question
is answered). A question longer than its box takes no answer until it has been scrolled to
its end: nothing below the keys line can hide what is asked. The answer keys are shown only
once they work.
"""

from __future__ import annotations

import time

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Static

from ...agent.consent import Decision
from ...terminal_text import controls_shown
from ..plain import joined

ARM_S = 1.5  # quiet keyboard needed before a key answers: longer than a pause mid-sentence
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
    #consent-question { max-height: 6; overflow-y: auto; }
    /* The body scrolls inside what the screen leaves: never taller than the room under the
       question, so its last line and the keys are on screen once it is scrolled to its end. */
    #consent-body { height: auto; max-height: 50vh; }
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
        self.read_to_end = False  # the whole body has been on screen (a long one scrolled through)
        self._quiet = False  # the keyboard has been quiet for arm_s
        self._arming: Timer | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="consent"):
            yield Static(self.question, id="consent-question", markup=False)
            with VerticalScroll(id="consent-body"):
                yield Static(self.body, id="consent-text", markup=False)
            yield Static(self._keys_text(), id="consent-keys")

    def on_mount(self) -> None:
        # The quiet wait counts from the last key pressed anywhere in the app, not from when
        # the question appeared: a question that comes up during a pause in typing still
        # waits for the whole pause (the app keeps `last_key_at`; see ChatApp.on_event).
        last_key = getattr(self.app, "last_key_at", None)
        quiet_for = time.monotonic() - last_key if isinstance(last_key, float) else self.arm_s
        self._arming = self.set_timer(max(self.arm_s - quiet_for, self.arm_s / 2), self._arm)
        body = self.query_one("#consent-body", VerticalScroll)
        self.watch(body, "scroll_y", self._scrolled, init=False)
        self.call_after_refresh(self._scrolled)

    def _scrolled(self, *_: object) -> None:
        body = self.query_one("#consent-body", VerticalScroll)
        if not self.read_to_end and body.size.height and body.scroll_y >= body.max_scroll_y:
            self.read_to_end = True
            self._update_armed()

    def _update_armed(self) -> None:
        self.armed = self._quiet and self.read_to_end
        self.query_one("#consent-keys", Static).update(self._keys_text())

    def _keys_text(self) -> Content:
        if not self.armed:
            if self.swallowed:
                return Content.from_markup(
                    "[i]keys typed while this appeared were ignored: stop typing, then answer[/]"
                )
            if self._quiet and not self.read_to_end:
                return Content.from_markup(
                    "[i]there is more: scroll to the end ([b]↓[/], [b]PgDn[/], [b]End[/]) to answer[/]"
                )
            return Content.from_markup("[i]…[/]")
        keys = Content.from_markup("[b]y[/] yes · [b]n[/] no")
        # The "always" label names an MCP server's tool: the server's words, never markup.
        return keys + joined(Content.from_markup(" · [b]a[/] "), self.always) if self.always else keys

    def _arm(self) -> None:
        self._quiet = True
        self._update_armed()

    def on_key(self, event: events.Key) -> None:
        # Runs before the screen's bindings (a key bubbles up to the app, which checks them):
        # a key before the quiet wait is over is stopped here and never reaches them. Once
        # armed, a key that is neither an answer nor a look around means the user is typing
        # again (a pause mid-sentence): the question waits for quiet once more.
        if self.armed and (event.key in ANSWER_KEYS or event.key in LOOK_KEYS):
            return
        if event.key in LOOK_KEYS:
            return
        self._quiet = False
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
        self._update_armed()

    def action_decide(self, decision: Decision) -> None:
        if not self.armed or (decision == "always" and not self.always):
            return
        self.dismiss(decision)
