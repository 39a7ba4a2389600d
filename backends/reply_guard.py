"""Where a reply ends when the model does not end it: the one home of that policy (issue 68).

Two things stop a reply the model would run to the end of its context: a loop (the same line,
the same few lines, or the same short run of characters, over and over at the end of the
answer) and a cap on the reply's tokens per think mode. Both apply to any engine's stream,
through `guarded`, so the chat, `-p` and `dspine run` stop alike whatever runs the model.

A small model's first reply to "write a python function that reverses a linked list" ran
4,087 tokens, mostly lines of `#`, until the user pressed Esc: nothing noticed the loop.
The thresholds are set so that what a coding answer repeats on purpose (a closing bracket,
a table's rows, a short run of `=`) never reaches them: a real loop repeats hundreds of times."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .events import Delta, End, EndReason, Error, Event, StatsUpdate

# One line over and over, or a cycle of up to MAX_CYCLE lines over and over.
# Code repeats a line on purpose (a 20-row zero matrix, a maze's wall rows): the counts sit well
# above that, and a real loop passes them in a second or two.
LINE_REPEATS = 64  # a line the same this many times in a row
CYCLE_REPEATS = 24  # a cycle of 2..MAX_CYCLE lines repeated this many times in a row
MAX_CYCLE = 8
# Within one line that does not end: a span of up to MAX_SPAN characters repeated to fill RUN_CHARS.
RUN_CHARS = 2000
MAX_SPAN = 60
# Lines kept to look back over: enough for the longest cycle's repeats.
KEPT_LINES = MAX_CYCLE * CYCLE_REPEATS + LINE_REPEATS

# The default cap on a reply's tokens, per think mode (the `max_reply_tokens` setting, 0 = these).
# Claude Code's default output limit is 32,000; Qwen's card asks for 32,768 with thinking. A
# reply is also bounded by the room its context leaves, which is most often smaller.
DEFAULT_CAP = {True: 32768, False: 16384}


@dataclass(frozen=True)
class Loop:
    """What repeated at the end of the answer, one cycle of it, and how many times in a row."""

    span: str
    repeats: int

    def note(self) -> str:
        shown = self.span.strip() or repr(self.span)
        if len(shown) > 40:
            shown = shown[:40] + "…"
        return (
            f"stopped: the reply repeated {shown!r} {self.repeats} times in a row (a loop); "
            "ask again, or in other words"
        )


class LoopWatch:
    """Fed the answer's text as it streams; says when its end has become a loop. Checks at each
    line's end (and every so often inside a line that does not end), so its cost stays small."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._partial = ""
        self._checked_at = 0

    def feed(self, text: str) -> Loop | None:
        found = None
        if "\n" in text:
            parts = (self._partial + text).split("\n")
            self._partial = parts.pop()
        else:
            parts = []
            self._partial += text
            if len(self._partial) > 4 * RUN_CHARS:
                # A line this long is only ever looked at from its end: its start is let go, so
                # a reply of one endless line costs no more per token than any other.
                self._checked_at -= len(self._partial) - 2 * RUN_CHARS
                self._partial = self._partial[-2 * RUN_CHARS :]
        for line in parts:
            self._lines.append(line.rstrip())
            found = found or self._line_loop()
        if len(self._lines) > 2 * KEPT_LINES:
            del self._lines[:-KEPT_LINES]
        if len(self._partial) - self._checked_at >= MAX_SPAN:
            self._checked_at = len(self._partial)
            found = found or run_loop(self._partial)
        if not parts:
            return found
        self._checked_at = 0
        return found

    def _line_loop(self) -> Loop | None:
        lines = self._lines
        for size in range(1, MAX_CYCLE + 1):
            repeats = LINE_REPEATS if size == 1 else CYCLE_REPEATS
            if len(lines) < size * repeats:
                return None
            cycle = lines[-size:]
            if size > 1 and len(set(cycle)) == 1:
                continue  # one line repeated: the size-1 check's
            if all(lines[-(k + 1) * size : len(lines) - k * size] == cycle for k in range(1, repeats)):
                return Loop("\n".join(cycle), repeats)
        return None


