"""Custom slash commands in the chat, driven by the pilot: a command's prompt goes to the model
as the user's message, shown and saved as sent."""

from __future__ import annotations

import subprocess

import pytest

from app.agent.command_files import folders_for, load
from app.agent.custom_commands import MAX_COMMAND_BYTES
from app.agent.project import open_project
from app.tui.app import ChatApp
from app.tui.widgets.message_view import MessageView
from tests.support.pilot import send, until
from tests.support.scripted_engine import ScriptedEngine


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return root


def command_file(path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")


def chat(repo, store, tmp_path, engine=None):
    """A chat on `repo` with the commands of its folders and of a Codex prompts folder of the test's."""
    commands = load(folders_for(repo, [tmp_path / "codex" / "prompts"]))
    app = ChatApp(
        engine or ScriptedEngine(answer=["OK."]), store, model="test", project=open_project(repo), commands=commands
    )
    notices: list[str] = []
    app.notify = lambda message, **kw: notices.append(str(message))  # type: ignore[method-assign]
    return app, notices


def user_messages(app) -> list[str]:
    return [view.answer for view in app.query(MessageView) if view.role == "user"]


def notes(app, words: str) -> list[str]:
    return [view.answer for view in app.query(MessageView) if view.role == "assistant" and words in view.answer]


async def run_command(pilot, app, engine, text: str) -> str:
    """Type `text`, wait for the reply; what the engine got as the last user message."""
    calls = len(engine.calls)
    await send(pilot, text)
    await until(pilot, lambda: len(engine.calls) > calls and not app.streaming, what=f"the reply to {text}")
    return engine.calls[-1]["messages"][-1]["content"]


async def test_commands_of_each_format_send_their_prompt_with_the_arguments(repo, store, tmp_path):
    command_file(repo / ".dspine/commands/review.md", "---\ndescription: review\n---\nReview $ARGUMENTS closely.")
    command_file(repo / ".claude/commands/git/commit.md", "Commit $1 with the message: $2")
    command_file(repo / ".opencode/command/test.md", "Run the tests in $1, then $2.")
    command_file(tmp_path / "codex/prompts/explain.md", "Explain $1 to me")
    engine = ScriptedEngine(answer=["OK."])
    app, notices = chat(repo, store, tmp_path, engine)
    async with app.run_test() as pilot:
        sent = await run_command(pilot, app, engine, "/review src/calc.py for bugs")
        assert sent == "Review src/calc.py for bugs closely."
        sent = await run_command(pilot, app, engine, '/git:commit src "fix the sign"')
        assert sent == "Commit src with the message: fix the sign"
        sent = await run_command(pilot, app, engine, "/test tests/unit 'the linter'")
        assert sent == "Run the tests in tests/unit, then the linter."
        sent = await run_command(pilot, app, engine, "/Explain calc.py")  # typed in any case
        assert sent == "Explain calc.py to me"
        # Shown as sent, and saved as the user's words.
        assert user_messages(app)[0] == "Review src/calc.py for bugs closely."
        assert store.messages(app.chat.id)[0].content == "Review src/calc.py for bugs closely."
    assert notices == []


async def test_help_lists_them_and_a_builtins_name_or_a_bad_file_is_a_notice(repo, store, tmp_path):
    command_file(repo / ".claude/commands/help.md", "Help me with $ARGUMENTS")
    command_file(
        repo / ".claude/commands/fix.md", "---\ndescription: Fix the failing test\nargument-hint: [test]\n---\n$1"
    )
    command_file(repo / ".claude/commands/outline.md", "# Outline the work first\n\nThen do it.")
    command_file(repo / ".claude/commands/broken.md", "---\ndescription: never closed\n")
    command_file(repo / ".claude/commands/huge.md", "x" * (MAX_COMMAND_BYTES + 1))
    command_file(repo / ".claude/commands/latin.md", "caf\xe9".encode("latin-1"))
    engine = ScriptedEngine(answer=["OK."])
    app, notices = chat(repo, store, tmp_path, engine)
    async with app.run_test() as pilot:
        await send(pilot, "/help")
        await until(pilot, lambda: notes(app, "**Commands**"), what="the /help note")
        shown = notes(app, "**Commands**")[-1]
        assert "- `/fix [test]`: Fix the failing test (from `.claude/commands/fix.md`)" in shown
        assert "- `/outline`: Outline the work first (from `.claude/commands/outline.md`)" in shown
        assert "- `/help`: show this" in shown and ".claude/commands/help.md" not in shown
        assert engine.calls == []  # /help was the built-in: nothing went to the model
    assert any(".claude/commands/help.md" in n and "/help is a built-in command" in n for n in notices)
    for name in ("broken.md", "huge.md", "latin.md"):
        assert any(f".claude/commands/{name} skipped" in n for n in notices), name


async def test_a_shell_line_is_sent_as_text_and_nothing_runs(repo, store, tmp_path):
    marker = tmp_path / "ran"
    command_file(repo / ".claude/commands/status.md", f"Status:\n!`touch {marker}`\nSee @src/calc.py\n")
    engine = ScriptedEngine(answer=["OK."])
    app, _ = chat(repo, store, tmp_path, engine)
    async with app.run_test() as pilot:
        sent = await run_command(pilot, app, engine, "/status")
    assert sent == f"Status:\n!`touch {marker}`\nSee @src/calc.py"
    assert not marker.exists()


async def test_a_commands_at_path_is_not_attached_when_rewind_brings_it_back(repo, store, tmp_path, monkeypatch):
    """Fifth hostile trial (low): a command file's `@path` went unattached when the command ran,
    and was attached once /rewind put the prompt back in the input and the user sent it."""
    from app.tui.screens.rewind import RewindScreen

    secret = tmp_path / "secret.txt"
    secret.write_text("TOKEN-123\n")
    monkeypatch.chdir(repo)
    command_file(repo / ".claude/commands/peek.md", f"Summarise @{secret}\n")
    engine = ScriptedEngine(answer=["OK."])
    app, _ = chat(repo, store, tmp_path, engine)
    async with app.run_test() as pilot:
        sent = await run_command(pilot, app, engine, "/peek")
        assert "TOKEN-123" not in sent
        await send(pilot, "/rewind")
        await until(pilot, lambda: isinstance(app.screen, RewindScreen), what="the rewind list")
        await pilot.press("c")
        await until(pilot, lambda: app.prompt_area.text == f"Summarise @{secret}", what="the prompt back")
        calls = len(engine.calls)
        await pilot.press("enter")
        await until(pilot, lambda: len(engine.calls) > calls and not app.streaming, what="the reply")
        assert "TOKEN-123" not in engine.calls[-1]["messages"][-1]["content"]
