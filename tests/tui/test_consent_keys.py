"""Only a key pressed for a consent question answers it (fourth hostile trial, finding 2;
fifth, a pause mid-sentence), a question longer than its box answers nothing until it was
read to its end (fifth trial), and a command too long for the screen is shown as its head
and tail with what is hidden between, never with "always" (fourth trial, finding 7)."""

from __future__ import annotations

import subprocess
import time

import pytest

from app.agent.consent import Consent, shown_command
from app.agent.project import open_project
from app.tui.app import ChatApp
from app.tui.screens import consent as consent_screen
from app.tui.screens.consent import ConsentScreen
from tests.support.pilot import answer, send, until
from tests.support.scripted_engine import ScriptedEngine
from tests.support.scripted_engine import tool_call as call


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


async def asked(pilot, app) -> ConsentScreen:
    """Send a message whose reply calls a tool; the question that comes up."""
    await send(pilot, "go")
    await until(pilot, lambda: isinstance(app.screen, ConsentScreen), what="the question")
    assert isinstance(app.screen, ConsentScreen)
    return app.screen


@pytest.mark.parametrize("typed", ["sure, go ahead", "okay then", "yes"])
async def test_keys_typed_as_the_question_appears_answer_nothing(repo, store, typed, monkeypatch):
    # A quiet moment longer than any pause between the pilot's key presses on a loaded machine:
    # what is tested is that keys in a burst never answer, not how long a pause may be.
    monkeypatch.setattr(consent_screen, "ARM_S", 5.0)
    marker = repo / "ran"
    engine = ScriptedEngine(turns=[[call("run_command", command=f"touch {marker}")], ["Not run."]])
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test() as pilot:
        question = await asked(pilot, app)
        # The user goes on typing a message (the `a` of "ahead" was "always", the `n` of
        # "then" was "no", and "yes" has its `y`).
        for key in typed:
            await pilot.press("space" if key == " " else "comma" if key == "," else key)
        assert app.screen is question and not question.armed
        assert question.swallowed == len(typed)
        assert "y yes" not in str(question.query_one("#consent-keys").render())
        assert not marker.exists() and len(engine.calls) == 1
        # A key pressed for the question, once the keyboard was quiet, answers it.
        await answer(pilot, "n")
        await until(pilot, lambda: not app.streaming, what="the end")
        assert not marker.exists()
        assert engine.calls[-1]["messages"][-1]["content"].startswith("the user declined")
        # What was typed is not lost: it is back in the message box.
        assert app.prompt_area.text == typed


async def test_typing_again_after_a_pause_takes_the_answer_keys_away(repo, store, monkeypatch):
    """A pause mid-sentence arms the question; the next letter that is not an answer shows the
    user is typing again, so the answer keys wait for quiet once more."""
    monkeypatch.setattr(consent_screen, "ARM_S", 0.3)
    engine = ScriptedEngine(turns=[[call("run_command", command="echo hi")], ["Declined."]])
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test() as pilot:
        question = await asked(pilot, app)
        await until(pilot, lambda: question.armed, what="armed after quiet")
        await pilot.press("h")
        assert not question.armed and app.screen is question and question.typed == "h"
        await pilot.press("down")  # looking at the question is not typing
        await answer(pilot, "n")
        await until(pilot, lambda: not app.streaming, what="the end")
        assert engine.calls[-1]["messages"][-1]["content"].startswith("the user declined")
        assert app.prompt_area.text == "h"


async def test_a_long_command_shows_its_tail_and_offers_no_always(repo, store):
    hidden_end = "; touch TAIL_MARKER"
    command = "echo " + "x" * 60_000 + hidden_end
    engine = ScriptedEngine(turns=[[call("run_command", command=command)], ["Declined."]])
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test() as pilot:
        question = await asked(pilot, app)
        shown = question.body.split("\n\nRuns ")[0]  # the command; then where it runs
        assert shown.endswith(hidden_end) and shown.startswith("echo xxx")
        assert "60,0" in shown and "hidden here" in shown
        assert len(shown) < 1500
        assert question.always is None
        await answer(pilot, "n")
        await until(pilot, lambda: not app.streaming, what="the end")


