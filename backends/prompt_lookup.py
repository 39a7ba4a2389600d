"""Prompt lookup: drafts copied from the conversation itself. Pure, no engine.

A coding session's long outputs are mostly copies: an edit repeats `old_text`
from a file already in the context, a rewrite repeats most of the file. When the
last few tokens of the context (the prompt and the reply so far) occurred
before, the tokens that followed them then are a draft that costs nothing to
make. The latest earlier occurrence wins (an edit loop copies what it read last),
and a longer match wins over a shorter one.

The draft is a guess like any other: the engine verifies it by the same exact
rules as a model's draft, with the draft's distribution a point mass on each
drafted token (rejection sampling then keeps x with probability p(x), and draws a
rejection from p with x taken out: the target's distribution, exactly).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LookupSettings:
    # Tokens drafted at most per step: copies run long, and a wrong lookup draft is cut at
    # its first miss, so this is longer than a model drafter's.
    n_max: int = 16
    # The match: the last n tokens, the longest n first. Shorter matches guess more often and
    # worse; 3 is where prompt-lookup decoding starts (transformers' default max is 3 too).
    ngram_max: int = 4
    ngram_min: int = 2
    # A draft shorter than this is not tried: the model drafter (if any) does better on it.
    n_min: int = 2
    # Chained before a model drafter, a match this short is a coincidence more often than a
    # copy (a poem shares "of the" with itself), and the model's draft it would replace is
    # mostly kept: only a longer match goes first there.
    chained_ngram_min: int = 3


class PromptLookup:
    """The conversation's tokens with an index of every n-gram's latest position, kept up
    to date as tokens come (each appended token costs `ngram_max - ngram_min + 1` dict
    writes; a draft, as many lookups)."""

    def __init__(self, settings: LookupSettings, tokens: Sequence[int] = ()) -> None:
        self.settings = settings
        self.tokens: list[int] = []
        # n -> n-gram -> where the tokens after its latest occurrence start
        self._index: dict[int, dict[tuple[int, ...], int]] = {
            n: {} for n in range(settings.ngram_min, settings.ngram_max + 1)
        }
        self._indexed = 0  # n-grams ending before this position are indexed
        # How long the next draft may be: a miss shrinks it to just past what was kept, a draft
        # kept whole doubles it (up to n_max). A copy runs on once it starts, while text that
        # merely shares a few words with the context (a poem) stops paying for 16-token guesses.
        self.length = settings.n_max
        self.extend(tokens)

    def observe(self, drafted: int, kept: int) -> None:
        """How the last draft fared: `kept` of its `drafted` tokens verified."""
        if kept >= drafted:
            self.length = min(self.settings.n_max, max(self.length, drafted) * 2)
        else:
            self.length = max(1, min(self.length, kept + 1))

    def extend(self, tokens: Sequence[int]) -> None:
        self.tokens.extend(int(t) for t in tokens)
        # An n-gram is indexed once a token follows it (a draft needs something to copy), so
        # the one ending at the very end is not: it is what `draft` looks up.
        end = len(self.tokens) - 1
        for stop in range(max(self._indexed, 1), end + 1):
            for n, table in self._index.items():
                if stop >= n:
                    table[tuple(self.tokens[stop - n : stop])] = stop
        self._indexed = max(self._indexed, end + 1)

    def draft(self, room: int, longer_than: int = 0) -> list[int]:
        """Up to `room` (and the settings' n_max) tokens that followed the latest earlier
        occurrence of the context's last n-gram; [] when none occurred or the copy is
        shorter than n_min.

        `longer_than`: the draft length of a model drafter chained behind the lookup. A copy
        then goes first only when it is longer than the model's draft and its match is at
        least `chained_ngram_min` tokens: a short copy would replace a draft of the same length
        that the model mostly gets right (llama-server's chain has the same rule: its n-gram
        n_min is above every model drafter's length)."""
        settings = self.settings
        need = min(longer_than + 1, settings.n_max) if longer_than > 0 else 1
        limit = min(room, settings.n_max, max(self.length, need))
        if limit < need:
            return []
        shortest = settings.ngram_min
        if longer_than > 0:
            shortest = min(settings.ngram_max, max(shortest, settings.chained_ngram_min))
        for n in range(settings.ngram_max, shortest - 1, -1):
            if len(self.tokens) <= n or n not in self._index:
                continue
            start = self._index[n].get(tuple(self.tokens[-n:]))
            if start is None:
                continue
            found = self.tokens[start : start + limit]
            return found if len(found) >= max(min(settings.n_min, limit), need) else []
        return []


def point_masses(draft: Sequence[int], n_vocab: int) -> list[np.ndarray]:
    """The distributions a lookup draft was "drawn" from: all mass on each drafted token."""
    masses = []
    for token in draft:
        q = np.zeros(n_vocab)
        q[int(token)] = 1.0
        masses.append(q)
    return masses
