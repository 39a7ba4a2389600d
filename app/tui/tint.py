"""Which rendered characters came from accepted draft tokens. Pure, no Textual.

A reply keeps the spans of its text that were accepted drafts (offsets into the
Markdown source). Markdown rendering drops and changes characters (`**`, list
markers, fence lines, soft breaks), so the view cannot index the rendered text
with source offsets; it aligns each rendered block with its source instead:
rendered text is, nearly, a subsequence of its source, so a greedy forward scan
finds the source offset of each rendered character. A character it cannot place
(an image's icon) is simply left untinted.
"""

from __future__ import annotations

import bisect

Spans = list[list[int]]  # [start, end) offsets into a text, sorted, not touching


def add_span(spans: Spans, start: int, end: int) -> None:
    """Text [start, end) was drafted; text arrives in order, so spans only grow at the end."""
    if end <= start:
        return
    if spans and spans[-1][1] >= start:
        spans[-1][1] = max(spans[-1][1], end)
    else:
        spans.append([start, end])


def align(rendered: str, source: str) -> list[int]:
    """For each rendered character, its offset in `source`, or -1. Whitespace matches any
    whitespace (a soft line break renders as a space)."""
    offsets = []
    j = 0
    for char in rendered:
        space = char.isspace()
        k = j
        while k < len(source) and not (source[k] == char or (space and source[k].isspace())):
            k += 1
        if k < len(source):
            offsets.append(k)
            j = k + 1
        else:
            offsets.append(-1)  # not in the source: keep scanning from where we were
    return offsets


def _drafted(spans: Spans, offset: int) -> bool:
    index = bisect.bisect_right(spans, [offset, float("inf")]) - 1
    return index >= 0 and spans[index][0] <= offset < spans[index][1]


def tinted_ranges(rendered: str, source: str, source_start: int, spans: Spans) -> list[tuple[int, int]]:
    """Ranges of `rendered` to tint: those whose characters sit in drafted spans, where
    `source` begins at `source_start` of the text the spans index."""
    if not spans or not rendered:
        return []
    end = source_start + len(source)
    if spans[-1][1] <= source_start or spans[0][0] >= end:
        return []
    ranges: list[tuple[int, int]] = []
    run_start = -1
    for index, offset in enumerate(align(rendered, source)):
        tinted = offset >= 0 and _drafted(spans, source_start + offset)
        if tinted and run_start < 0:
            run_start = index
        elif not tinted and run_start >= 0:
            ranges.append((run_start, index))
            run_start = -1
    if run_start >= 0:
        ranges.append((run_start, len(rendered)))
    return ranges


def line_starts(text: str) -> list[int]:
    """Offsets where each line of `text` starts (one past the end for a final newline)."""
    starts = [0]
    at = text.find("\n")
    while at != -1:
        starts.append(at + 1)
        at = text.find("\n", at + 1)
    return starts
