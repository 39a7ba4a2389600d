"""Adaptive draft length: from acceptance by draft position and the measured
cost of drafting and verifying, the draft length that gives the most tokens
per second. Pure; the engines feed it and ask it.

Position i of a draft is only tested when all before it were kept, so the
data is conditional: a_i = kept_i / tested_i. A draft of k tokens then yields,
per verify step, 1 + sum_{j<=k} prod_{i<=j} a_i tokens, and costs
k x draft time + verify time of k + 1 tokens.

Verify time is not linear in length: matrix kernels work in tiles, so a pass
of 5 tokens can cost as much as one of 8 and far more than one of 4 (measured
here on CPU: 13.5 ms for 4 tokens, 21.6 ms for 5). Where the engine can time
passes of each length (a table, `verify_s_by_len`), that table decides, scaled
to the verify time seen in real use (deeper context costs more); otherwise a
fixed + per-token line fitted to what was seen.

The table is timed on synthetic passes (a fresh cache, one at a time), so its
level is off (deeper context costs more) and, less, its shape: it has been seen
to overstate long passes against the ones of real replies (9 tokens 1.29x the
cost of 6 in the table, less in use), which keeps the choice short. So the
pass times seen in use set the table's level, pooled over every length seen,
and each length's own passes bend its shape as they add up. Pooled, because one
length's few passes can fall in a burst of load elsewhere: at 8 passes a
length's own time used to replace the table, and such a burst then decided
the choice (seen here: 12-token passes at 1.5x the table's level, their
neighbours at 1.2x). Exploring longer drafts (below) fills in the lengths past
the best.

A drafter may stop short of the length asked: llama-server's probability floor
ends a draft where the drafter grows unsure. Asking for 16 then costs the pass
of the tokens really drafted, far less than a full draft of 16 (the real SmolLM2
pair: priced as full drafts, adaptive drafted 6 where 16 was best, 0.90). So
where an engine reports how many drafts reached each position, a length is
priced at the draft it is expected to make: the continuation rate by position
(reached i / reached i - 1, over the drafts that asked for more than i) gives
the expected tokens drafted, and the pass times (filed by the mean pass really
made) give that pass's cost. Drafts with no floor reach every position asked,
and their lengths are priced as before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

MAX_K = 16
CALIBRATIONS = 3  # verify-time tables taken (one per reply) before the fastest of them is trusted
PRIOR = 2  # pseudo-observations per position, so one lucky step does not decide
# Exploring past the best length: one reply in EXPLORE_EVERY drafts longer (one in
# EXPLORE_EVERY_THIN while the position just past the best has fewer than THIN tests), at
# the longest of the next EXPLORE_REACH lengths predicted at most EXPLORE_LOSS slower than
# the best. So a reply costs at most that much more, on that share of replies.
EXPLORE_EVERY = 8
EXPLORE_EVERY_THIN = 2
THIN = 16
EXPLORE_REACH = 3
EXPLORE_LOSS = 0.2
SEEN_ENOUGH = 8  # verify passes of one length before its mean time is reported (seen())
# A length's own passes weigh as much as the table (at the pooled level) after this many.
SEEN_PRIOR = 32


@dataclass
class ModeStats:
    tested: list[int] = field(default_factory=lambda: [0] * MAX_K)
    kept: list[int] = field(default_factory=lambda: [0] * MAX_K)
    draft_s: float = 0.0  # total drafting time
    drafted: int = 0  # tokens drafted in that time
    verify_s: float = 0.0  # total verify time
    verify_tokens: int = 0  # tokens verified in that time (k + 1 per step)
    steps: int = 0
    replies: int = 0  # replies that drafted (paces exploring past the best length)
    # Verify time seen in use by pass length (index n - 1 for n tokens): each reply's time
    # under the mean pass length of its steps (a reply drafts one length, but its last
    # steps may be shorter).
    seen_s: list[float] = field(default_factory=lambda: [0.0] * (MAX_K + 1))
    seen_steps: list[int] = field(default_factory=lambda: [0] * (MAX_K + 1))
    # Drafts that reached position i (a token drafted there), of those that could: the steps
    # for position 0, the drafts that reached i - 1 after; only from replies that asked for
    # more than i tokens, so a length's own cut is not read as the drafter stopping.
    reached: list[int] = field(default_factory=lambda: [0] * MAX_K)
    reachable: list[int] = field(default_factory=lambda: [0] * MAX_K)

    def add(
        self,
        tested: list[int],
        kept: list[int],
        draft_s: float,
        drafted: int,
        verify_s: float,
        steps: int,
        reached: list[int] | None = None,
        asked: int | None = None,
    ) -> None:
        """One reply's counts and times. `reached` (drafts per position) and `asked` (the
        length the reply asked for): where the engine reports them, how often drafts stop
        short of the length asked."""
        if reached is not None and asked:
            for i in range(min(asked, MAX_K)):
                before = steps if i == 0 else (reached[i - 1] if i - 1 < len(reached) else 0)
                self.reachable[i] += before
                self.reached[i] += min(reached[i] if i < len(reached) else 0, before)
        for i in range(min(MAX_K, len(tested))):
            self.tested[i] += tested[i]
            self.kept[i] += kept[i]
        self.draft_s += draft_s
        self.drafted += drafted
        self.verify_s += verify_s
        self.verify_tokens += drafted + steps
        self.steps += steps
        self.replies += 1
        if steps:
            index = min(max(round((drafted + steps) / steps), 1), len(self.seen_s)) - 1
            self.seen_s[index] += verify_s
            self.seen_steps[index] += steps

    def seen(self) -> dict[int, float]:
        """Mean verify time by pass length, for the lengths seen often enough."""
        return {
            n + 1: total / steps
            for n, (total, steps) in enumerate(zip(self.seen_s, self.seen_steps, strict=True))
            if steps >= SEEN_ENOUGH
        }

    def acceptance(self, prior: float = 0.5) -> list[float]:
        """Conditional acceptance per position, pulled where data is thin towards the
        position before it (the first towards `prior`). Positions never tested so inherit
        the last measured rate: after high acceptance at the lengths used so far, a longer
        draft looks worth trying, so the engine explores it and learns the truth; after
        low acceptance it does not."""
        return _pulled(self.kept, self.tested, prior)

    def continuation(self) -> list[float]:
        """Per position, the share of drafts that go on to it from the one before (the first:
        of the steps), pulled where data is thin towards the position before it (the first
        towards 1: a draft of the length asked). Positions never reachable so inherit the
        last measured rate, as acceptance() does."""
        return _pulled(self.reached, self.reachable, 1.0)


def _pulled(hits: list[int], trials: list[int], prior: float) -> list[float]:
    """Rates by position, each pulled towards the one before it (the first towards `prior`)
    by PRIOR pseudo-trials."""
    rates = []
    for hit, trial in zip(hits, trials, strict=True):
        prior = (hit + PRIOR * prior) / (trial + PRIOR)
        rates.append(prior)
    return rates


def expected_drafted(continuation: list[float], k: int) -> float:
    """Tokens a draft asked for k is expected to hold."""
    return _chained(continuation, k)


def expected_tokens(acceptance: list[float], k: int) -> float:
    """Tokens a verify step of a k-token draft yields: its kept drafts and one of the target's."""
    return 1.0 + _chained(acceptance, k)


