"""Break-even: per think mode, whether drafting pays, from measured speeds. Pure.

Acceptance alone does not say it: a drafter as slow as its target, a long context
or the wrong drafter for a mode can keep most drafts and still make replies
slower than plain decoding. So each mode compares what its replies measured,
tokens per second while drafting against tokens per second without, and stops
drafting when speculation stays below plain; after a while it tries again (the
context, the load or the mode's text may have changed), waiting twice as long
after each try that did not pay, so the cost of trying is bounded. A reply
without drafts now and then (a probe) keeps the plain figure known.

The user can pin drafting on or off (setting `speculation`: auto, on, off).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

Speculation = Literal["auto", "on", "off"]
SETTINGS: tuple[Speculation, ...] = get_args(Speculation)

MIN_TOKENS = 8  # shorter replies say more about start-up than about speed
SMOOTHING = 0.5  # weight of the newest reply in a rate's running average


@dataclass
class ModeSpeed:
    drafting: float | None = None  # tok/s of recent replies with drafts
    plain: float | None = None  # tok/s of recent replies without
    below: int = 0  # drafting replies in a row slower than plain
    off_left: int = 0  # plain replies still to go before drafting is tried again (0: drafting)
    wait: int = 0  # how long the next switch-off waits (doubles after a try that did not pay)
    since_probe: int = 0  # drafting replies since the last plain one
    retrying: bool = False  # drafting again after a switch-off: one reply decides


def _average(old: float | None, new: float) -> float:
    return new if old is None else (1 - SMOOTHING) * old + SMOOTHING * new


@dataclass
class BreakEven:
    """Per think mode: draft or not for the next reply, and what changed."""

    setting: Speculation = "auto"
    patience: int = 2  # drafting replies before the first plain probe; in a row below plain before it stops
    retry_after: int = 8  # plain replies before the first try again
    max_wait: int = 64  # the longest wait between tries
    probe_every: int = 32  # a plain reply after this many drafting ones keeps the plain figure fresh
    margin: float = 0.02  # drafting must beat plain by this share to count as paying
    # What it switches, in the words its sentences use ("n-gram drafting" for the copies'
    # judge, whose "plain" is the replies without copies).
    what: str = "speculation"
    modes: dict[str, ModeSpeed] = field(default_factory=dict)

    def mode(self, think: bool) -> ModeSpeed:
        return self.modes.setdefault("think" if think else "no_think", ModeSpeed(wait=self.retry_after))

    def drafting(self, think: bool) -> bool:
        """Draft for this mode's next reply?"""
        if self.setting != "auto":
            return self.setting == "on"
        speed = self.mode(think)
        if speed.off_left > 0:
            return False
        # After `patience` drafting replies with nothing to compare them with, or with a stale
        # plain figure: one reply without drafts.
        due = self.patience if speed.plain is None else self.probe_every
        return speed.since_probe < due

    def observed(self, think: bool, drafted: bool, tokens: int, seconds: float) -> str | None:
        """A finished reply's speed; returns a sentence when drafting turns off or back on.
        `drafted`: the drafter was asked to draft for this reply, whatever it drafted (one
        that drafts nothing still costs its passes: that reply is drafting, and slow)."""
        if self.setting != "auto" or tokens < MIN_TOKENS or seconds <= 0:
            return None
        speed = self.mode(think)
        rate = tokens / seconds
        label = "think" if think else "no-think"
        if not drafted:
            speed.plain = _average(speed.plain, rate)
            speed.since_probe = 0
            if speed.off_left > 0:
                speed.off_left -= 1
                if speed.off_left == 0:
                    speed.retrying = True
                return None
            if speed.drafting is not None and speed.drafting < speed.plain * (1 + self.margin):
                # a probe: the drafting replies before it (an average of several) ran below it
                return self._switch_off(speed, label)
            return None
        speed.drafting = _average(speed.drafting if not speed.retrying else None, rate)
        speed.since_probe += 1
        if speed.plain is None:
            return None
        pays = speed.drafting >= speed.plain * (1 + self.margin)
        figures = f"{speed.drafting:.1f} tok/s drafting, {speed.plain:.1f} plain"
        if speed.retrying:
            speed.retrying = False
            if pays:
                speed.below = 0
                speed.wait = self.retry_after
                return f"{self.what} back on for {label} mode: it pays again ({figures})"
            speed.wait = min(speed.wait * 2, self.max_wait)
            speed.off_left = speed.wait
            return f"{self.what} stays off for {label} mode ({figures}); trying again after {speed.wait} replies"
        speed.below = 0 if pays else speed.below + 1
        if speed.below >= self.patience:
            return self._switch_off(speed, label)
        return None

    def _switch_off(self, speed: ModeSpeed, label: str) -> str:
        speed.below = 0
        speed.off_left = speed.wait
        return (
            f"{self.what} off for {label} mode: slower than plain decoding "
            f"({speed.drafting or 0:.1f} tok/s drafting, {speed.plain or 0:.1f} plain); "
            f"trying again after {speed.wait} replies"
        )

    def note(self, think: bool) -> str | None:
        """What a readout says about this mode while drafting is pinned or off; None while on."""
        if self.setting != "auto":
            return f"{self.what} pinned {self.setting}"
        speed = self.mode(think)
        if speed.off_left > 0:
            figures = f"{speed.drafting or 0:.1f} tok/s drafting, {speed.plain or 0:.1f} plain"
            return f"drafter off: slower than plain here ({figures}); trying again in {speed.off_left} replies"
        return None


def reply_note(
    drafter: BreakEven | None,
    copies: BreakEven | None,
    think: bool,
    tokens: int,
    seconds: float,
    drafter_asked: bool,
    copies_used: bool | None,
    disturbed: bool = False,
) -> str | None:
    """A finished reply told to both judges (the model drafter's, the copies'); what the readout
    says about drafting, or None. Both engines ask this: one wording, one order.
    `copies_used`: the reply looked copies up (None: the copies' judge does not judge it).
    `disturbed`: another program's load came while it ran (backends/threads.py): its speed is
    the load's, not drafting's, so neither judge hears of it and drafting is not switched off."""
    if disturbed:
        return "a load came while this reply ran: not counted for drafting"
    notes = []
    if drafter is not None:
        notes.append(drafter.observed(think, drafter_asked, tokens, seconds) or drafter.note(think))
    if copies is not None and copies_used is not None:
        notes.append(copies.observed(think, copies_used, tokens, seconds))
    return "; ".join(n for n in notes if n) or None
