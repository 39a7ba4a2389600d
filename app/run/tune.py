"""`dspine tune`: on this machine, which drafting setup pays for a model pair. Plain decoding,
n-gram drafts alone, the pair's drafter at a few lengths, and the drafter with n-gram drafts,
on short prompts of every bench category, taking turns as bench's do (app/run/bench.py), so
a slow minute hits them alike. The pick is pure: it never makes new text slower than plain
(the floor below), and it must beat plain by a margin over all categories, edits included."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from .bench import PLAIN, Row, Setup
from .tune_record import Pick

NGRAM_LABEL = "n-gram"
EDIT_CATEGORY = "edit"
# New text must run at least this share of plain's speed: within a CPU's run-to-run noise, and
# the floor the issue set ("speculation must never be slower than plain decoding").
NEW_TEXT_FLOOR = 0.97
# Over all categories a pick must beat plain by this much; less is noise, not a reason to draft.
MARGIN = 1.03
ROUNDS = 2
MAX_TOKENS = 40


@dataclass(frozen=True)
class Candidate:
    setup: Setup  # bench's setup: its label in `drafter`, its draft length
    pick: Pick


def candidates(drafter_name: str | None, lengths: list[int]) -> list[Candidate]:
    """Plain, n-gram alone, and with a drafter each length without and with n-gram drafts."""
    found = [
        Candidate(Setup(PLAIN, None), Pick(drafter=False, ngram=False)),
        Candidate(Setup(NGRAM_LABEL, None), Pick(drafter=False, ngram=True)),
    ]
    if drafter_name is not None:
        for length in lengths:
            found.append(Candidate(Setup(drafter_name, length), Pick(drafter=True, ngram=False, n_max=length)))
            found.append(
                Candidate(
                    Setup(f"{NGRAM_LABEL} + {drafter_name}", length), Pick(drafter=True, ngram=True, n_max=length)
                )
            )
    return found


def lengths_to_try(default: int) -> list[int]:
    """The kind's own length and a short one: on a slow machine a short draft often pays where
    a long one does not."""
    short = max(2, default // 2)
    return sorted({short, default})


@dataclass(frozen=True)
class Score:
    candidate: Candidate
    overall: float  # geometric mean of its speedups over every category and mode
    new_text: float  # median speedup over categories other than edits
    edit: float | None  # its speedup on edits (None: no edit prompt ran)
    drafted: bool  # it drafted something
    low: float
    high: float

    @property
    def qualifies(self) -> bool:
        return self.drafted and self.new_text >= NEW_TEXT_FLOOR


def score(candidate: Candidate, rows: list[Row]) -> Score | None:
    mine = [
        r
        for r in rows
        if r.drafter == candidate.setup.drafter and r.n_max == candidate.setup.n_max and r.speedup is not None
    ]
    if not mine:
        return None
    speedups = [r.speedup for r in mine if r.speedup is not None and r.speedup > 0]
    new = [r.speedup for r in mine if r.category != EDIT_CATEGORY and r.speedup is not None]
    edits = [r.speedup for r in mine if r.category == EDIT_CATEGORY and r.speedup is not None]
    return Score(
        candidate,
        overall=math.exp(statistics.fmean(math.log(s) for s in speedups)) if speedups else 0.0,
        new_text=statistics.median(new) if new else (statistics.median(edits) if edits else 0.0),
        edit=statistics.median(edits) if edits else None,
        drafted=any(r.counts.get("drafted", 0) > 0 for r in mine),
        low=min(speedups) if speedups else 0.0,
        high=max(speedups) if speedups else 0.0,
    )


def choose(found: list[Candidate], rows: list[Row]) -> tuple[Pick, str]:
    """The pick and the sentence that says why, from bench rows of these candidates."""
    scores = [s for c in found if c.setup.drafter != PLAIN for s in [score(c, rows)] if s is not None]
    if not scores:
        return Pick(drafter=False, ngram=False), "plain decoding: nothing else was measured"
    paying = [s for s in scores if s.qualifies and s.overall >= MARGIN]
    if not paying:
        best = max(scores, key=lambda s: s.overall)
        why = f"{best.candidate.setup.drafter} drafted nothing" if not best.drafted else f"best {describe(best)}"
        return Pick(drafter=False, ngram=False), f"plain decoding: no drafting setup pays here ({why})"
    # Among those that pay, the fastest; on a tie (within 1%) the one that costs less to run.
    top = max(s.overall for s in paying)
    close = [s for s in paying if s.overall >= top * 0.99]
    best = min(close, key=lambda s: (s.candidate.pick.drafter, s.candidate.pick.ngram, -s.overall))
    return best.candidate.pick, f"{label(best.candidate)}: {describe(best)}"


def label(candidate: Candidate) -> str:
    length = f" at {candidate.setup.n_max}" if candidate.pick.drafter and candidate.setup.n_max else ""
    return f"{candidate.setup.drafter}{length}"


def describe(s: Score) -> str:
    edit = f", {s.edit:.2f}x on edits" if s.edit is not None else ""
    return f"{s.overall:.2f}x plain overall ({s.low:.2f}-{s.high:.2f}), {s.new_text:.2f}x on new text{edit}"


def measure(
    files,
    engine: str,
    settings,
    rounds: int = ROUNDS,
    max_tokens: int = MAX_TOKENS,
    on_start=None,
    on_run=None,
    on_plan=None,
):
    """Run every candidate on the short bench and pick: the Tune to save (not saved here).
    `on_plan(total_runs)` is told how many runs come, before the first."""
    from datetime import UTC, datetime

    from backends.drafters import KINDS, default_n_max

    from ..fit.hardware import detect
    from .bench import builtin_prompt_files, load_prompts, run_bench, short_set, summarize
    from .drafting_choice import apply_pick, conditions_now
    from .engines import EngineOptions, open_engine
    from .think_default import starting_think
    from .tune_record import Tune

    drafter = files.drafter
    if (
        drafter is not None
        and engine == "inproc"
        and not (files.drafter_kind in KINDS and KINDS[files.drafter_kind].in_process)
    ):
        drafter = None  # the in-process engine runs draft models only: its candidates are the rest
    found = candidates(
        drafter.name if drafter is not None else None, lengths_to_try(default_n_max(files.drafter_kind, unknown=4))
    )
    by_label = {c.setup.drafter: c for c in found}
    prompts = short_set(load_prompts(builtin_prompt_files()))
    thinks = [False] if starting_think(None, files.target)[1] else [True, False]
    on_cpu = not detect().gpus

    def open_for(setup: Setup):
        pick = by_label[setup.drafter].pick
        options = EngineOptions(engine=engine, n_max=pick.n_max, break_even=False, ngram=pick.ngram)  # type: ignore[arg-type]
        return open_engine(apply_pick(files, pick), options, settings)

    if on_plan is not None:
        on_plan(len(found) * len(prompts) * len(thinks) * rounds)
    runs = run_bench(
        open_for,
        [c.setup for c in found],
        prompts,
        thinks,
        rounds,
        max_tokens,
        on_run=on_run,
        on_start=on_start,
        max_open=None if on_cpu else 1,
    )
    rows = summarize(runs)
    pick, why = choose(found, rows)
    tune = Tune(
        pick=pick,
        conditions=conditions_now(engine, files, settings),
        summary=why,
        table=[r.to_json() for r in rows],
        when=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    return tune, rows, len(runs)
