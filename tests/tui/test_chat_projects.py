"""Chats belong to projects (fourth hostile trial, finding 4): a plain `dspine chat` in one
project never opens another's chat, so one project's history never reaches the model in
another and its turns are never saved into the other's chat. A chat gone on with comes back
on the model it was made with, a local file included."""

from __future__ import annotations

import json
import subprocess

import pytest

from app.agent.project import open_project
from app.run.chat_model import remembered, saved
from app.run.engines import ModelFiles
from app.tui.app import ChatApp
from app.tui.widgets.message_view import MessageView
from tests.support.pilot import send, until
from tests.support.scripted_engine import ScriptedEngine


def project(tmp_path, name):
    root = tmp_path / name
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


async def test_a_plain_chat_in_a_second_project_shows_none_of_the_first(tmp_path, store):
    first, second = project(tmp_path, "a"), project(tmp_path, "b")
    engine = ScriptedEngine(turns=[["A's answer."]])
    app = ChatApp(engine, store, model="t", project=open_project(first))
    async with app.run_test() as pilot:
        await send(pilot, "secret plans of project A")
        await until(pilot, lambda: not app.streaming and len(engine.calls) == 1, what="A's reply")
        a_chat = app.chat.id

    engine_b = ScriptedEngine(turns=[["B's answer."]])
    app_b = ChatApp(engine_b, store, model="t", project=open_project(second))
    async with app_b.run_test() as pilot:
        assert app_b.chat.id != a_chat and app_b.chat.project == str(second.resolve())
        assert not [v for v in app_b.query(MessageView) if "secret plans" in v.answer]
        await send(pilot, "work on B")
        await until(pilot, lambda: not app_b.streaming and len(engine_b.calls) == 1, what="B's reply")
        sent = json.dumps(engine_b.calls[0]["messages"])
        assert "secret plans" not in sent and "A's answer" not in sent
    assert [m.content for m in store.messages(a_chat)] == ["secret plans of project A", "A's answer."]

    # Back in A, a plain chat opens A's chat again.
    again = ChatApp(ScriptedEngine(turns=[]), store, model="t", project=open_project(first))
    async with again.run_test():
        assert again.chat.id == a_chat


def test_a_local_model_file_is_remembered_by_its_path(tmp_path):
    target, drafter = tmp_path / "m.gguf", tmp_path / "d.gguf"
    target.write_bytes(b"GGUF"), drafter.write_bytes(b"GGUF")
    kept = remembered(str(target), str(drafter), ModelFiles("m.gguf", target, drafter, "draft"))
    found = saved(kept)
    assert found is not None and found.model == str(target.resolve()) and found.draft == str(drafter.resolve())
    assert not found.missing
    plain = saved(remembered(str(target), None, ModelFiles("m.gguf", target, None, None)))
    assert plain is not None and plain.draft == "none"
    target.unlink()
    gone = saved(kept)
    assert gone is not None and gone.missing == str(target.resolve())


def test_a_pulled_model_is_remembered_by_its_name(tmp_path):
    target = tmp_path / "blobs" / "t.gguf"
    pulled = ModelFiles("smollm2-135m", target, tmp_path / "blobs" / "d.gguf", "draft")
    found = saved(remembered(None, None, pulled))
    assert found is not None and (found.model, found.draft) == ("smollm2-135m", None)
    assert saved("") is None and saved("not json") is None and saved('{"model": 3}') is None
    assert remembered(None, None, ModelFiles("http://x", None, None, None)) == ""


@pytest.mark.parametrize("how", [["--continue"], ["--resume", "1"]])
def test_going_on_with_a_chat_comes_back_on_its_local_model(tmp_path, how):
    """The CLI picks the saved chat's model before it starts an engine: a file that is gone
    says so and falls back, rather than showing the pull screen."""
    from app.chat.store import ChatStore
    from app.cli.chat import _saved_model

    target = tmp_path / "mine.gguf"
    target.write_bytes(b"GGUF")
    store = ChatStore(tmp_path / "chats.db")
    try:
        files = ModelFiles("mine.gguf", target, None, None)
        store.new_chat(model="mine.gguf", project=str(tmp_path), model_files=remembered(str(target), None, files))
        resume = int(how[1]) if how[0] == "--resume" else None
        assert _saved_model(store, resume, str(tmp_path)) == (str(target.resolve()), "none")
        assert _saved_model(store, None, str(tmp_path / "elsewhere")) == (None, None)
        target.unlink()
        assert _saved_model(store, resume, str(tmp_path)) == (None, None)
    finally:
        store.close()
