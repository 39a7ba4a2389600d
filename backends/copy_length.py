"""How long a copy from the context to draft: the length whose verify pass gives the most
tokens a second, against a plain step. Pure; the in-process engine times the passes, the
prompt lookup asks.

A copy costs what its verify pass costs, and on a CPU that is nearly a token's compute per
token: SmolLM2-135M on two cores, 400 tokens into a reply, a pass of 1 token took 9.8 ms, 2
tokens 17.9, 9 tokens 40.6, 17 tokens 61.4. A wrong 16-token copy there costs six plain
steps; a wrong 1-token copy nearly one. So a copy is drafted only as far as the tokens it is
expected to keep pay for its pass, and not at all where a plain step pays more. On a GPU a
pass of 17 tokens costs about one of 1, and the same rule drafts the whole copy.

What a copy keeps is learned as the reply goes, per token (`CopyOdds`): every token the
reply adds while a copy is followed says whether the copy was right there, drafted or not
(a point-mass draft token is kept exactly when the target picks it, so a copy not drafted
scores the same as one drafted). Copies that have run longer hold longer (a 2-token match
is often a coincidence; 16 tokens in, a copy of a file keeps going), and numbers are where
an edit changes what it copies (`size * 3` made `size * 4`): on SmolLM2's edits a number in
a copy was kept about half the time, any other token 70-95%.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

# A copy's run (tokens it has matched in a row) by the least of each band: odds are learned
# per band, a fresh match apart from a copy well under way.
RUN_BANDS = (0, 4, 8, 16)
ODDS_PRIOR = 0.6  # what a token of a copy is taken to keep before the reply shows otherwise
ODDS_PRIOR_WEIGHT = 4.0  # pseudo-tokens the prior weighs as
# The prompt's own copies (a file that repeats itself, an earlier reply) count, but as at most
# this many tokens a band: a long conversation's thousands must not outweigh the reply's own.
PROMPT_EVIDENCE = 32.0
# A length's own passes weigh as much as the timed table (at the level of all passes seen)
# after this many; older passes fade, as the context deepens and passes cost more.
SEEN_PRIOR = 8.0
FADE = 0.98


def _band(run: int) -> int:
    return sum(run >= least for least in RUN_BANDS) - 1


@dataclass
class CopyOdds:
    """How often the next token of a followed copy is the reply's next token, per run band
    and for numbers apart: counts, with a prior."""

    numeric: Callable[[int], bool] | None = None  # whether a token is a number (None: not told apart)
    hits: dict[tuple[bool, int], float] = field(default_factory=dict)
    trials: dict[tuple[bool, int], float] = field(default_factory=dict)

    def _key(self, run: int, token: int) -> tuple[bool, int]:
        return (bool(self.numeric(token)) if self.numeric is not None else False, _band(run))

    def observe(self, run: int, token: int, kept: bool) -> None:
        """The copy had matched `run` tokens and offered `token` next; the reply `kept` it or not."""
        key = self._key(run, token)
        self.trials[key] = self.trials.get(key, 0.0) + 1.0
        self.hits[key] = self.hits.get(key, 0.0) + (1.0 if kept else 0.0)

    def cap(self, trials: float) -> None:
        """Weigh what was seen so far as at most `trials` tokens a band (the same rate)."""
        for key, seen in self.trials.items():
            if seen > trials:
                self.hits[key] *= trials / seen
                self.trials[key] = trials

    def rate(self, run: int, token: int) -> float:
        key = self._key(run, token)
        return (self.hits.get(key, 0.0) + ODDS_PRIOR_WEIGHT * ODDS_PRIOR) / (
            self.trials.get(key, 0.0) + ODDS_PRIOR_WEIGHT
        )


class PassCosts:
    """Seconds a target pass of n tokens takes here: a table timed when the engine loads
    (lengths between the timed ones interpolated, past the longest extended by its last
    slope), at the level of the passes seen in use, each length moved towards its own passes
    as they add up (a fresh cache times long passes cheaper than a deep one runs them)."""

    def __init__(self, timed: Mapping[int, float]) -> None:
        if not timed or 1 not in timed or timed[1] <= 0:
            raise ValueError("a pass of 1 token must be timed")
        # A longer pass never costs less than a shorter one (a noisy round can say so; a table
        # that fell would make long drafts look free).
        self._timed: list[tuple[int, float]] = []
        for n, seconds in sorted(timed.items()):
            self._timed.append((n, max(seconds, self._timed[-1][1] if self._timed else seconds)))
        self._seen_s: dict[int, float] = {}
        self._seen_n: dict[int, float] = {}
        self._pooled_seen = 0.0
        self._pooled_table = 0.0

    def table(self, n: int) -> float:
        points = self._timed
        for (low, low_s), (high, high_s) in zip(points, points[1:], strict=False):
            if low <= n <= high:
                return low_s + (high_s - low_s) * (n - low) / (high - low)
        if n <= points[0][0]:
            return points[0][1]
        if len(points) == 1:
            return points[0][1] * n
        (low, low_s), (high, high_s) = points[-2], points[-1]
        return high_s + max(high_s - low_s, 0.0) / (high - low) * (n - high)

    def observe(self, n: int, seconds: float) -> None:
        """A pass of n tokens the engine made took `seconds` (its rows' sampling included)."""
        for sums in (self._seen_s, self._seen_n):
            for key in sums:
                sums[key] *= FADE
        self._seen_s[n] = self._seen_s.get(n, 0.0) + seconds
        self._seen_n[n] = self._seen_n.get(n, 0.0) + 1.0
        self._pooled_seen = FADE * self._pooled_seen + seconds
        self._pooled_table = FADE * self._pooled_table + self.table(n)

    def level(self) -> float:
        if self._pooled_table <= 0:
            return 1.0
        return min(max(self._pooled_seen / self._pooled_table, 0.25), 4.0)

    def __call__(self, n: int) -> float:
        prior = self.level() * self.table(n)
        return (self._seen_s.get(n, 0.0) + SEEN_PRIOR * prior) / (self._seen_n.get(n, 0.0) + SEEN_PRIOR)


def best_copy_length(
    copy: Sequence[int], run: int, odds: CopyOdds, costs: Callable[[int], float], shortest: int = 1
) -> int:
    """How many tokens of `copy` (the followed copy's next tokens; it has matched `run` in a
    row) to draft: the length with the most expected tokens a second (the kept drafts and the
    target's own token, over the pass of the draft and the last token), 0 where a plain step
    beats every length of at least `shortest`."""
    best, best_rate = 0, 1.0 / costs(1)
    expected, chain = 1.0, 1.0
    for length, token in enumerate(copy, start=1):
        chain *= odds.rate(run + length - 1, token)
        expected += chain
        rate = expected / costs(length + 1)
        if length >= shortest and rate > best_rate:
            best, best_rate = length, rate
    return best
