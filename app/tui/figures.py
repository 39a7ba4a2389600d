"""What the chat shows of a reply's statistics, as short text. Pure."""

from __future__ import annotations

from backends.stats import Stats


def stats_from(data: dict | None) -> Stats | None:
    if not data:
        return None
    fields = Stats.__dataclass_fields__
    return Stats(**{k: v for k, v in data.items() if k in fields})


BARS = "▁▂▃▄▅▆▇█"  # the lowest still shows: a position tested and never kept


def position_bars(stats: Stats) -> str:
    """Acceptance by draft position, a bar each: how often position i was kept when it was
    tested (every position before it kept). Only engines that see positions fill them in.
    With n-gram drafts chained first, these are the model drafter's (the rest of the counts)."""
    tested, kept = stats.position_tested, stats.position_kept
    if stats.ngram_drafted:
        tested = [t - n for t, n in zip(tested, _padded(stats.ngram_position_tested, len(tested)), strict=True)]
        kept = [k - n for k, n in zip(kept, _padded(stats.ngram_position_kept, len(kept)), strict=True)]
    return _bars(tested, kept)


def ngram_bars(stats: Stats) -> str:
    """The same for the steps whose draft was copied from the context (n-gram drafts)."""
    return _bars(stats.ngram_position_tested, stats.ngram_position_kept)


def _padded(counts: list[int], length: int) -> list[int]:
    return counts[:length] + [0] * max(0, length - len(counts))


def _bars(tested_counts: list[int], kept_counts: list[int]) -> str:
    bars = []
    for tested, kept in zip(tested_counts, kept_counts, strict=False):
        if tested <= 0:
            break
        bars.append(BARS[round(min(max(kept, 0) / tested, 1.0) * (len(BARS) - 1))])
    return "".join(bars)


def ngram_part(stats: Stats) -> str | None:
    """Which drafter the kept tokens came from, when n-gram drafts are chained first."""
    if not stats.ngram_drafted:
        return None
    model = stats.accepted - stats.ngram_accepted
    part = f"kept {stats.ngram_accepted:,} copied + {model:,} drafted"
    bars = ngram_bars(stats)
    return part + (f" · copies by position ▕{bars}▏" if bars else "")


def readout_line(stats: Stats | None) -> str:
    """Speed and acceptance first: they are what a narrow terminal must still show."""
    if stats is None:
        return "waiting for the first token…"
    parts = [f"{stats.tokens_per_s:,.1f} tok/s" if stats.tokens_per_s else "- tok/s"]
    if stats.speculative:
        length = f"{stats.acceptance_length:.2f}" if stats.acceptance_length else "-"
        parts.append(f"accept len {length} · {stats.acceptance_rate:.0%} of {stats.drafted:,} drafted")
        copied = ngram_part(stats)
        if copied:
            parts.append(copied)
        bars = position_bars(stats)
        if bars:
            parts.append(f"by position ▕{bars}▏")
    elif stats.draft_asked:
        parts.append("drafted nothing")  # asked, and paid for, but nothing cleared the drafter's floor
    elif stats.copies_asked:
        parts.append("no copies to draft")  # n-gram drafting on; nothing in the context to copy yet
    elif stats.plain_turn:
        parts.append(f"no drafting on {stats.plain_turn} here")  # this kind of turn: plain, by choice
    elif not stats.draft_note:
        parts.append("no drafter")
    if stats.draft_note:
        parts.append(stats.draft_note)  # drafting turned off or back on, or pinned (backends/break_even.py)
    if stats.ttft_s is not None:
        parts.append(f"TTFT {stats.ttft_s:.2f} s")
    if stats.prompt_tokens_per_s:
        parts.append(f"prompt {stats.prompt_tokens_per_s:,.0f} tok/s")
    return " · ".join(parts)


def final_line(stats: Stats | None, reason: str | None) -> str:
    if stats is None:
        return ""
    tail = {
        "cancelled": " · cancelled",
        "length": " · stopped at the token limit",
        "loop": " · stopped: it looped",
    }.get(reason or "", "")
    return f"{stats.generated_tokens} tokens · " + readout_line(stats) + tail