def _chained(rates: list[float], k: int) -> float:
    """Expected positions passed, each reached only through all before it."""
    total, chain = 0.0, 1.0
    for rate in rates[:k]:
        chain *= rate
        total += chain
    return total


@dataclass(frozen=True)
class Costs:
    draft_per_token: float
    verify_fixed: float = 0.0  # the part of a verify pass that does not grow with its length
    verify_per_token: float = 0.0
    verify_by_len: tuple[float, ...] = ()  # measured: index n - 1 for a pass of n tokens
    # Tokens a draft asked for k is expected to hold (index k - 1); empty: k, a full draft.
    drafted_by_len: tuple[float, ...] = ()

    def verify(self, n: float) -> float:
        """A pass of n tokens (fractional: a mean over passes of the lengths around it)."""
        if self.verify_by_len and n <= len(self.verify_by_len):
            return _interpolate(self.verify_by_len, n)
        return self.verify_fixed + n * self.verify_per_token

    def drafted(self, k: int) -> float:
        return self.drafted_by_len[k - 1] if k <= len(self.drafted_by_len) else float(k)

    def step(self, k: int) -> float:
        drafted = self.drafted(k)
        return drafted * self.draft_per_token + self.verify(drafted + 1)


def costs_from(
    stats: ModeStats, plain_token_s: float | None = None, verify_s_by_len: list[float] | None = None
) -> Costs | None:
    """Costs from what a mode's replies measured. With a table of pass times by length its
    shape is kept and its level scaled to the verify time seen in use. Without one, verify
    time splits into a fixed part (about a plain decode step: memory-bound on a GPU) and
    a part that grows with length."""
    if not stats.steps or not stats.drafted:
        return None
    per_step = stats.verify_s / stats.steps
    mean_len = stats.verify_tokens / stats.steps
    draft_per_token = stats.draft_s / stats.drafted
    continuation = stats.continuation()
    drafted = tuple(expected_drafted(continuation, k) for k in range(1, MAX_K + 1))
    if verify_s_by_len:
        table = list(verify_s_by_len)
        scale = _pooled_scale(stats, table)
        if scale is None:  # saved before pass times were kept by length
            expected = _interpolate(table, mean_len)
            scale = min(max(per_step / expected, 0.5), 4.0) if expected > 0 else 1.0
            return Costs(draft_per_token, verify_by_len=tuple(t * scale for t in table), drafted_by_len=drafted)
        seen = tuple(_seen_over_table(stats, table, scale))
        return Costs(draft_per_token, verify_by_len=seen, drafted_by_len=drafted)
    fixed = min(plain_token_s or per_step / mean_len, per_step)
    per_token = max(per_step - fixed, 0.0) / max(mean_len - 1, 1)
    return Costs(draft_per_token, fixed, per_token, drafted_by_len=drafted)


