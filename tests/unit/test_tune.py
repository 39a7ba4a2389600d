"""`dspine tune`'s pick and the drafting choice chat, run and serve start with (issue 47):
speculation is never slower than plain on new text, a drafter that drafted nothing is never
picked, a tune made under other conditions is said stale and not used, and without a tune a
machine with no GPU starts plain with n-gram drafts."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from app.models.catalog import load_catalog
from app.run import drafting_choice
from app.run.bench import NGRAM_LABEL, PLAIN, Row
from app.run.drafting_choice import CPU_DEFAULT_NOTE, choose, with_drafting
from app.run.engines import EngineOptions, ModelFiles
from app.run.tune import candidates, lengths_to_try
from app.run.tune import choose as pick_from
from app.run.tune_record import Conditions, Pick, Tune, TuneRecords, tune_key
from app.settings import load_settings
from backends.sampling import QWEN_CARD, presets_identity
from backends.turn_kind import TurnDrafting

DRAFTER = "draft-q4_1.gguf"
CATEGORIES = ("agent", "code", "edit", "math", "prose")


def rows_for(label: str, n_max: int | None, speedups: dict[str, float], drafted: int = 10) -> list[Row]:
    return [
        Row(
            category=category,
            think=False,
            drafter=label,
            n_max=n_max,
            tokens_per_s={"median": 10 * speedup},
            speedup=speedup,
            acceptance_length=None,
            acceptance_rate=None,
            ttft_s=None,
            counts={"drafted": drafted},
            runs=2,
        )
        for category, speedup in speedups.items()
    ]


def flat(value: float, edit: float | None = None) -> dict[str, float]:
    return {c: (edit if c == "edit" and edit is not None else value) for c in CATEGORIES}


FOUND = candidates(DRAFTER, [2, 4])
PLAIN_ROWS = rows_for(PLAIN, None, flat(1.0), drafted=0)


def test_candidates_are_plain_ngram_and_the_drafter_with_and_without_ngram_at_each_length():
    picks = [c.pick for c in FOUND]
    assert picks[:2] == [Pick(False, False), Pick(False, True)]
    assert {(p.drafter, p.ngram, p.n_max) for p in picks[2:]} == {
        (True, False, 2), (True, True, 2), (True, False, 4), (True, True, 4)
    }  # fmt: skip
    assert [c.pick for c in candidates(None, [2, 4])] == picks[:2]
    assert lengths_to_try(15) == [7, 15] and lengths_to_try(3) == [2, 3] and lengths_to_try(2) == [2]


def test_a_drafter_slower_than_plain_is_not_picked():
    rows = PLAIN_ROWS + rows_for("n-gram", None, flat(0.9)) + rows_for(DRAFTER, 4, flat(0.79))
    pick, why = pick_from(FOUND, rows)
    assert pick == Pick(False, False) and why.startswith("plain decoding: no drafting setup pays here")


def test_copies_on_edits_as_fast_as_plain_within_the_noise_are_kept():
    """The tune's few sampled edits cannot tell a copy-heavy turn's gain from noise (SmolLM2:
    0.8x to 2.3x plain per reply); copies that ran no measurably slower stay on for edits, as
    without a tune. Measurably slower (0.9x), they go."""
    rows = PLAIN_ROWS + rows_for("n-gram", None, flat(0.99)) + rows_for(DRAFTER, 4, flat(0.79))
    pick, why = pick_from(FOUND, rows)
    assert pick == Pick(False, True, new_text=False, edit=True)
    assert why.startswith("n-gram on edits: 0.99x plain") and "within the noise" in why and "plain on new text" in why
    paying = PLAIN_ROWS + rows_for("n-gram", None, flat(1.05, edit=0.99))
    assert pick_from(FOUND, paying)[0] == Pick(False, True)  # copies on new text pay: on every turn
    slower = PLAIN_ROWS + rows_for("n-gram", None, flat(1.0, edit=0.9))
    assert pick_from(FOUND, slower)[0] == Pick(False, False)


def test_ngram_that_pays_on_edits_and_costs_nothing_on_new_text_is_picked():
    rows = PLAIN_ROWS + rows_for("n-gram", None, flat(1.0, edit=1.45)) + rows_for(DRAFTER, 4, flat(0.8))
    pick, why = pick_from(FOUND, rows)
    assert pick == Pick(False, True, new_text=False)  # copies on edits, plain on new text
    assert why.startswith("n-gram on edits: 1.45x plain") and "plain on new text" in why
    assert pick.label == "n-gram on edits" and pick.turn_drafting() == TurnDrafting(new_text=False, edit=True)


def test_great_edits_do_not_buy_slower_new_text():
    """New text at 0.9x plain stays plain, however much edits gain: the gain is taken on edits only."""
    rows = PLAIN_ROWS + rows_for(f"n-gram + {DRAFTER}", 4, flat(0.9, edit=3.0))
    pick, why = pick_from(FOUND, rows)
    assert pick == Pick(True, True, 4, new_text=False, edit=True)
    assert "on edits" in why and "plain on new text" in why


def test_a_drafter_that_drafted_nothing_is_never_picked_and_the_verdict_says_so():
    rows = PLAIN_ROWS + rows_for(DRAFTER, 4, flat(1.2), drafted=0)
    pick, why = pick_from(FOUND, rows)
    assert pick == Pick(False, False) and f"{DRAFTER} drafted nothing" in why


def test_the_fastest_that_pays_wins_and_a_tie_goes_to_what_costs_less():
    rows = (
        PLAIN_ROWS
        + rows_for("n-gram", None, flat(1.05, edit=1.3))
        + rows_for(DRAFTER, 2, flat(1.6))
        + rows_for(f"n-gram + {DRAFTER}", 2, flat(1.61, edit=1.7))
    )
    pick, why = pick_from(FOUND, rows)
    assert pick == Pick(True, True, 2)  # 1.61 flat and 1.7 on edits beats 1.6 by more than 1%
    tie = PLAIN_ROWS + rows_for(DRAFTER, 2, flat(1.6)) + rows_for(f"n-gram + {DRAFTER}", 2, flat(1.601))
    assert pick_from(FOUND, tie)[0] == Pick(True, False, 2)


# -- the choice a run starts with ------------------------------------------------------------


@pytest.fixture
def settings(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("DSPINE_CONFIG", raising=False)
    monkeypatch.delenv("DSPINE_NGRAM_DRAFTING", raising=False)
    return load_settings()


@pytest.fixture
def pair(tmp_path) -> ModelFiles:
    target, drafter = tmp_path / "target.gguf", tmp_path / DRAFTER
    target.write_bytes(b"t" * 10)
    drafter.write_bytes(b"d" * 10)
    return ModelFiles("smollm2-135m", target, drafter, "draft")


NOW = Conditions(build="llama-server /x 1 2", device="CPU test", files="t + d")


def test_without_a_gpu_and_without_a_tune_the_run_is_plain_with_ngram(pair, settings):
    chosen = choose(pair, None, "inproc", settings, on_gpu=False, conditions=NOW)
    assert chosen.files.drafter is None and chosen.files.target == pair.target
    assert chosen.ngram is True and chosen.label == "n-gram on edits (no GPU)" and chosen.note == CPU_DEFAULT_NOTE
    options = with_drafting(EngineOptions(engine="inproc"), chosen)
    assert options.ngram is True and options.n_max is None
    assert options.turn_drafting == TurnDrafting(new_text=False, edit=True)


def test_with_a_gpu_and_without_a_tune_the_pairs_drafter_runs(pair, settings):
    chosen = choose(pair, None, "server", settings, on_gpu=True, conditions=NOW)
    assert chosen.files == pair and chosen.ngram is None and chosen.label is None


def test_what_the_user_asked_for_is_what_runs(pair, settings):
    for asked in ("q4_1", "none", "/some/file.gguf"):
        chosen = choose(pair, asked, "inproc", settings, on_gpu=False, conditions=NOW)
        assert chosen.files == pair and chosen.ngram is None and chosen.note is None


def test_ngram_drafting_off_means_plain(pair, settings, monkeypatch):
    monkeypatch.setenv("DSPINE_NGRAM_DRAFTING", "off")
    chosen = choose(pair, None, "inproc", load_settings(), on_gpu=False, conditions=NOW)
    assert chosen.files.drafter is None and chosen.ngram is False and chosen.label == "plain (no GPU)"
    assert with_drafting(EngineOptions(engine="inproc"), chosen).turn_drafting is None


def saved(settings, pair, pick: Pick, conditions: Conditions = NOW) -> None:
    assert pair.target is not None
    TuneRecords(settings.tune_file).put(
        tune_key("inproc", pair.target, pair.drafter), Tune(pick, conditions, "why", [], "today")
    )


def test_a_fresh_tune_is_what_runs_and_the_readout_names_it(pair, settings):
    saved(settings, pair, Pick(drafter=True, ngram=True, n_max=2))
    chosen = choose(pair, None, "inproc", settings, on_gpu=False, conditions=NOW)
    assert chosen.files == pair and chosen.ngram is True and chosen.n_max == 2
    assert chosen.label == "tuned: drafter + n-gram" and chosen.note is None
    assert with_drafting(EngineOptions(engine="inproc", n_max=6), chosen).n_max == 6  # --n-max stays
    saved(settings, pair, Pick(drafter=False, ngram=False))
    plain = choose(pair, None, "inproc", settings, on_gpu=True, conditions=NOW)
    assert plain.files.drafter is None and plain.ngram is False and plain.label == "tuned: plain, no drafting pays here"


@pytest.mark.parametrize(
    "other, said",
    [
        (replace(NOW, build="llama-server /x 1 3"), "another llama.cpp build"),
        (replace(NOW, device="NVIDIA GeForce RTX 3090"), "another device"),
        (replace(NOW, files="t2 + d"), "other model files"),
        (replace(NOW, sampling="temp 0.2"), "other sampling presets"),
    ],
)
def test_a_stale_tune_is_said_and_not_used(pair, settings, other, said):
    saved(settings, pair, Pick(drafter=True, ngram=False, n_max=2), conditions=other)
    chosen = choose(pair, None, "inproc", settings, on_gpu=True, conditions=NOW)
    assert chosen.files == pair and chosen.n_max is None  # the default, not the stale pick
    assert chosen.note is not None and said in chosen.note and "dspine tune" in chosen.note


def test_a_tune_saved_before_sampling_was_recorded_ran_qwens_presets(tmp_path, pair, settings, monkeypatch):
    """Tunes saved by an earlier dspine have no sampling in their conditions: they ran Qwen3.8's
    card, so a Qwen model's stays fresh and one whose card differs (smollm2-135m) goes stale."""
    records = TuneRecords(tmp_path / "tunes.json")
    old = {"build": NOW.build, "device": NOW.device, "files": NOW.files}
    records.path.write_text(json.dumps({"k": {"pick": {"drafter": False, "ngram": True}, "conditions": old}}))
    saved = records.get("k")
    assert saved is not None
    qwen = Conditions(NOW.build, NOW.device, NOW.files, presets_identity(QWEN_CARD))
    assert saved.conditions.changed(qwen) is None
    smollm2 = load_catalog().find("smollm2").sampling
    assert smollm2 is not None
    small = replace(qwen, sampling=presets_identity(smollm2))
    assert saved.conditions.changed(small) == "other sampling presets"
    monkeypatch.setattr(drafting_choice, "library_identity", lambda: NOW.build)
    now = drafting_choice.conditions_now("inproc", replace(pair, sampling=smollm2), settings)
    assert now.sampling == small.sampling and now.changed(replace(now, sampling=qwen.sampling)) is not None


