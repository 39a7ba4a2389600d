"""The acceptance rules of speculative decoding. Pure numpy, no engine.

Greedy: keep the drafted tokens while they equal the target's argmax, then
take the target's own token: the output is exactly plain greedy decoding.
Sampling: rejection sampling (Leviathan et al., Chen et al.): keep drafted
token x with probability min(1, p(x)/q(x)); on the first rejection draw from
the residual max(0, p - q), normalised; if all are kept, draw one more from p.
The result is distributed exactly as sampling from the target alone.

Exactness rests on one rule: the distribution at a position depends on the
logits there and on the tokens generated before it (the presence penalty
reads them). `distribution` is that one function; plain decoding, drafting
and every row of a verify batch call it with the tokens before that row, so
a drafted token accepted earlier in the same batch counts as generated for
the rows after it, exactly as it would have in plain decoding.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .sampling import Sampling


class History:
    """The tokens generated so far in a reply, as a mask over the vocabulary: what the
    presence penalty reads (the whole reply, as the model card and vLLM count it)."""

    def __init__(self, n_vocab: int) -> None:
        self.seen = np.zeros(n_vocab, dtype=bool)

    def add(self, tokens: Sequence[int]) -> None:
        self.seen[list(tokens)] = True

    def after(self, tokens: Sequence[int]) -> np.ndarray:
        """The mask once `tokens` are generated too (without keeping them)."""
        if not len(tokens):
            return self.seen
        mask = self.seen.copy()
        mask[list(tokens)] = True
        return mask


def distribution(logits: np.ndarray, sampling: Sampling, seen: np.ndarray | None = None) -> np.ndarray:
    """The probabilities sampling draws from at one position: presence penalty on the
    tokens generated before it (`seen`, a mask or indices), then temperature (0: the
    argmax), top-k, top-p, min-p."""
    logits = np.asarray(logits)  # float32 from llama.cpp: read, not copied, unless penalised
    if seen is not None and sampling.presence_penalty:
        logits = logits.astype(np.float64)
        logits[seen] -= sampling.presence_penalty
    if sampling.greedy:
        probs = np.zeros(logits.size)
        probs[int(np.argmax(logits))] = 1.0
        return probs
    # Top-k first, on the k best only: sorting the whole vocabulary for top-p cost 3-4 ms a
    # position (49,152 tokens), a third of a small model's step on a CPU and paid again for
    # every drafted position a verify pass checks. Ties at the k-th logit stay in, as before.
    if 0 < sampling.top_k < logits.size:
        cutoff = np.partition(logits, -sampling.top_k)[-sampling.top_k]
        kept = np.flatnonzero(logits >= cutoff)
    else:
        kept = np.arange(logits.size)
    chosen = logits[kept].astype(np.float64) / sampling.temperature
    part = np.exp(chosen - np.max(chosen))
    part /= part.sum()
    if sampling.top_p < 1.0:
        order = np.argsort(-part, kind="stable")
        cumulative = np.cumsum(part[order])
        mask = np.zeros_like(part, dtype=bool)
        mask[order[: int(np.searchsorted(cumulative, sampling.top_p)) + 1]] = True
        part[~mask] = 0.0
    if sampling.min_p > 0:
        part[part < sampling.min_p * part.max()] = 0.0
    probs = np.zeros(logits.size)
    probs[kept] = part / part.sum()
    return probs


def sample(probs: np.ndarray, rng: np.random.Generator) -> int:
    if probs.max() >= 1.0:
        return int(np.argmax(probs))
    return int(rng.choice(probs.size, p=probs))


@dataclass(frozen=True)
class Verdict:
    accepted: int  # how many drafted tokens were kept
    next_token: int  # the target's token after them (a correction, or a bonus when all were kept)


class Lazy(Sequence):
    """A sequence whose items are made when first read: acceptance walks a verify batch from its
    first row and stops at the first rejection, so the rows after it are never worked out (a
    sampled row costs about half a millisecond on a real vocabulary, and a 16-token copy that
    is wrong from its first token would pay 17)."""

    def __init__(self, length: int, make: Callable[[int], Any]) -> None:
        self._length, self._make = length, make
        self._made: dict[int, Any] = {}

    def __len__(self) -> int:
        return self._length

    @property
    def made(self) -> int:
        """How many items were worked out so far."""
        return len(self._made)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(self._length)[index]]
        index = operator.index(index)  # numpy's integers too
        if not -self._length <= index < self._length:
            raise IndexError(index)
        index %= self._length
        if index not in self._made:
            self._made[index] = self._make(index)
        return self._made[index]


def rows_distributions(rows: np.ndarray, sampling: Sampling, history: History, draft: Sequence[int]) -> Lazy:
    """The target's distribution at each row of a verify batch over [last, *draft]: row i
    comes after draft[:i], so those count as generated for it (they are, if it matters).
    Each worked out when first read."""
    return Lazy(len(rows), lambda i: distribution(rows[i], sampling, history.after(draft[:i])))


def argmaxes(probs: Sequence[np.ndarray]) -> Lazy:
    """The greedy token of each distribution, each when first read."""
    return Lazy(len(probs), lambda i: int(np.argmax(probs[i])))


def accept_greedy(draft: Sequence[int], target_choices: Sequence[int]) -> Verdict:
    """`target_choices[i]` is the target's greedy token after the i-th position of
    [last, *draft] (the argmax of its `distribution`, penalties applied)."""
    accepted = 0
    while accepted < len(draft) and int(target_choices[accepted]) == draft[accepted]:
        accepted += 1
    return Verdict(accepted, int(target_choices[accepted]))


def accept_sampled(
    draft: list[int],
    draft_probs: Sequence[np.ndarray] | None,
    target_probs: Sequence[np.ndarray],
    rng: np.random.Generator,
) -> Verdict:
    """`draft_probs[i]` drew draft[i] (None: a copy's point masses, all of q on each drafted
    token); `target_probs` has one more entry than the draft."""
    for i, token in enumerate(draft):
        q = draft_probs[i][token] if draft_probs is not None else 1.0
        if q >= 1.0:
            # A point mass (a copy): the target's token drawn as plain decoding draws it, kept
            # while it is the drafted one. That is the rejection rule's distribution (kept with
            # p(x), else p without x), and the same draws as plain decoding's: with a seed, a
            # reply is the same text with copies drafted or not up to where a verify pass's
            # logits differ from a single step's (llama.cpp runs a batch of one token through
            # another kernel), so copies are timed against plain on much the same texts.
            chosen = sample(target_probs[i], rng)
            if chosen != token:
                return Verdict(i, chosen)
            continue
        assert draft_probs is not None
        if q <= 0 or rng.random() >= min(1.0, target_probs[i][token] / q):
            residual = np.maximum(target_probs[i] - draft_probs[i], 0.0)
            total = residual.sum()
            next_probs = residual / total if total > 0 else target_probs[i]
            return Verdict(i, sample(next_probs, rng))
    return Verdict(len(draft), sample(target_probs[len(draft)], rng))