def _pooled_scale(stats: ModeStats, table: list[float]) -> float | None:
    """How the passes seen in use compare with the table, all lengths together."""
    seen = total = 0.0
    for n in range(1, len(table) + 1):
        seen += stats.seen_s[n - 1] if n <= len(stats.seen_s) else 0.0
        total += (stats.seen_steps[n - 1] if n <= len(stats.seen_steps) else 0) * table[n - 1]
    return min(max(seen / total, 0.25), 4.0) if seen > 0 and total > 0 else None


def _seen_over_table(stats: ModeStats, table: list[float], scale: float) -> list[float]:
    """Pass times by length: the table at the pooled level, moved towards a length's own
    mean time as its passes add up (SEEN_PRIOR passes weigh as much as the table)."""
    out = []
    for n in range(1, len(table) + 1):
        own_s = stats.seen_s[n - 1] if n <= len(stats.seen_s) else 0.0
        own_steps = stats.seen_steps[n - 1] if n <= len(stats.seen_steps) else 0
        out.append((own_s + SEEN_PRIOR * scale * table[n - 1]) / (own_steps + SEEN_PRIOR))
    return out


def _interpolate(table: Sequence[float], n: float) -> float:
    n = min(max(n, 1.0), float(len(table)))
    low = int(n)
    if low >= len(table):
        return table[-1]
    return table[low - 1] + (n - low) * (table[low] - table[low - 1])


def rates_by_length(acceptance: list[float], costs: Costs, max_k: int = MAX_K) -> dict[int, float]:
    """Predicted tokens per second at each draft length."""
    return {k: expected_tokens(acceptance, k) / costs.step(k) for k in range(1, max_k + 1)}


def best_length(acceptance: list[float], costs: Costs, max_k: int = MAX_K) -> int:
    rates = rates_by_length(acceptance, costs, max_k)
    return max(rates, key=lambda k: (rates[k], -k))