def run_loop(line: str) -> Loop | None:
    """A line that ends in one short span over and over for RUN_CHARS characters."""
    if len(line) < RUN_CHARS:
        return None
    tail = line[-RUN_CHARS:]
    for span in range(1, MAX_SPAN + 1):
        if tail[span:] == tail[:-span]:  # periodic with period `span`
            return Loop(tail[-span:], RUN_CHARS // span)
    return None


def without_loop(answer: str) -> str:
    """A reply `guarded` stopped for a loop as the conversation keeps it: the repeats at its end
    folded into one, so the next request does not show the model its own loop to go on with
    (64 lines of `#` in the history prime 64 more) nor spend the context on it."""
    head, _, partial = answer.rpartition("\n")
    raw = head.split("\n") if head else []
    lines = [line.rstrip() for line in raw]  # compared as the watch compares them
    for size in range(1, MAX_CYCLE + 1):
        repeats = LINE_REPEATS if size == 1 else CYCLE_REPEATS
        cycle = lines[-size:]
        if len(lines) < size * repeats or (size > 1 and len(set(cycle)) == 1):
            continue
        seen = 1
        while lines[-(seen + 1) * size : len(lines) - seen * size] == cycle:
            seen += 1
        if seen >= repeats:
            # What came after the last repeat (`partial`) is the loop's next one, cut off.
            return "\n".join(raw[: len(raw) - (seen - 1) * size])
    return answer if run_loop(partial) is None else head + ("\n" if head else "") + _fold_run(partial)


def _fold_run(line: str) -> str:
    """A line that ends in one short span over and over, with the span kept once."""
    loop = run_loop(line)
    assert loop is not None
    span = len(loop.span)
    start = len(line) - RUN_CHARS
    while start >= span and line[start - span : start] == line[start : start + span]:
        start -= span
    return line[: start + span]


def reply_cap(think: bool, setting: int = 0) -> int:
    """The most tokens a reply may run to: the `max_reply_tokens` setting, else the mode's."""
    return setting if setting > 0 else DEFAULT_CAP[think]


def cap_for(think: bool, setting: int, asked: int | None) -> int | None:
    """The cap `guarded` applies: none where the request set its own max_tokens (--max-tokens,
    a fixed sampling's), which the user chose; else `reply_cap`."""
    return None if asked else reply_cap(think, setting)


def guarded(
    events: Iterator[Event], cancel: Callable[[], None], cap: int | None = None, loops: bool = True
) -> Iterator[Event]:
    """An engine's events, until the answer loops (`loops`) or the reply passes `cap` tokens:
    then the engine is cancelled, what it still sends is let go, and the reply ends with
    End("loop") or End("length") and its statistics. Where a request sets its own max_tokens the
    caller gives no cap (`cap_for`): the engine keeps that limit and ends with "length" itself."""
    watch = LoopWatch() if loops else None
    tokens = 0
    stopped = False
    stopped_for: EndReason = "length"
    note = ""
    for event in events:
        if stopped:
            if isinstance(event, End):
                yield End(stopped_for, event.stats, note)
                return
            if isinstance(event, Error):
                yield event
                return
            continue
        if isinstance(event, Delta):
            tokens += 1
            loop = watch.feed(event.text) if watch is not None and event.kind == "answer" else None
            yield event
            if loop is not None or (cap is not None and tokens >= cap):
                stopped = True
                if loop is not None:
                    stopped_for, note = "loop", loop.note()
                else:
                    note = f"stopped at {cap:,} tokens, the reply limit (the max_reply_tokens setting)"
                cancel()
            continue
        if isinstance(event, StatsUpdate):
            tokens = max(tokens, event.stats.generated_tokens)
        yield event
