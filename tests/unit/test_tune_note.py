"""The chat's /tune result: a table that fits a terminal of 100 columns, whatever the drafter's
file is called, with that file named once, as text."""

from __future__ import annotations

from app.run.bench import Row
from app.run.tune_record import Conditions, Pick, Tune
from app.run.tune_run import TuneOutcome
from app.tui.tuning import outcome_note

NAME = "SmolLM2-135M-Instruct-draft-for-a-long-model-name.Q4_1.gguf"


def _row(setup: str, n_max: int | None, speedup: float | None) -> Row:
    return Row(
        category="code", think=False, drafter=setup, n_max=n_max,
        tokens_per_s={"mean": 80.0, "median": 80.0, "min": 79.1, "max": 81.2}, speedup=speedup,
        acceptance_length=None, acceptance_rate=None, ttft_s=None, counts={"drafted": 3}, runs=2,
        speedup_range=(0.97, 1.01) if speedup else None,
    )  # fmt: skip


def test_the_table_names_the_drafter_once_and_fits_100_columns():
    rows = [
        _row("plain", None, None),
        _row("n-gram", None, 0.99),
        _row(NAME, 15, 0.55),
        _row(f"n-gram + {NAME}", 15, 0.58),
    ]
    tune = Tune(Pick(drafter=False, ngram=False), Conditions(build="b", device="cpu", files="f"), "plain")
    note = outcome_note(TuneOutcome(tune, rows))
    table = note.split("```text\n")[1].split("\n```")[0]
    assert max(len(line) for line in table.splitlines()) <= 100, table
    assert "n-gram + drafter" in table and NAME not in table
    assert note.count(NAME) == 1 and f"`{NAME}`" in note
