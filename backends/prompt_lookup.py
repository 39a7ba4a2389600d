"""Prompt lookup: drafts copied from the conversation itself. Pure, no engine.

A coding session's long outputs are mostly copies: an edit repeats `old_text`
from a file already in the context, a rewrite repeats most of the file. When the
last few tokens of the context (the prompt and the reply so far) occurred
before, the tokens that followed them then are a draft that costs nothing to
make. The latest earlier occurrence wins (an edit loop copies what it read last),
and a longer match wins over a shorter one.

Once found, a copy is followed: the lookup keeps its place in the source and
reads on from there, token by token, instead of looking the last n-gram up
afresh each step. Code repeats itself (six near-identical classes): a fresh
lookup of "class Shape" finds the class the reply just wrote, while the place
in the source knows the next one. A token the reply changes (a renamed class, a
2 made a 3) loses the place; the next tokens are looked for a few tokens further
on in the source, and the copy picks up again there.

The draft is a guess like any other: the engine verifies it by the same exact
rules as a model's draft, with the draft's distribution a point mass on each
drafted token (rejection sampling then keeps x with probability p(x), and draws a
rejection from p with x taken out: the target's distribution, exactly).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .copy_length import PROMPT_EVIDENCE, CopyOdds, best_copy_length


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
    # After the reply leaves a copy (a renamed name, a changed number), how far on in the
    # source, and for how many of the reply's tokens, the copy is looked for again: a changed
    # token, one inserted or one dropped. Further on, one token in common is more often a
    # coincidence (a newline, "self") than the copy going on, and picking it up there (with
    # the copy's run, so it drafts long at once) lost to a fresh lookup of a whole n-gram.
    # Measured here (SmolLM2 Q8_0, copies alone; docs/measured.md, session 25): timed, 24
    # sampled texts a prompt (benchmarks/copy_settings_ab.py), edit turn 1.53x plain at 2
    # against 1.14x at 8, rewrite 1.19x against 1.12x; replayed over the same texts
    # (benchmarks/copy_length_replay.py), sampled and greedy, 2 as good or better everywhere.
    resync_window: int = 2
    # Chained, the copy and the model's draft are each judged by the tokens a step keeps (a
    # moving average, this weight on the newest step): a copy goes first only while copies
    # keep at least as many as the model's drafts. Copies not tried are scored for free
    # against the tokens that come (a point-mass draft token is kept exactly when the target
    # picks it, greedy or sampled), so a copy that starts to run is noticed.
    kept_weight: float = 0.5
    # Off: a copy goes first whenever one is found, as long as `length` allows (the tests'
    # eager lookup, so that copies going first are verified on every model family).
    weigh_copies: bool = True
    # A copy the weighing would not draft is drafted anyway, `confirm_length` tokens of it,
    # where the latest earlier occurrence of the context's last `confirm_match` tokens goes on
    # with those same tokens: two ways of finding the copy agree. The odds pool every copy of a
    # run band (a file's own coincidental repeats among them), and on a small file they
    # underrate this one: on bench's edits the weighing drafted 2-3 tokens, or none, of copies
    # that held for 8+. Replayed over three sets of 16 sampled texts (benchmarks/
    # copy_length_replay.py, session 26): bench's edits 1.13-1.30x plain against 1.03-1.11x,
    # the poem +0.03-0.09x, the edit turn, the rewrite and new text unchanged; timed
    # (benchmarks/copy_settings_ab.py --bench-edits), bench's edits 1.11x against 1.04x. 0: off.
    confirm_match: int = 6
    confirm_length: int = 12


class PromptLookup:
    """The conversation's tokens with an index of every n-gram's latest position, kept up
    to date as tokens come (each appended token costs `ngram_max - ngram_min + 1` dict
    writes; a draft, as many lookups)."""

    def __init__(
        self,
        settings: LookupSettings,
        tokens: Sequence[int] = (),
        costs: Callable[[int], float] | None = None,
        numeric: Callable[[int], bool] | None = None,
    ) -> None:
        """`costs`: seconds of a target pass of n tokens here (copy_length.PassCosts). Given
        (and copies weighed), a copy alone is drafted as far as it is expected to pay for its
        pass, or not at all (copy_length); otherwise `length` below decides. `numeric`: whether
        a token is a number (copies change there: their odds are learned apart)."""
        self.settings = settings
        self.costs = costs
        self.odds = CopyOdds(numeric)
        self.tokens: list[int] = []
        # n -> n-gram -> where the tokens after its latest occurrence start (the lookup's lengths,
        # and the confirming match's)
        lengths = {*range(settings.ngram_min, settings.ngram_max + 1), settings.confirm_match} - {0}
        self._index: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in sorted(lengths)}
        # How long the next draft may be: a miss shrinks it to just past what was kept, a draft
        # kept whole doubles it (up to n_max). A copy runs on once it starts, while text that
        # merely shares a few words with the context (a poem) stops paying for 16-token guesses.
        self.length = settings.n_max
        # The copy being followed: where in the tokens the next token is expected, and how
        # many tokens in a row it has been right (the match's length, as a lookup's n).
        self._follow: int | None = None
        self._run = 0
        self._matched = 0  # of the run, the tokens matched since the copy was last (re)found
        # Where a followed copy was left (its source position), the reply's tokens since, and
        # how long the copy had run before.
        self._lost: int | None = None
        self._lost_age = 0
        self._lost_run = 0
        self._lost_matched = 0
        # Tokens kept per step, copies against the model's drafts (chained only); None until
        # the first is seen.
        self.copy_kept: float | None = None
        self.model_kept: float | None = None
        # A copy that was not tried, scored against the tokens as they come.
        self._shadow: list[int] = []
        self._shadow_matched = 0
        self.extend(tokens)
        self.odds.cap(PROMPT_EVIDENCE)

    def observe(self, drafted: int, kept: int) -> None:
        """How the last draft fared: `kept` of its `drafted` tokens verified."""
        self._score_copy(kept)
        if kept >= drafted:
            self.length = min(self.settings.n_max, max(self.length, drafted) * 2)
        else:
            self.length = max(1, min(self.length, kept + 1))

    def observe_model(self, kept: int) -> None:
        """How the chained model drafter's last draft fared: `kept` tokens verified."""
        self.model_kept = self._averaged(self.model_kept, kept)

    def _score_copy(self, kept: int) -> None:
        self.copy_kept = self._averaged(self.copy_kept, kept)

    def _averaged(self, average: float | None, kept: int) -> float:
        return float(kept) if average is None else average + self.settings.kept_weight * (kept - average)

    def _step_shadow(self, token: int) -> None:
        if not self._shadow:
            return
        if self._shadow[self._shadow_matched] == token:
            self._shadow_matched += 1
            if self._shadow_matched < len(self._shadow):
                return
        self._score_copy(self._shadow_matched)
        self._shadow, self._shadow_matched = [], 0

    def extend(self, tokens: Sequence[int]) -> None:
        for token in tokens:
            self._add(int(token))

    def _add(self, token: int) -> None:
        self._step_shadow(token)
        self._step_follow(token)
        self.tokens.append(token)
        # An n-gram is indexed once a token follows it (a draft needs something to copy), so
        # the one ending at the very end is not: it is what a lookup looks up.
        stop = len(self.tokens) - 1
        if stop >= 1:
            for n, table in self._index.items():
                if stop >= n:
                    table[tuple(self.tokens[stop - n : stop])] = stop
        self._find_copy()

    def _step_follow(self, token: int) -> None:
        """Move the followed copy on by one token of the reply (before it is appended)."""
        if self._follow is not None:
            if self._run >= self.settings.ngram_min:
                self.odds.observe(self._run, self.tokens[self._follow], self.tokens[self._follow] == token)
            if self.tokens[self._follow] == token:
                self._follow += 1
                self._run += 1
                self._matched += 1
                return
            self._lost, self._lost_age = self._follow, 0
            self._lost_run, self._lost_matched = self._run, self._matched
            self._follow, self._run, self._matched = None, 0, 0
        if self._lost is None:
            return
        # The reply left the copy at `lost`: a changed token (the copy goes on at lost + 1),
        # inserted ones (at lost) or dropped ones (further on). The nearest place that
        # continues with this token is taken. A copy that had matched at least a full n-gram
        # since it was last found keeps its run (one renamed token does not make a file less of
        # a copy, and a fresh lookup would find the reply's own latest near-repeat); otherwise
        # (a coincidence on a newline, say, after the reply left the copy) a longer lookup match
        # wins over the place found.
        window = self.tokens[self._lost : self._lost + self.settings.resync_window]
        if token in window:
            credit = self._lost_run if self._lost_matched >= self.settings.ngram_max else 0
            self._follow, self._run, self._matched = self._lost + window.index(token) + 1, 1 + credit, 1
            self._lost = None
            return
        self._lost_age += 1
        if self._lost_age >= self.settings.resync_window:
            self._lost = None

    def _find_copy(self) -> None:
        """Look the context's last n-gram up where it is longer than the followed copy's run:
        the longest match wins, the latest occurrence of it."""
        settings = self.settings
        for n in range(settings.ngram_max, max(settings.ngram_min, self._run + 1) - 1, -1):
            if len(self.tokens) <= n:
                continue
            start = self._index[n].get(tuple(self.tokens[-n:]))
            if start is not None:
                self._follow, self._run, self._matched, self._lost = start, n, n, None
                return

    def extension(self, draft: Sequence[int], room: int) -> list[int]:
        """The copy's tokens after a model's `draft`, up to `room` tokens in all, where the copy
        being followed (its match at least `chained_ngram_min` tokens) agrees with every token
        of the draft; [] otherwise."""
        settings = self.settings
        shortest = min(settings.ngram_max, max(settings.ngram_min, settings.chained_ngram_min))
        if self._follow is None or self._run < shortest or not draft:
            return []
        copy = self.tokens[self._follow : self._follow + min(room, settings.n_max)]
        if len(copy) <= len(draft) or copy[: len(draft)] != [int(t) for t in draft]:
            return []
        return copy[len(draft) :]

    def draft(self, room: int, longer_than: int = 0) -> list[int]:
        """Up to `room` (and the settings' n_max) tokens of the copy being followed: those
        after the latest earlier occurrence of the context's last n-gram, or after the place
        a copy in progress has reached; [] when there is none, its match is shorter than
        ngram_min, or the copy is shorter than n_min.

        `longer_than`: the draft length of a model drafter chained behind the lookup. A copy
        then goes first only when it is longer than the model's draft and its match is at
        least `chained_ngram_min` tokens: a short copy would replace a draft of the same length
        that the model mostly gets right (llama-server's chain has the same rule: its n-gram
        n_min is above every model drafter's length); and only while copies have kept at least
        as many tokens a step as the model's drafts (`observe_model`).

        Alone, with the pass costs known (`costs`): as many tokens as pay for their pass
        (copy_length.best_copy_length), none where a plain step pays more."""
        settings = self.settings
        need = min(longer_than + 1, settings.n_max) if longer_than > 0 else 1
        limit = min(room, settings.n_max, max(self.length, need))
        if limit < need or self._follow is None:
            return []
        shortest = settings.ngram_min
        if longer_than > 0:
            shortest = min(settings.ngram_max, max(shortest, settings.chained_ngram_min))
        if self._run < shortest:
            return []
        if longer_than == 0 and settings.weigh_copies and self.costs is not None:
            ahead = self.tokens[self._follow : self._follow + min(room, settings.n_max)]
            worth = best_copy_length(ahead, self._run, self.odds, self.costs, min(settings.n_min, room))
            return ahead[:worth] if worth else self._confirmed(room)
        found = self.tokens[self._follow : self._follow + limit]
        if len(found) < max(min(settings.n_min, limit), need):
            return []
        behind = self.copy_kept is None or self.copy_kept < (self.model_kept or 0.0)
        if longer_than > 0 and settings.weigh_copies and behind:
            # Copies have not yet kept as many tokens a step as the model's drafts here (text
            # the model writes its own way, however like the context it looks): this copy is
            # only scored. The first copy of a reply is scored too: a wrong copy costs a whole
            # verify step, a right one proves itself within a step.
            if not self._shadow:
                self._shadow, self._shadow_matched = found, 0
            return []
        self._shadow, self._shadow_matched = [], 0  # this copy is tried: observe() scores it
        return found

    def _confirmed(self, room: int) -> list[int]:
        """The followed copy's next `confirm_length` tokens where the latest earlier occurrence
        of the last `confirm_match` tokens goes on with the same ones (at least that many); []
        otherwise."""
        n, follow = self.settings.confirm_match, self._follow
        if n == 0 or follow is None or len(self.tokens) <= n:
            return []
        start = self._index[n].get(tuple(self.tokens[-n:]))
        if start is None:
            return []
        copy = self.tokens[start : start + min(room, self.settings.confirm_length, self.settings.n_max)]
        if len(copy) < n or self.tokens[follow : follow + len(copy)] != copy:
            return []
        return copy


def point_masses(draft: Sequence[int], n_vocab: int) -> list[np.ndarray]:
    """The distributions a lookup draft was "drawn" from: all mass on each drafted token."""
    masses = []
    for token in draft:
        q = np.zeros(n_vocab)
        q[int(token)] = 1.0
        masses.append(q)
    return masses
