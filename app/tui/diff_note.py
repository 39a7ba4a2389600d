"""The note /diff posts: what this chat changed in the project, as a fenced unified diff."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..agent.changes import Change, net_diffs

NO_CHANGES = "no changes in this chat yet"


def diff_note(applied: Iterable[Change]) -> str:
    """Markdown: a ```diff block of every file the chat's applied edits and writes changed
    (from before the first change to now, undone ones left out), or NO_CHANGES."""
    diffs = net_diffs(applied)
    if not diffs:
        return NO_CHANGES
    diff = "".join(diffs)
    # A fence longer than any run of backticks in the diff (a changed Markdown file has them).
    fence = "`" * max([3, *(len(run) + 1 for run in re.findall(r"`{3,}", diff))])
    files = f"{len(diffs)} file" + ("s" if len(diffs) != 1 else "")
    return f"**What this chat changed** ({files})\n\n{fence}diff\n{diff}{fence}\n"
