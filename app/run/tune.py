"""`dspine tune`: on this machine, which drafting setup pays for a model pair. Plain decoding,
n-gram drafts alone, the pair's drafter at a few lengths, and the drafter with n-gram drafts,
on short prompts of every bench category, taking turns as bench's do (app/run/bench.py), so
a slow minute hits them alike. The pick is pure: it never makes new text slower than plain
(the floor below), and it must beat plain by a margin over all categories, edits included."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

from .bench import NGRAM_LABEL, PLAIN, Row, Setup
from .tune_record import Pick

EDIT_CATEGORY = "edit"
# New text must run at least this share of plain's speed: within a CPU's run-to-run noise, and
# the floor the issue set ("speculation must never be slower than plain decoding").
NEW_TEXT_FLOOR = 0.97
# Over all categories a pick must beat plain by this much; less is noise, not a reason to draft.
MARGIN = 1.03
ROUNDS = 2
MAX_TOKENS = 48  # new text: enough for a steady decode speed (the prompt's time is not in it)
# An edit's reply copies the file only after a line or two of its own: at 40 tokens n-gram
# drafts measured 0.97-1.05x plain on bench's edits, at 64 1.17x, at 96 1.18-1.52x (SmolLM2).
EDIT_TOKENS = 96


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


def lengths_to_try(default: int, gpu: bool = True) -> list[int]:
    """With a GPU the kind's own length and a short one (a short draft often pays where a long
    one does not); on a CPU, where a draft model rarely pays at any length, its own only, so
    the tune keeps to about a minute."""
    short = max(2, default // 2)
    return sorted({short, default}) if gpu else [default]


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


def _fastest(found: list[Candidate], rows: list[Row]) -> tuple[Score | None, list[Score]]:
    """Of the candidates measured on these rows, the fastest that drafted, beats plain by
    MARGIN and keeps new text above the floor (None: none does), and every score."""
    scores = [s for c in found if c.setup.drafter != PLAIN for s in [score(c, rows)] if s is not None]
    paying = [s for s in scores if s.qualifies and s.overall >= MARGIN]
    if not paying:
        return None, scores
    # Among those that pay, the fastest; on a tie (within 1%) the one that costs less to run.
    top = max(s.overall for s in paying)
    close = [s for s in paying if s.overall >= top * 0.99]
    return min(close, key=lambda s: (s.candidate.pick.drafter, s.candidate.pick.ngram, -s.overall)), scores


def _copies_within_noise(found: list[Candidate], edit_rows: list[Row]) -> Score | None:
    """Copies alone on edits where nothing beat plain by the margin but copies did not run
    measurably slower (at least NEW_TEXT_FLOOR): kept, as the default without a tune has them.
    A sampled edit follows the file in some replies and not in others (SmolLM2: 0.8x to 2.3x
    plain per reply, six replies), so the tune's few edits cannot tell a copy-heavy turn's
    gain from noise, and copies weighed against this machine's pass costs (in process) cost
    about nothing where they do not pay."""
    for candidate in found:
        if candidate.pick == Pick(drafter=False, ngram=True):
            scored = score(candidate, edit_rows)
            if scored is not None and scored.drafted and scored.overall >= NEW_TEXT_FLOOR:
                return scored
    return None


def _why_not(scores: list[Score]) -> str:
    if not scores:
        return "nothing else was measured"
    best = max(scores, key=lambda s: s.overall)
    return f"{best.candidate.setup.drafter} drafted nothing" if not best.drafted else f"best {describe(best)}"


def choose(found: list[Candidate], rows: list[Row], per_turn: bool = True) -> tuple[Pick, str]:
    """The pick and the sentence that says why, from bench rows of these candidates: for new
    text and for edits apart (a setup may pay on one kind of turn only: copies on an edit),
    then one launch that drafts on the kinds where drafting paid. `per_turn` False: the
    engine cannot switch drafting per request (an upstream llama-server), so one setup for
    every turn, the fastest over all categories whose new text stays above the floor."""
    if not per_turn:
        best, scores = _fastest(found, rows)
        if best is None:
            return Pick(drafter=False, ngram=False), f"plain decoding: no drafting setup pays here ({_why_not(scores)})"
        return best.candidate.pick, f"{label(best.candidate)}: {describe(best)}"
    new_best, new_scores = _fastest(found, [r for r in rows if r.category != EDIT_CATEGORY])
    edit_rows = [r for r in rows if r.category == EDIT_CATEGORY]
    edit_best, _ = _fastest(found, edit_rows) if edit_rows else (None, [])
    kept_copies = _copies_within_noise(found, edit_rows) if edit_best is None and edit_rows else None
    if new_best is None and edit_best is None and kept_copies is not None:
        spread = f"{kept_copies.low:.2f}-{kept_copies.high:.2f}"
        return replace(kept_copies.candidate.pick, new_text=False), (
            f"{label(kept_copies.candidate)} on edits: {kept_copies.overall:.2f}x plain ({spread}), as plain within "
            f"the noise, kept for files given back; plain on new text ({_why_not(new_scores)})"
        )
    if new_best is None and edit_best is None:
        _, scores = _fastest(found, rows)
        return Pick(drafter=False, ngram=False), f"plain decoding: no drafting setup pays here ({_why_not(scores)})"
    if new_best is None:
        assert edit_best is not None
        pick = replace(edit_best.candidate.pick, new_text=False)
        spread = f"{edit_best.low:.2f}-{edit_best.high:.2f}"
        said = f"{label(edit_best.candidate)} on edits: {edit_best.overall:.2f}x plain ({spread})"
        return pick, f"{said}; plain on new text ({_why_not(new_scores)})"
    if edit_best is None or edit_best.candidate == new_best.candidate:
        on_edits = (
            edit_best is not None
            or not edit_rows
            or (kept_copies is not None and kept_copies.candidate == new_best.candidate)
        )
        pick = replace(new_best.candidate.pick, edit=on_edits)
        where = "" if on_edits else " on new text; plain on edits"
        return pick, f"{label(new_best.candidate)}{where}: {describe(new_best)}"
    # Different setups pay on each kind: the one that does better over both.
    overall, _ = _fastest(found, rows)
    best = overall or new_best
    return best.candidate.pick, f"{label(best.candidate)}: {describe(best)}"


# Plain decoding's own runs of one kind of prompt this far apart: the machine was busy with
# something else while the tune measured (a chat's /tune beside a test run read 2.5 and 102.6
# tok/s for one category and saved a "24x" pick); quiet, they stay within about 20%.
UNSTEADY = 2.0
# Plain runs whose slower one still ran this fast (steps under 2 ms: a generated test model) are
# timed at the scheduler's grain, not slowed by load: 823 and 1,748 tok/s are not a busy machine.
TOO_FAST_TO_JUDGE = 500.0


def unsteady(rows: list[Row]) -> str | None:
    """Why these rows cannot be trusted to choose from (None: they can): plain decoding's speed
    on one category ran this far apart between rounds."""
    for row in rows:
        low, high = row.tokens_per_s.get("min", 0.0), row.tokens_per_s.get("max", 0.0)
        if low >= TOO_FAST_TO_JUDGE:
            continue
        if row.drafter == PLAIN and row.runs > 1 and (low <= 0 or high / low > UNSTEADY):
            return f"plain decoding ran {low:.1f} to {high:.1f} tok/s on {row.category}"
    return None


def label(candidate: Candidate) -> str:
    length = f" at {candidate.setup.n_max}" if candidate.pick.drafter and candidate.setup.n_max else ""
    return f"{candidate.setup.drafter}{length}"


def describe(s: Score) -> str:
    edit = f", {s.edit:.2f}x on edits" if s.edit is not None else ""
    return f"{s.overall:.2f}x plain overall ({s.low:.2f}-{s.high:.2f}), {s.new_text:.2f}x on new text{edit}"


def _candidates_for(files, engine: str, on_cpu: bool) -> list[Candidate]:
    """What the tune weighs on this engine: plain, n-gram copies, the drafter at the lengths
    worth trying here, both chained (the in-process engine runs draft models only)."""
    from backends.drafters import KINDS, default_n_max

    drafter = files.drafter
    if (
        drafter is not None
        and engine == "inproc"
        and not (files.drafter_kind in KINDS and KINDS[files.drafter_kind].in_process)
    ):
        drafter = None  # the in-process engine runs draft models only: its candidates are the rest
    lengths = lengths_to_try(default_n_max(files.drafter_kind, unknown=4), gpu=not on_cpu)
    return candidates(drafter.name if drafter is not None else None, lengths)


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

    from backends.server_draft import honoured_by_binary

    from ..fit.hardware import detect
    from .bench import builtin_prompt_files, load_prompts, rotated, run_bench, short_set, summarize
    from .drafting_choice import apply_pick, conditions_now
    from .engines import EngineOptions, llama_server_binary, open_engine
    from .think_default import starting_think
    from .tune_record import Tune

    on_cpu = not detect().gpus
    found = _candidates_for(files, engine, on_cpu)
    by_label = {c.setup.drafter: c for c in found}
    every = load_prompts(builtin_prompt_files())
    prompts = short_set(every)
    per_round = rotated(every, prompts, rounds)  # each round other prompts: see `rotated`
    thinks = [False] if starting_think(None, files.target)[1] else [True, False]

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
        tokens_for=lambda prompt: max(max_tokens, EDIT_TOKENS) if prompt.category == EDIT_CATEGORY else max_tokens,
        round_prompts=per_round,
        presets=files.sampling,
    )
    rows = summarize(runs)
    # Drafting switched per turn needs a per-request length: in process, or dspine's patched server.
    per_turn = engine == "inproc" or (engine == "server" and honoured_by_binary(llama_server_binary(settings)))
    pick, why = choose(found, rows, per_turn)
    when = datetime.now(UTC).isoformat(timespec="seconds")
    tune = Tune(pick, conditions_now(engine, files, settings), why, [r.to_json() for r in rows], when)
    return tune, rows, len(runs)
