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
    tested (every position before it kept). Only engines that see positions fill them in."""
    bars = []
    for tested, kept in zip(stats.position_tested, stats.position_kept, strict=False):
        if not tested:
            break
        bars.append(BARS[round(kept / tested * (len(BARS) - 1))])
    return "".join(bars)


def readout_line(stats: Stats | None) -> str:
    """Speed and acceptance first: they are what a narrow terminal must still show."""
    if stats is None:
        return "waiting for the first token…"
    parts = [f"{stats.tokens_per_s:,.1f} tok/s" if stats.tokens_per_s else "- tok/s"]
    if stats.speculative:
        length = f"{stats.acceptance_length:.2f}" if stats.acceptance_length else "-"
        parts.append(f"accept len {length} · {stats.acceptance_rate:.0%} of {stats.drafted:,} drafted")
        bars = position_bars(stats)
        if bars:
            parts.append(f"by position ▕{bars}▏")
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
    tail = {"cancelled": " · cancelled", "length": " · stopped at the token limit"}.get(reason or "", "")
    return f"{stats.generated_tokens} tokens · " + readout_line(stats) + tail
