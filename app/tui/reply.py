"""A reply as a model: engine events feed it, the view renders it, the store saves it.

Events arrive on a worker thread, one per token; the screen takes them in
batches (`Batcher`, the one place they are batched), each merged into as few
text runs as possible (`merge_deltas`) so a batch costs one Markdown update per
run. The `Reply` holds what arrived; widgets hold nothing the store reads back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from backends.events import STATS_INTERVAL_S, Delta, End, Error, Event, StatsUpdate, ToolCall
from backends.stats import Stats

from ..terminal_text import for_terminal
from .figures import final_line
from .tint import Spans, add_span

# Hand events to the screen this often, whatever the token rate: each update re-lays out
# the conversation. The engines send statistics at the same pace.
FLUSH_S = STATS_INTERVAL_S


def merge_deltas(events: list[Event]) -> list[Event]:
    """Runs of text of one kind become one delta, whatever statistics arrived between their tokens:
    one Markdown update per batch, not per token. Only the newest statistics are kept, placed before
    the reply's end so the end's own figures win."""
    merged: list[Event] = []
    pieces: list[str] = []
    run_kind: Literal["answer", "thinking"] | None = None
    newest: StatsUpdate | None = None

    def close_run() -> None:
        nonlocal run_kind
        if run_kind is not None:
            merged.append(Delta("".join(pieces), run_kind))
            pieces.clear()
            run_kind = None

    for event in events:
        if isinstance(event, StatsUpdate):
            newest = event
        elif isinstance(event, Delta):
            if run_kind != event.kind:
                close_run()
                run_kind = event.kind
            pieces.append(event.text)
        else:
            close_run()
            if newest is not None:
                merged.append(newest)
                newest = None
            merged.append(event)
    close_run()
    if newest is not None:
        merged.append(newest)
    return merged


class Batcher:
    """Collects events on the worker thread; hands them on at most every `interval`
    seconds, and at once when the reply ends or fails."""

    def __init__(self, deliver: Callable[[list[Event]], None], interval: float = FLUSH_S) -> None:
        self.deliver = deliver
        self.interval = interval
        self._batch: list[Event] = []
        self._flushed = time.monotonic()

    def add(self, event: Event) -> None:
        self._batch.append(event)
        if isinstance(event, (End, Error)) or time.monotonic() - self._flushed >= self.interval:
            self.flush()

    def flush(self) -> None:
        if self._batch:
            batch, self._batch = self._batch, []
            self.deliver(batch)
        self._flushed = time.monotonic()


@dataclass
class Reply:
    """What has arrived of one reply."""

    answer: str = ""
    thinking: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    # Where the text came from accepted draft tokens: [start, end) offsets into answer / thinking.
    answer_drafted: Spans = field(default_factory=list)
    thinking_drafted: Spans = field(default_factory=list)
    stats: Stats | None = None
    end: End | None = None
    error: Error | None = None
    _saved_at: float = field(default=0.0, repr=False)

    def feed(self, events: list[Event]) -> list[Event]:
        """Take a batch of events; return it merged, for the view to draw the same pieces.
        Model text loses terminal escape sequences here, before the view or the store sees it:
        Textual strips a few control codes but passes ESC on to the terminal."""
        events = [replace(e, text=for_terminal(e.text)) if isinstance(e, Delta) else e for e in events]
        self._note_drafted(events)
        merged = merge_deltas(events)
        for event in merged:
            if isinstance(event, Delta):
                if event.kind == "thinking":
                    self.thinking += event.text
                else:
                    self.answer += event.text
            elif isinstance(event, ToolCall):
                self.tool_calls.append(event)
            elif isinstance(event, StatsUpdate):
                self.stats = event.stats
            elif isinstance(event, End):
                self.stats = event.stats
                self.end = event
            elif isinstance(event, Error):
                self.error = event
        return merged

    def _note_drafted(self, events: list[Event]) -> None:
        """Spans from the deltas as they came, before merging joins drafted and own text."""
        ends = {"answer": len(self.answer), "thinking": len(self.thinking)}
        for event in events:
            if isinstance(event, Delta):
                start = ends[event.kind]
                ends[event.kind] += len(event.text)
                if event.drafted:
                    spans = self.thinking_drafted if event.kind == "thinking" else self.answer_drafted
                    add_span(spans, start, ends[event.kind])

    @property
    def drafted(self) -> dict[str, Spans]:
        return {"answer": self.answer_drafted, "thinking": self.thinking_drafted}

    @property
    def complete(self) -> bool:
        return self.end is not None

    @property
    def figures(self) -> str:
        """The line under a finished reply: its figures, or what went wrong."""
        if self.error is not None:
            return f"error: {self.error.message}" + (f" · {self.error.fix}" if self.error.fix else "")
        return final_line(self.stats, self.end.reason) if self.end is not None else ""

    def due_for_save(self, every: float) -> bool:
        """A growing reply is saved at most this often, and always at its end or error."""
        now = time.monotonic()
        if self.complete or self.error is not None or now - self._saved_at >= every:
            self._saved_at = now
            return True
        return False