def test_always_is_never_kept_for_a_command_too_long_to_show():
    command = "echo " + "y" * 5000
    consent = Consent()
    assert consent.always_label("run_command", command) is None
    consent.remember("run_command", "always", command)
    assert consent.must_ask("run_command", command)
    lines = "\n".join(f"echo {i}" for i in range(40))
    shown = shown_command(lines)
    assert shown.startswith("echo 0\n") and shown.endswith("echo 39") and "hidden here" in shown
    assert shown_command("echo short") == "echo short"


async def test_a_pause_mid_sentence_is_not_consent(repo, store):
    """The user types on as the question comes up, pauses a second mid-sentence and types
    on: the next key is the sentence going on, not an answer (a quiet moment of 0.8 s let
    it answer "always"; the quiet also counts from the last key pressed anywhere, not from
    when the question appeared)."""
    marker = repo / "ran"
    engine = ScriptedEngine(turns=[[call("run_command", command=f"touch {marker}")], ["Not run."]])
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test() as pilot:
        question = await asked(pilot, app)
        await pilot.press("w")  # typing on as it appears: swallowed
        assert app.last_key_at is not None
        await until(pilot, lambda: time.monotonic() - app.last_key_at >= 1.0, what="a pause of 1 s")
        await pilot.press("a")
        assert app.screen is question and not question.armed and question.typed == "wa"
        assert not marker.exists()
        await answer(pilot, "n")
        await until(pilot, lambda: not app.streaming, what="the end")
        assert not marker.exists() and app.prompt_area.text == "wa"


async def test_a_question_longer_than_its_box_takes_no_answer_until_read_to_its_end(repo, store):
    content = "".join(f"line {i}\n" for i in range(120)) + "the last line\n"
    engine = ScriptedEngine(turns=[[call("write_file", path="long.txt", content=content)], ["Done."]])
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test(size=(100, 30)) as pilot:
        question = await asked(pilot, app)
        await until(pilot, lambda: question._quiet, what="the keyboard quiet")
        await pilot.pause()
        assert not question.armed and not question.read_to_end
        assert "scroll to the end" in str(question.query_one("#consent-keys").render())
        await pilot.press("y")  # not an answer yet: the end of the diff was never on screen
        assert app.screen is question and not (repo / "long.txt").exists()
        await pilot.press("end")
        await until(pilot, lambda: question.armed, what="armed once read to the end")
        await pilot.press("y")
        await until(pilot, lambda: not app.streaming, what="the end")
        assert (repo / "long.txt").read_text() == content


async def test_on_a_small_terminal_the_end_of_a_question_is_on_screen_before_a_key_counts(repo, store):
    """Review of issue 51: at 80x24 a 29-line question was cut off below the screen while
    its box thought it had shown everything, and y answered."""
    content = "".join(f"line {i}\n" for i in range(27)) + "the last line\n"
    engine = ScriptedEngine(turns=[[call("write_file", path="long.txt", content=content)], ["Done."]])
    app = ChatApp(engine, store, model="test", project=open_project(repo))
    async with app.run_test(size=(80, 24)) as pilot:
        question = await asked(pilot, app)
        await until(pilot, lambda: question._quiet, what="the keyboard quiet")
        await pilot.pause()
        keys = question.query_one("#consent-keys")
        assert not question.read_to_end  # the body scrolls: its end is not on screen yet
        await pilot.press("end")
        await until(pilot, lambda: question.armed, what="armed at the end")
        assert keys.region.bottom <= app.screen.region.bottom  # the keys line is on screen
        await pilot.press("n")
        await until(pilot, lambda: not app.streaming, what="the end")
