"""What an engine streams: text deltas, statistics, the end, or an error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Union

from .stats import Stats


@dataclass(frozen=True)
class Delta:
    text: str
    kind: Literal["answer", "thinking"] = "answer"


@dataclass(frozen=True)
class StatsUpdate:
    stats: Stats


@dataclass(frozen=True)
class End:
    reason: str  # "stop", "length", "cancelled"
    stats: Stats


@dataclass(frozen=True)
class Error:
    message: str
    fix: str = ""


Event = Union[Delta, StatsUpdate, End, Error]
