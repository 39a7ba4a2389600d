"""The chat's /tune: `dspine tune` without leaving the chat, and its once-only offer.

The chat holds no engine while the tune runs (a 27B and the tune's own engines would not fit one
GPU together): the model closes, the tune measures, the model opens again with what it picked.
What the chat needs comes as callables, so the chat stays free of how engines open. The notes
here are Markdown; every name in them (a model's file name) goes in as a code span or a block,
so it is never markup."""

from __future__ import annotations

from ..run.bench import PLAIN
from ..run.tune import NGRAM_LABEL
from ..run.tune_run import TuneOffer, TuneOutcome, TuneProgress
from ..terminal_text import controls_shown
from .plain import markdown_code


def offer_note(offer: TuneOffer) -> str:
    why = (
        f"The tune for {markdown_code(offer.label)} was measured with {offer.stale}, so it is not used."
        if offer.stale
        else f"{markdown_code(offer.label)} has not been tuned on this machine yet."
    )
    return (
        f"**Which drafting pays here?** {why} `/tune` measures plain decoding, n-gram drafts, the "
        "drafter and both on short prompts, and uses the fastest from then on. The model pauses while "
        "it runs: about a minute for a small model, and **Esc** stops it. `dspine tune` does the same "
        "from the shell. This is said once."
    )


def started_note(label: str) -> str:
    return (
        f"**Tuning {markdown_code(label)}.** The model is closed while the tune measures; it opens "
        "again with what the tune picks. **Esc** stops the tune (nothing is saved then)."
    )


def progress_line(progress: TuneProgress, what: str) -> str:
    left = progress.seconds_left()
    eta = f", about {left:.0f} s left" if left is not None else ""
    total = f" of {progress.planned}" if progress.planned else ""
    return f"tuning: run {progress.done + 1}{total}{eta} · {what}"


def outcome_note(outcome: TuneOutcome) -> str:
    from ..run.bench import cells

    header = ("category", "think", "setup", "n_max", "tok/s", "x plain")
    # The drafter's label is its file name: named once under the table as "drafter", so the
    # setup column stays narrow enough for a 100-column terminal (it pushed the table past 110).
    name = drafter_name(outcome.rows)
    measured = [c[:3] + [short_setup(c[3], name)] + c[4:] for c in map(cells, outcome.rows)]
    # Control characters shown, so no line of a file's name breaks the block.
    rows = [header] + [tuple(controls_shown(c[i]) for i in (0, 2, 3, 4, 5, 6)) for c in measured]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    table = "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    drafter = f"\n\n*drafter* is {markdown_code(name)}." if name else ""
    return (
        f"**Tuned.** Picked {markdown_code(outcome.tune.summary)}; the model opens again with it, and "
        f"chat, run and serve use it from now on (`dspine tune --reset` forgets it).\n\n{_block(table)}{drafter}"
    )


def drafter_name(rows: list) -> str | None:
    """The drafter's file name among the tune's setups (plain, n-gram, NAME, n-gram + NAME)."""
    for row in rows:
        if row.drafter not in (PLAIN, NGRAM_LABEL) and not row.drafter.startswith(f"{NGRAM_LABEL} + "):
            return row.drafter
    return None


def short_setup(setup: str, name: str | None) -> str:
    if name is None:
        return setup
    if setup == name:
        return "drafter"
    return "n-gram + drafter" if setup == f"{NGRAM_LABEL} + {name}" else setup


def failed_note(cause: str, fix: str) -> str:
    said = f"{markdown_code(cause)} {markdown_code(fix)}"
    return f"**The tune did not finish.** {said}\n\nThe model opens again as it was."


def _block(text: str) -> str:
    """`text` as one fenced code block, whatever fences it holds."""
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}text\n{text}\n{fence}"
