"""A tune run from start to saved record, for `dspine tune` and the chat's /tune alike: measure
(app/run/tune.py), refuse to save a run that did not finish, save the pick under its key; and the
chat's once-only offer to tune a model that has no fresh tune yet."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..settings import Settings
from .tune_record import Tune, TuneRecords, tune_key

if TYPE_CHECKING:  # the chat's /tune imports this module: no engine module at its import
    from .engines import ModelFiles

LOCAL_ENGINES = ("server", "inproc")


class TuneStopped(Exception):
    """The user stopped the tune (Esc in the chat) between two runs."""


class TuneUnsteady(UsageError):
    """The speeds wandered too much to choose from, twice: nothing saved. `rows` are the last
    measurement's, for the table the user is shown anyway (what ran, how far apart)."""

    def __init__(self, cause: str, fix: str, rows: list) -> None:
        super().__init__(cause, fix)
        self.rows = rows


# A measurement a load spike disturbed is made again this many times before the tune gives up.
UNSTEADY_RETRIES = 1


@dataclass
class TuneProgress:
    """What a tune tells whoever shows it, from the tune's thread. `stop` set: the tune ends
    before its next run and saves nothing."""

    on_plan: Callable[[int], None] = lambda total: None
    on_start: Callable[[str], None] = lambda what: None  # the run starting, in words
    on_run: Callable[[], None] = lambda: None  # one run done
    on_retry: Callable[[str], None] = lambda why: None  # the speeds wandered (why): measured again
    stop: threading.Event = field(default_factory=threading.Event)
    planned: int = 0
    done: int = 0
    started_at: float = field(default_factory=time.monotonic)

    def seconds_left(self) -> float | None:
        """From the runs done so far (None before the first)."""
        if not self.done or not self.planned:
            return None
        return (time.monotonic() - self.started_at) / self.done * max(self.planned - self.done, 0)


@dataclass
class TuneOutcome:
    tune: Tune
    rows: list  # bench's Row, as measured


@dataclass
class Tuner:
    """`model`: what reopens the chat's model (the name the first screen pulled, or None: the
    one the chat started with)."""

    offer: Callable[[str | None], TuneOffer | None]  # the once-only offer (None: not now, not again)
    run: Callable[[str | None, TuneProgress], TuneOutcome]  # measure and save; UsageError when stopped


def _told(progress: TuneProgress) -> dict[str, Callable]:
    """The tune's hooks that keep `progress` up to date (and stop it between two runs)."""
    from .bench import row_label

    def on_plan(total: int) -> None:
        progress.planned = total
        progress.on_plan(total)

    def on_start(setup, category: str, think: bool) -> None:
        if progress.stop.is_set():
            raise TuneStopped
        progress.on_start(row_label(setup, category, think))

    def on_run(run) -> None:
        progress.done += 1
        progress.on_run()

    return {"on_plan": on_plan, "on_start": on_start, "on_run": on_run}


def tune_and_save(
    files: ModelFiles,
    engine: str,
    settings: Settings,
    progress: TuneProgress | None = None,
    rounds: int | None = None,
    max_tokens: int | None = None,
) -> TuneOutcome:
    """Measure every drafting setup on `engine` and save the pick for this model pair.
    A run stopped part way (Ctrl-C, Esc, `progress.stop`) saves nothing and says so."""
    from backends.threads import SAMPLE_S, LoadWatch

    from .tune import MAX_TOKENS, ROUNDS, measure, unsteady

    progress = progress or TuneProgress()
    if engine not in LOCAL_ENGINES or files.target is None:
        raise UsageError(f"tune measures an engine on this machine, not {engine}", "give --engine server or inproc")

    for attempt in range(UNSTEADY_RETRIES + 1):
        progress.done = 0
        load = LoadWatch(children=True)  # others' load before and while it measures
        load.settle(SAMPLE_S)
        busy_before = load.busy()
        try:
            tuned, rows, ran = measure(
                files, engine, settings, rounds=rounds or ROUNDS, max_tokens=max_tokens or MAX_TOKENS,
                **_told(progress),
            )  # fmt: skip
        except TuneStopped:
            rows, ran = [], progress.done
        if not rows or ran < progress.planned:
            raise UsageError(
                f"the tune was stopped after {ran} of {progress.planned} runs: nothing saved",
                "run `dspine tune` (or /tune in the chat) again",
            )
        wandered = unsteady(rows) or load_came(busy_before, load.busy())
        if wandered is None:
            break
        if attempt < UNSTEADY_RETRIES:
            progress.on_retry(wandered)  # a load spike: measured once more before giving up
            continue
        raise TuneUnsteady(
            f"the speeds wandered too much to choose from, twice ({wandered}): something else kept this "
            "machine busy; nothing saved",
            "run `dspine tune` (or /tune in the chat) again when the machine is quiet",
            rows,
        )
    TuneRecords(settings.tune_file).put(tune_key(engine, files.target, files.drafter), tuned)
    return TuneOutcome(tuned, rows)


def load_came(busy_before: float, busy_during: float) -> str | None:
    """Why a measurement says nothing where another program's load came while it ran (a
    build that started mid-tune): its runs before and after the load are not alike."""
    from backends.threads import disturbed

    if not disturbed(busy_before, busy_during):
        return None
    return f"other programs kept {busy_during:.1f} cores busy while it measured, {busy_before:.1f} before"


@dataclass(frozen=True)
class TuneOffer:
    """The chat's once-only offer to tune: for which model, and why a saved tune is not used."""

    label: str  # the model pair, as the user knows it (a file name: text, never markup)
    stale: str | None  # what changed since the saved tune ("another llama.cpp build"); None: no tune


def offer(files: ModelFiles, engine: str, settings: Settings) -> TuneOffer | None:
    """The chat's offer to tune this model pair on this engine, the first time it runs without a
    fresh tune; None once offered (the tunes file remembers), where a fresh tune exists, or where
    there is nothing to tune (a remote server)."""
    from .drafting_choice import conditions_now

    if engine not in LOCAL_ENGINES or files.target is None:
        return None
    records = TuneRecords(settings.tune_file)
    key = tune_key(engine, files.target, files.drafter)
    saved = records.get(key)
    changed = saved.conditions.changed(conditions_now(engine, files, settings)) if saved is not None else None
    if saved is not None and changed is None:
        return None
    if not records.mark_offered(key):
        return None
    return TuneOffer(files.label, changed)
