"""A compaction in the conversation: one folded line saying what it kept and gained;
the summary the model now works from is inside, shown on click."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Collapsible, Static

from ...terminal_text import for_terminal
from ..plain import plain


def note_title(before: int, after: int, pruned: int, summarised: int, automatic: bool) -> str:
    how = "compacted automatically" if automatic else "compacted"
    parts = []
    if pruned:
        parts.append(f"{pruned} old tool result{'s' if pruned != 1 else ''} pruned")
    if summarised:
        parts.append(f"{summarised} older message{'s' if summarised != 1 else ''} summarised")
    done = ", ".join(parts) or "nothing changed"
    return (
        f"✂ Context {how}: {before:,} → {after:,} tokens ({done}); "
        "the system prompt, AGENTS.md and the newest turns are kept verbatim"
    )


def saved_note_title(before: int, after: int) -> str:
    """A compaction of a reopened chat: what the saved record tells."""
    return (
        f"✂ Context compacted: {before:,} → {after:,} tokens; "
        "the system prompt, AGENTS.md and the newest turns were kept verbatim"
    )


class CompactionNote(Vertical):
    def __init__(self, title: str, summary: str, **kwargs) -> None:
        super().__init__(classes="message compaction", **kwargs)
        self.title = title
        self.summary = for_terminal(summary)

    def compose(self) -> ComposeResult:
        with Collapsible(title=plain(self.title), collapsed=True):  # type: ignore[arg-type]
            yield Static(self.summary or "(only old tool results were pruned: no summary)", markup=False)
