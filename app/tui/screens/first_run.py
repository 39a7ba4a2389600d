"""First run: no model on disk. Shows what fits on this GPU and offers to pull
the recommended bundle, with its progress inside the app."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Button, Footer, Label, ProgressBar, Static

from ...errors import ERRORS_FOR_PEOPLE
from ...hub.download import FetchReport
from ...hub.pull import PlannedFile, PullProgress, PullResult
from ...units import format_bytes


@dataclass
class FirstRun:
    """What the screen needs, as callables so the screen stays free of I/O details."""

    name: str  # the bundle to offer
    # What fits here, in words (may be slow: runs in a thread); or (name, words) when the
    # plan changes what is offered (a drafter it drops is not offered).
    describe: Callable[[], str | tuple[str, str]]
    pull: Callable[[PullProgress], PullResult]


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

    def file_end(self, item: PlannedFile, report: FetchReport | None) -> None:
        self.screen.app.call_from_thread(self.screen.set_status, f"verified {item.label}")


class FirstRunScreen(Screen[PullResult | None]):
    DEFAULT_CSS = """
    FirstRunScreen Vertical { padding: 1 2; }
    FirstRunScreen #plan { height: auto; margin: 1 0; }
    FirstRunScreen ProgressBar { margin: 1 0; }
    """

    def __init__(self, first_run: FirstRun) -> None:
        super().__init__()
        self.first_run = first_run
        self._pulling = threading.Event()

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._welcome(self.first_run.name), id="welcome")
            yield Static("Working out what fits on this machine…", id="plan")
            yield Button(f"Pull {self.first_run.name}", id="pull", variant="primary")
            yield ProgressBar(id="progress", show_eta=True)
            yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(ProgressBar).display = False  # shown once a pull starts
        self._describe()

    @staticmethod
    def _welcome(name: str) -> str:
        return f"[b]Welcome to dspine.[/] No model is on disk yet; {name} is the one to start with."

    @work(thread=True)
    def _describe(self) -> None:
        try:
            described = self.first_run.describe()
        except ERRORS_FOR_PEOPLE as exc:
            described = f"{exc.cause}\n{exc.fix}"
        self.app.call_from_thread(self._show_plan, described)

    def _show_plan(self, described: str | tuple[str, str]) -> None:
        if isinstance(described, tuple):
            name, described = described
            self.query_one("#welcome", Label).update(self._welcome(name))
            self.query_one("#pull", Button).label = f"Pull {name}"
        self.query_one("#plan", Static).update(described)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "pull" and not self._pulling.is_set():
            self._pulling.set()
            event.button.disabled = True
            self.query_one(ProgressBar).display = True
            self.set_status("pulling…")
            self._pull()

    @work(thread=True)
    def _pull(self) -> None:
        try:
            result: Any = self.first_run.pull(_ScreenProgress(self))
        except ERRORS_FOR_PEOPLE as exc:
            self.app.call_from_thread(self._failed, f"{exc.cause} · {exc.fix}")
            return
        self.app.call_from_thread(self.dismiss, result)

    def _failed(self, message: str) -> None:
        self.set_status(f"[red]{message}[/]")
        self.query_one("#pull", Button).disabled = False
        self._pulling.clear()

    def set_total(self, total: int) -> None:
        self.query_one(ProgressBar).update(total=max(total, 1))

    def set_done(self, done: int, label: str) -> None:
        self.query_one(ProgressBar).update(progress=done)
        self.set_status(f"{label}: {format_bytes(done)}")

    def set_status(self, text: str) -> None:
        self.query_one("#status", Static).update(text)
