"""What the readout shows, pure: requests in flight, the last ones done, totals,
and tok/s of each finished request for the sparkline."""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field

from .figures import DONE, QUEUED, RequestFigures


@dataclass
class Totals:
    requests: int = 0
    failed: int = 0
    generated: int = 0
    timed: int = 0  # of those, the tokens of replies whose decode time is known
    decode_s: float = 0.0
    drafted: int = 0
    accepted: int = 0
    verify_steps: int = 0

    @property
    def tokens_per_s(self) -> float | None:
        return self.timed / self.decode_s if self.decode_s > 0 else None

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None

    @property
    def acceptance_length(self) -> float | None:
        return self.generated / self.verify_steps if self.verify_steps and self.drafted else None


@dataclass
class Board:
    keep_done: int = 8
    history: int = 60
    in_flight: dict[int, RequestFigures] = field(default_factory=dict)
    done: deque[RequestFigures] = field(default_factory=deque)
    rates: deque[float] = field(default_factory=deque)
    totals: Totals = field(default_factory=Totals)
    _numbers: itertools.count = field(default_factory=lambda: itertools.count(1))

    def open(self, endpoint: str, client: str, think: bool | None, stream: bool) -> RequestFigures:
        figures = RequestFigures(next(self._numbers), endpoint, client, think, stream)
        self.in_flight[figures.number] = figures
        return figures

    def close(self, figures: RequestFigures) -> None:
        self.in_flight.pop(figures.number, None)
        self.done.appendleft(figures)
        while len(self.done) > self.keep_done:
            self.done.pop()
        totals, stats = self.totals, figures.stats
        totals.requests += 1
        if figures.state != DONE:
            totals.failed += 1
        totals.generated += stats.generated_tokens
        if stats.decode_s > 0:
            totals.timed += stats.generated_tokens
            totals.decode_s += stats.decode_s
        totals.drafted += stats.drafted
        totals.accepted += stats.accepted
        totals.verify_steps += stats.verify_steps
        if stats.tokens_per_s:
            self.rates.append(stats.tokens_per_s)
            while len(self.rates) > self.history:
                self.rates.popleft()

    @property
    def queued(self) -> int:
        return sum(1 for f in self.in_flight.values() if f.state == QUEUED)


BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float]) -> str:
    if not values:
        return ""
    top = max(values) or 1.0
    return "".join(BARS[min(int(v / top * (len(BARS) - 1) + 0.5), len(BARS) - 1)] for v in values)
