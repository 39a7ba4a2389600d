"""`dspine tune`: which drafting pays on this machine, measured and saved."""

from __future__ import annotations

import shlex

import typer
from rich.table import Table
from rich.text import Text

from ..choices import (
    LocalEngine,
)
from ..errors import UsageError
from ..models.catalog import load_catalog
from ..settings import load_settings
from ..terminal_text import controls_shown
from .base import (
    MODEL_HELP,
    ModelOption,
    _one_model,
    app,
    err,
    out,
)


@app.command()
def tune(
    model: str | None = typer.Argument(None, help=MODEL_HELP),
    model_option: ModelOption = None,
    engine: LocalEngine | None = typer.Option(
        None, "--engine", "-e", help="server or inproc. Default: the `engine` setting (auto: the one chat uses)."
    ),
    show: bool = typer.Option(False, "--show", help="Print the saved tune (and whether it is stale); measure nothing."),
    reset: bool = typer.Option(False, "--reset", help="Forget the saved tune: back to the default."),
    rounds: int = typer.Option(2, "--rounds", help="Each setup runs each prompt once a round, in turns."),
    max_tokens: int = typer.Option(
        48, "--max-tokens", "-n", help="Tokens generated per prompt of new text (an edit's: 96 at least)."
    ),
) -> None:
    """Measure which drafting pays on this machine (plain, n-gram, the drafter, both) and use it from now on."""
    from rich.markup import escape

    from ..run.engines import engine_for, resolve_files
    from ..run.inputs import check_lengths
    from ..run.tune_record import TuneRecords, tune_key
    from ..run.tune_run import TuneUnsteady

    check_lengths(max_tokens=max_tokens)
    if rounds < 1:
        raise UsageError(f"--rounds {rounds}", "give 1 or more rounds (2 give a spread worth reading)")
    settings = load_settings()
    chosen = _one_model(model, model_option)
    running = engine_for(engine, settings)
    if running not in ("server", "inproc"):
        raise UsageError(f"tune measures an engine on this machine, not {running}", "give --engine server or inproc")
    files = resolve_files(chosen, None, load_catalog(settings.catalog), settings)
    assert files.target is not None
    records = TuneRecords(settings.tune_file)
    key = tune_key(running, files.target, files.drafter)
    # The command again, for the hints below: the model named as it was (a file's path too).
    again = controls_shown(f"dspine tune {shlex.quote(chosen)}") if chosen else "dspine tune"
    if show and reset:
        raise UsageError("--show and --reset together", "give one: --show prints the tune, --reset forgets it")
    if reset:
        gone = records.reset(key)
        out.print(f"forgot the tune for {escape(files.label)} ({running})" if gone else "there was no tune to forget")
        return
    if show:
        _show_tune(records.get(key), files, running, settings, again)
        return
    said_rounds = f"{rounds} round{'s' if rounds != 1 else ''}"
    title = f"dspine tune: {files.label}, {running}, {max_tokens} tokens a prompt, {said_rounds}"
    try:
        outcome = _tune_with_progress(files, running, settings, rounds, max_tokens)
    except TuneUnsteady as refused:
        _tune_table(title + " (not saved: the speeds wandered)", refused.rows)  # what ran, and how far apart
        raise
    _tune_table(title, outcome.rows)
    out.print(f"picked {escape(outcome.tune.summary)}")
    out.print(f"[dim]saved: chat, run and serve on {running} use it; `{escape(again)} --reset` forgets it[/]")


def _show_tune(saved, files, running: str, settings, again: str) -> None:
    """The saved tune's table and pick, and whether what it was measured with changed since."""
    from rich.markup import escape

    from ..run.drafting_choice import conditions_now

    if saved is None:
        out.print(f"no tune for {escape(files.label)} on the {running} engine yet: `{escape(again)}` makes one")
        return
    _tune_table(f"tune of {files.label}, {running}, {saved.when}", [_row(r) for r in saved.table])
    out.print(f"picked {escape(saved.summary)}", markup=True)
    changed = saved.conditions.changed(conditions_now(running, files, settings))
    if changed:
        out.print(f"[yellow]stale:[/] measured with {escape(changed)}; run `{escape(again)}` again")


def _tune_with_progress(files, running: str, settings, rounds: int, max_tokens: int):
    """A tune with its progress on standard error: a bar on a terminal; elsewhere (a log, a
    pipe, CI) a line a run, so a long tune is never silent for minutes."""
    from rich.markup import escape
    from rich.progress import Progress, TimeRemainingColumn

    from ..run.tune_run import TuneProgress, tune_and_save

    if not err.is_terminal:

        def say(line: str) -> None:
            err.print(controls_shown(line), markup=False, highlight=False)  # labels are file names: data

        lines = TuneProgress(
            on_plan=lambda total: say(f"tuning: {total} runs"),
            on_start=lambda what: say(f"run {lines.done + 1}/{lines.planned}: {what}"),
            on_retry=lambda why: say(f"the speeds wandered ({why}): measuring again"),
        )
        return tune_and_save(files, running, settings, lines, rounds=rounds, max_tokens=max_tokens)
    columns = (*Progress.get_default_columns(), TimeRemainingColumn(compact=True, elapsed_when_finished=True))
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task("tuning", total=None)

        def retry(why: str) -> None:
            progress.reset(task)
            progress.console.print(f"[yellow]the speeds wandered ({escape(why)}): measuring again[/]")

        said = TuneProgress(
            on_plan=lambda total: progress.update(task, total=total),
            on_start=lambda what: progress.update(task, description=f"run {said.done + 1}: {escape(what)}"),
            on_run=lambda: progress.advance(task),
            on_retry=retry,
        )
        return tune_and_save(files, running, settings, said, rounds=rounds, max_tokens=max_tokens)


def _row(saved: dict):
    """A saved table row back as bench's Row (for --show)."""
    from ..run.bench import Row

    known = {k: v for k, v in saved.items() if k in Row.__dataclass_fields__}
    if known.get("speedup_range") is not None:
        known["speedup_range"] = tuple(known["speedup_range"])
    return Row(**known)


def _tune_table(title: str, rows) -> None:
    from ..run.bench import COLUMNS, cells

    # bench's columns less depth, acceptance rate and TTFT: a tune runs at no depth, for speed
    shown = [i for i, column in enumerate(COLUMNS) if column not in ("depth", "accept rate", "TTFT s")]
    table = Table(title=Text(title), title_justify="left")  # file names are data, never markup
    for i in shown:
        table.add_column(COLUMNS[i].replace("drafter", "setup"))
    for row in rows:
        row_cells = cells(row)
        table.add_row(*(Text(row_cells[i]) for i in shown))  # file names are data, never markup
    out.print(table)
