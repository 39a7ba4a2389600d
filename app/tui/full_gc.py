"""Python's full (oldest-generation) garbage collections, held back while a reply
streams. No Textual.

Measured in the chat (benchmarks/chat_ui.py): a full collection walks every
object the app holds (a long chat: hundreds of thousands) and took 0.1-0.25 s on
this 2-core machine, three or four times per 3,000-token reply. Whatever frame
it fell in was that late: they were the chat's lag spikes. Young collections (a
few milliseconds each) go on as usual, so cycles that die young, most of them,
are still freed; only the full walk waits, and runs once when the reply has
ended. Textual does the same for smooth scrolling (App.PAUSE_GC_ON_SCROLL), but
turns the whole collector off.
"""

from __future__ import annotations

import gc

# Full collections wait for this many young (generation 1) collections: more than
# a reply streams through (about one every 40 ms under load).
HELD_THRESHOLD = 1_000_000


class FullCollections:
    """hold() while a reply streams; release() after it (collects once); both idempotent."""

    def __init__(self) -> None:
        self._saved: tuple[int, int, int] | None = None

    @property
    def held(self) -> bool:
        return self._saved is not None

    def hold(self) -> None:
        if self._saved is not None:
            return
        self._saved = gc.get_threshold()
        young, middle, _ = self._saved
        gc.set_threshold(young, middle, HELD_THRESHOLD)

    def release(self, collect: bool = True) -> None:
        """Back to the thresholds before hold(); `collect`: run the full collection that
        waited (a moment when nothing streams)."""
        if self._saved is None:
            return
        gc.set_threshold(*self._saved)
        self._saved = None
        if collect:
            gc.collect()