def explore_length(stats: ModeStats, acceptance: list[float], costs: Costs, best: int, max_k: int) -> int:
    """The length for this reply: now and then longer than the best, so the positions past
    it keep being tested and their estimates follow the text (a length never drafted would
    be judged forever on the rate it inherits from the last one tested). Bounded: only on
    some replies (module constants), only lengths predicted close to the best."""
    if best >= max_k:
        return best
    thin = stats.tested[best] < THIN if best < len(stats.tested) else False
    every = EXPLORE_EVERY_THIN if thin else EXPLORE_EVERY
    if stats.replies % every != every - 1:
        return best
    rates = rates_by_length(acceptance, costs, max_k)
    near = [
        k for k in range(best + 1, min(max_k, best + EXPLORE_REACH) + 1) if rates[k] >= (1 - EXPLORE_LOSS) * rates[best]
    ]
    return max(near, default=best)


@dataclass
class AdaptiveDraft:
    """Per think mode: what was learned, and the length to use next."""

    default: int = 4
    max_k: int = MAX_K
    modes: dict[str, ModeStats] = field(default_factory=dict)
    plain_token_s: float | None = None
    verify_s_by_len: list[float] | None = None  # a target pass of n tokens, at index n - 1
    verify_samples: int = 0  # calibrations the table is the fastest of

    def wants_calibration(self) -> bool:
        """Time the passes again? A calibration during a burst of load elsewhere would
        mislead every later choice, so the table is the fastest of a few, taken at the
        start of different replies."""
        return (
            not self.verify_s_by_len or len(self.verify_s_by_len) < self.max_k + 1 or self.verify_samples < CALIBRATIONS
        )

    def calibrated(self, table: list[float]) -> None:
        if self.verify_s_by_len and len(self.verify_s_by_len) == len(table):
            table = [min(old, new) for old, new in zip(self.verify_s_by_len, table, strict=True)]
        else:
            self.verify_samples = 0
        self.verify_s_by_len = table
        self.verify_samples += 1
        self.plain_token_s = table[0]

    def mode(self, think: bool) -> ModeStats:
        return self.modes.setdefault("think" if think else "no_think", ModeStats())

    def learned(self, think: bool) -> int | None:
        """The best length for the mode from what it measured; None before it measured enough."""
        stats = self.mode(think)
        costs = costs_from(stats, self.plain_token_s, self.verify_s_by_len)
        if costs is None or sum(stats.tested) < 8:
            return None
        return best_length(stats.acceptance(), costs, self.max_k)

    def choose(self, think: bool) -> int:
        """The length for the mode's next reply: the best learned, sometimes a longer one
        (explore_length), the default before anything was learned."""
        stats = self.mode(think)
        costs = costs_from(stats, self.plain_token_s, self.verify_s_by_len)
        if costs is None or sum(stats.tested) < 8:
            return self.default
        acceptance = stats.acceptance()
        best = best_length(acceptance, costs, self.max_k)
        return explore_length(stats, acceptance, costs, best, self.max_k)

    def to_json(self) -> dict:
        return {
            "default": self.default,
            "max_k": self.max_k,
            "plain_token_s": self.plain_token_s,
            "verify_s_by_len": self.verify_s_by_len,
            "verify_samples": self.verify_samples,
            "modes": {name: vars(stats) for name, stats in self.modes.items()},
        }

    @classmethod
    def from_json(cls, data: dict) -> AdaptiveDraft:
        learned = cls(
            data.get("default", 4),
            data.get("max_k", MAX_K),
            plain_token_s=data.get("plain_token_s"),
            verify_s_by_len=data.get("verify_s_by_len"),
            verify_samples=data.get("verify_samples", 0),
        )
        for name, raw in data.get("modes", {}).items():
            learned.modes[name] = ModeStats(**raw)
        return learned


class AdaptiveStore:
    """What was learned, per model, between runs (a small JSON file)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self, key: str, default: int) -> AdaptiveDraft:
        try:
            data = json.loads(self.path.read_text())[key]
        except (OSError, ValueError, KeyError):
            return AdaptiveDraft(default=default)
        return AdaptiveDraft.from_json(data)

    def save(self, key: str, learned: AdaptiveDraft) -> None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            data = {}
        data[key] = learned.to_json()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(data))