def test_the_tunes_file_survives_damage_and_forgets_on_reset(tmp_path):
    records = TuneRecords(tmp_path / "tunes.json")
    assert records.get("k") is None
    records.path.write_text("{not json")
    assert records.get("k") is None
    records.put("k", Tune(Pick(False, True), NOW, "why", [{"category": "code"}], "today"))
    assert records.get("k") == Tune(Pick(False, True), NOW, "why", [{"category": "code"}], "today")
    records.path.write_text('{"k": {"pick": {"drafter": 1, "unknown": 2}}}')
    assert records.get("k") is None
    assert records.reset("k") == 1 and records.reset("k") == 0


def test_conditions_now_name_the_build_the_device_and_both_files(pair, settings, monkeypatch):
    monkeypatch.setattr(drafting_choice, "library_identity", lambda: "llama-cpp-python 9")
    monkeypatch.setattr(drafting_choice, "device_identity", lambda: "CPU X")
    now = drafting_choice.conditions_now("inproc", pair, settings)
    assert now.build == "llama-cpp-python 9" and now.device == "CPU X"
    assert Path(pair.target).name in now.files and DRAFTER in now.files
    assert pair.drafter is not None
    pair.drafter.write_bytes(b"another drafter, another size")
    assert drafting_choice.conditions_now("inproc", pair, settings).changed(now) == "other model files"


