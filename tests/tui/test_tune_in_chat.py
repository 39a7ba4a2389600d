"""/tune in the chat, driven by Textual's pilot with a tuner that waits on the test: the model is
closed while it runs and a prompt typed meanwhile stays in the input; Esc stops it and nothing is
saved; the model opens again either way; the offer comes once and a file name in it is text.
The whole path on a real model is tests/tui/test_tune_in_chat_tmux.py."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from app.errors import UsageError
from app.run.tune_record import TuneRecords
from app.run.tune_run import TuneOffer, TuneProgress, Tuner
from app.tui.app import ChatApp
from app.tui.widgets.prompt_area import PromptArea
from app.tui.widgets.readout import Readout
from tests.support.pilot import assistant_views, send, until
from tests.support.scripted_engine import ScriptedEngine

HOSTILE = "tiny[@click=app.quit]`](x).gguf"


@dataclass
class Closing(ScriptedEngine):
    closed: bool = False

    def close(self) -> None:
        self.closed = True


def _notes(app) -> str:
    return "\n".join(v.answer for v in assistant_views(app))


async def test_tune_closes_the_model_keeps_a_prompt_stops_on_escape_and_reopens(store):
    offers: list[str | None] = []
    started = threading.Event()

    def offer(model):
        offers.append(model)
        return TuneOffer(HOSTILE, None) if len(offers) == 1 else None

    def run(model, progress: TuneProgress):
        progress.planned = 8
        progress.on_start("plain, code, think off")
        started.set()
        assert progress.stop.wait(30), "Esc never reached the tune"
        raise UsageError("the tune was stopped after 0 of 8 runs: nothing saved", "run /tune again")

    first = Closing()
    reopened: list[str | None] = []
    app = ChatApp(
        first,
        store,
        model=HOSTILE,
        open_engine=lambda m: reopened.append(m) or ScriptedEngine(),
        tuner=Tuner(offer, run),
        tools=False,
    )
    async with app.run_test(size=(110, 40)) as pilot:
        await until(pilot, lambda: "has not been tuned" in _notes(app), what="the offer")
        assert HOSTILE in _notes(app)  # the name as written: a code span, not a link or a click
        await send(pilot, "/tune")
        await until(pilot, started.is_set, what="the tune to start")
        await until(pilot, lambda: first.closed, what="the model closed for the tune")
        live = app.query_one(Readout).query_one("#figures-live")
        await until(pilot, lambda: "tuning: run 1 of 8" in str(live.render()), what="the tune's progress")
        await send(pilot, "fix the bug")
        assert app.query_one(PromptArea).text == "fix the bug"  # not sent, not lost
        await pilot.press("escape")
        await until(pilot, lambda: "The tune did not finish" in _notes(app), what="the stop said")
        await until(pilot, lambda: reopened == [None], what="the model opened again")
        await until(pilot, lambda: app.engine is not None, what="the engine back")
        assert "nothing saved" in _notes(app)
        assert offers == [None, None]  # asked again once the model was back: said once all the same
        assert _notes(app).count("has not been tuned") == 1


def test_the_offer_is_made_once_per_model_pair_and_survives_a_reset(tmp_path):
    records = TuneRecords(tmp_path / "tunes.json")
    assert records.mark_offered("inproc:a.gguf+none")
    assert not records.mark_offered("inproc:a.gguf+none")
    assert records.mark_offered("server:a.gguf+none")  # another engine is another measurement
    records.reset()
    assert not records.mark_offered("inproc:a.gguf+none")
