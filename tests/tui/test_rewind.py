"""/rewind (and Esc Esc) goes back to before an earlier prompt: the files this chat changed
since, byte for byte as they were, the conversation cut there, the prompt back in the input;
a file changed by hand meanwhile is named and kept unless the user says otherwise; a
resumed chat can go back too (the store keeps the records)."""

from __future__ import annotations

import subprocess

import pytest

from app.agent.project import open_project
from app.tui.app import ChatApp
from app.tui.screens.consent import ConsentScreen
from app.tui.screens.rewind import RewindScreen
from tests.support.pilot import answer, send, until
from tests.support.scripted_engine import ScriptedEngine
from tests.support.scripted_engine import tool_call as call

V1 = "def f():\n    return 1\n"
V2 = "def f():\n    return 2\n"
V3 = "def f():\n    return 3\n"


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "a.py").write_text(V1)
    return root


def three_turns() -> ScriptedEngine:
    return ScriptedEngine(
        turns=[
            [call("edit_file", "_1", path="a.py", old_text="return 1", new_text="return 2")],
            ["Done one."],
            [call("write_file", "_2", path="b.py", content="created\n")],
            ["Done two."],
            [call("edit_file", "_3", path="a.py", old_text="return 2", new_text="return 3")],
            ["Done three."],
        ]
    )


async def run_three_turns(pilot, app) -> None:
    for n, prompt in enumerate(["first: make it 2", "second: add b", "third: make it 3"]):
        await send(pilot, prompt)
        await until(pilot, lambda: isinstance(app.screen, ConsentScreen), what=f"consent {n}")
        await answer(pilot, "y")
        await until(pilot, lambda: not app.streaming, what=f"turn {n}")


async def open_rewind(pilot, app) -> RewindScreen:
    await send(pilot, "/rewind")
    await until(pilot, lambda: isinstance(app.screen, RewindScreen), what="the rewind list")
    screen = app.screen
    assert isinstance(screen, RewindScreen)
    return screen


async def test_rewind_puts_files_and_conversation_back_before_the_chosen_prompt(repo, store):
    app = ChatApp(three_turns(), store, model="t", project=open_project(repo))
    async with app.run_test() as pilot:
        await run_three_turns(pilot, app)
        assert (repo / "a.py").read_text() == V3 and (repo / "b.py").exists()
        screen = await open_rewind(pilot, app)
        assert [p.text for p in screen.prompts] == ["third: make it 3", "second: add b", "first: make it 2"]
        assert [p.files for p in screen.prompts] == [1, 2, 2]
        await pilot.press("down")  # the second prompt
        await pilot.press("b")
        await until(pilot, lambda: not isinstance(app.screen, RewindScreen), what="the rewind")
        await until(pilot, lambda: app.prompt_area.text == "second: add b", what="the prompt back in the input")
        assert (repo / "a.py").read_bytes() == V2.encode() and not (repo / "b.py").exists()
        contents = [m.content for m in store.messages(app.chat.id) if m.role in ("user", "assistant")]
        assert contents[0] == "first: make it 2" and contents[-1] == "Done one."
        assert "second: add b" not in contents
        assert app.session.history[-1]["content"] == "Done one."
        assert [c.name for c in store.changes(app.chat.id)] == ["a.py"]  # the first prompt's edit


async def test_a_file_changed_by_hand_is_named_and_kept(repo, store):
    app = ChatApp(three_turns(), store, model="t", project=open_project(repo))
    async with app.run_test() as pilot:
        await run_three_turns(pilot, app)
        (repo / "a.py").write_text("# edited by hand\n")
        await open_rewind(pilot, app)
        await pilot.press("down", "down")  # the first prompt
        await pilot.press("f")  # the files only
        await until(pilot, lambda: isinstance(app.screen, ConsentScreen), what="the question about a.py")
        assert "a.py" in app.screen.body and "b.py" not in app.screen.body
        await answer(pilot, "n")
        await until(pilot, lambda: not (repo / "b.py").exists(), what="b.py removed")
        assert (repo / "a.py").read_text() == "# edited by hand\n"  # kept
        assert len([m for m in store.messages(app.chat.id) if m.role == "user"]) == 3  # conversation as it was


async def test_a_resumed_chat_goes_back_with_esc_esc(repo, store):
    app = ChatApp(three_turns(), store, model="t", project=open_project(repo))
    async with app.run_test() as pilot:
        await run_three_turns(pilot, app)
        chat_id = app.chat.id
    resumed = ChatApp(ScriptedEngine(turns=[]), store, model="t", project=open_project(repo), open_chat=chat_id)
    async with resumed.run_test() as pilot:
        await pilot.press("escape", "escape")
        await until(pilot, lambda: isinstance(resumed.screen, RewindScreen), what="the rewind list from Esc Esc")
        await pilot.press("down", "down", "enter")
        await until(pilot, lambda: resumed.prompt_area.text == "first: make it 2", what="the first prompt back")
        assert (repo / "a.py").read_bytes() == V1.encode() and not (repo / "b.py").exists()
        assert store.messages(chat_id) == [] and store.changes(chat_id) == []


async def test_a_rewind_past_a_compaction_gets_the_messages_back_as_they_were(repo, store):
    engine = ScriptedEngine(turns=[["Answer one."], ["Answer two."], ["Answer three."]])
    app = ChatApp(engine, store, model="t", project=open_project(repo))
    async with app.run_test() as pilot:
        for prompt in ("one", "two"):
            await send(pilot, prompt)
            await until(pilot, lambda: not app.streaming, what=f"the reply to {prompt}")
        chat_id = app.chat.id
    # A compaction that covered both turns: the model's context became its summary.
    summary = {"role": "user", "content": "Summary of the earlier conversation: one, two."}
    store.save_context(chat_id, [summary, {"role": "assistant", "content": "ok"}], "one, two", 100, 10)
    resumed = ChatApp(engine, store, model="t", project=open_project(repo), open_chat=chat_id)
    async with resumed.run_test() as pilot:
        assert resumed.session.history[0] == summary
        await open_rewind(pilot, resumed)
        await pilot.press("c")  # the newest prompt, "two": the conversation only
        await until(pilot, lambda: resumed.prompt_area.text == "two", what="the prompt back")
        # Before "two" the compaction had not happened: the messages as they were.
        assert resumed.session.history == [
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "Answer one."},
        ]
        assert store.compactions(chat_id) == []