def test_a_tune_never_overrides_ngram_drafting_off_and_serve_drafts_every_turn(pair, settings, monkeypatch):
    saved(settings, pair, Pick(drafter=False, ngram=True, new_text=False, edit=True))
    proxied = choose(pair, None, "inproc", settings, on_gpu=False, conditions=NOW, per_turn=False)
    assert proxied.ngram is True and proxied.turns is None and proxied.label == "tuned: n-gram"
    monkeypatch.setenv("DSPINE_NGRAM_DRAFTING", "off")
    off = choose(pair, None, "inproc", load_settings(), on_gpu=False, conditions=NOW)
    assert off.ngram is False and off.label == "tuned: plain, no drafting pays here"


def test_a_tune_whose_plain_speeds_wandered_saves_nothing_and_says_why(pair, settings, monkeypatch):
    """A new user's /tune in the chat ran while the machine was busy: plain decoding measured
    2.5 to 102.6 tok/s on one category, and a "24x" n-gram pick was saved and used. Now such a
    run is refused, not saved."""
    from app.errors import UsageError
    from app.run import tune, tune_run
    from app.run.tune import unsteady

    def with_spread(rows: list[Row], low: float, high: float) -> list[Row]:
        return [replace(r, tokens_per_s={"median": 50.0, "min": low, "max": high}) for r in rows]

    quiet = with_spread(PLAIN_ROWS, 86.0, 97.0) + rows_for(NGRAM_LABEL, None, flat(1.0, edit=1.4))
    assert unsteady(quiet) is None
    drafters_wander = quiet + with_spread(rows_for(DRAFTER, 4, flat(0.5)), 2.0, 90.0)
    assert unsteady(drafters_wander) is None  # only plain's own runs judge the machine
    busy = with_spread(PLAIN_ROWS[:1], 2.5, 102.6) + quiet[1:]
    assert unsteady(busy) == "plain decoding ran 2.5 to 102.6 tok/s on agent"
    # A generated test model's steps under 2 ms: the scheduler's grain, not load (a CI run's
    # /tune in the chat read 823.4 to 1,747.7 tok/s and refused to save).
    assert unsteady(with_spread(PLAIN_ROWS[:1], 823.4, 1747.7) + quiet[1:]) is None

    picked = Tune(Pick(drafter=False, ngram=True), NOW, "n-gram: 24.79x")
    monkeypatch.setattr(tune, "measure", lambda *a, **k: (picked, busy, len(busy)))
    with pytest.raises(
        UsageError, match="wandered too much to choose from, twice .plain decoding ran 2.5 to 102.6"
    ) as e:
        tune_run.tune_and_save(pair, "inproc", settings)
    assert e.value.rows == busy  # type: ignore[attr-defined]  # the table is shown anyway
    assert TuneRecords(settings.tune_file).get(tune_key("inproc", pair.target, pair.drafter)) is None
    # A load spike in the first measurement only (issue 68): measured again, and saved.
    measured = iter([(picked, busy, len(busy)), (picked, quiet, len(quiet))])
    monkeypatch.setattr(tune, "measure", lambda *a, **k: next(measured))
    retried: list[str] = []
    tune_run.tune_and_save(pair, "inproc", settings, tune_run.TuneProgress(on_retry=retried.append))
    assert retried == ["plain decoding ran 2.5 to 102.6 tok/s on agent"]
    assert TuneRecords(settings.tune_file).get(tune_key("inproc", pair.target, pair.drafter)) == picked
    TuneRecords(settings.tune_file).reset(tune_key("inproc", pair.target, pair.drafter))
    monkeypatch.setattr(tune, "measure", lambda *a, **k: (picked, quiet, len(quiet)))
    tune_run.tune_and_save(pair, "inproc", settings)
    assert TuneRecords(settings.tune_file).get(tune_key("inproc", pair.target, pair.drafter)) == picked


