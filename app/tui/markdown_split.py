"""Where a growing Markdown text can be cut into independent pieces.

The chat keeps a long reply as segments of a few dozen lines so that finished
segments can leave the layout (see widgets/markdown_segment.py). A cut is safe
where rendering the two sides apart gives what rendering them together would:
after a blank line, outside a code fence, before a line that starts a new
block at the margin, and never between the items of one list (that would
restart its numbering and spacing). Pure functions, no Textual.
"""

from __future__ import annotations

import re

from .tint import line_starts

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CONTINUES = re.compile(r"^(\s|[-*+](\s|$)|\d{1,9}[.)](\s|$))")  # indented (a list's paragraph, code) or a list item


def split_point(text: str, min_lines: int) -> int | None:
    """The first safe cut with at least `min_lines` lines before it; None if there is
    none yet. The line after the cut must have begun
    be whole: its start decides whether it begins a new block, and "3" may yet become "3. "."""
    fence: str | None = None
    previous_blank = False
    for number, start in enumerate(line_starts(text)):
        if start >= len(text):
            return None
        end = text.find("\n", start)
        if end == -1:
            return None
        line = text[start:end]
        if fence is None and previous_blank and number >= min_lines and line.strip() and not _CONTINUES.match(line):
            return start
        opened = _FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)[0] * len(opened.group(1))
        elif fence is not None and line.strip().startswith(fence) and not line.strip().strip(fence[0]):
            fence = None
        previous_blank = not line.strip()
    return None


def split_all(text: str, min_lines: int) -> list[str]:
    """A finished text as segments of at least `min_lines` lines (the last may be shorter)."""
    pieces: list[str] = []
    while True:
        cut = split_point(text, min_lines)
        if cut is None:
            return pieces + [text] if text or not pieces else pieces
        pieces.append(text[:cut])
        text = text[cut:]