def test_a_refused_tune_shows_its_table_and_a_tune_off_a_terminal_prints_progress(
    settings, monkeypatch, capsys, tmp_path
):
    """Issue 68: on a busy machine `dspine tune` refused with no table, and with its output not
    on a terminal printed nothing for 17.6 minutes before refusing."""
    from app.cli import run
    from app.run import tune_run
    from tests.support.gguf_models import chat_model, write_model

    model = write_model(tmp_path / "chat.gguf", chat_model(n_layer=1, n_embd=64))
    busy = [replace(r, tokens_per_s={"median": 50.0, "min": 2.5, "max": 102.6}) for r in PLAIN_ROWS]

    def wandering(files, engine, settings, progress, rounds=None, max_tokens=None):
        progress.planned = 12  # as tune_and_save does
        progress.on_plan(12)
        progress.on_start("plain · code · think off")
        progress.on_retry("plain decoding ran 2.5 to 102.6 tok/s on agent")
        raise tune_run.TuneUnsteady("the speeds wandered too much to choose from, twice (...)", "run it again", busy)

    monkeypatch.setattr(tune_run, "tune_and_save", wandering)
    assert run(["tune", str(model), "--engine", "inproc"]) == 2
    said = capsys.readouterr()
    table = " ".join(said.out.split())
    assert "(not saved: the speeds wandered)" in table and "│ plain" in table  # the table, shown anyway
    assert "tuning: 12 runs" in said.err and "run 1/12: plain · code · think off" in said.err
    assert "measuring again" in said.err and "wandered too much" in said.err


def test_a_load_that_came_while_the_tune_measured_is_named():
    """Issue 68: a build that starts mid-tune makes its runs before and after unlike; a load
    that was there all along (or went) does not."""
    from app.run.tune_run import load_came

    assert load_came(0.1, 1.2) == "other programs kept 1.2 cores busy while it measured, 0.1 before"
    assert load_came(1.0, 1.1) is None and load_came(0.0, 0.3) is None and load_came(1.5, 0.0) is None
