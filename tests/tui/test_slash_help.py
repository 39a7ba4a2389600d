"""The chat's /help is its slash-command table: every command it dispatches is listed."""

from __future__ import annotations

import inspect

import pytest

from app.tui.app import ChatApp
from app.tui.slash_commands import SlashCommand, by_name, help_markdown
from app.tui.widgets.message_view import MessageView
from tests.support.pilot import send, until
from tests.support.scripted_engine import ScriptedEngine


def help_notes(app) -> list[str]:
    return [view.answer for view in app.query(MessageView) if "**Commands**" in view.answer]


async def test_help_in_the_chat_lists_every_dispatched_command(store):
    app = ChatApp(ScriptedEngine(), store)
    async with app.run_test() as pilot:
        await send(pilot, "/help")
        await until(pilot, lambda: help_notes(app), what="the /help note")
        shown = help_notes(app)[-1]
    for name, command in ChatApp.SLASH_COMMANDS.items():
        assert f"`{command.usage()}`: {command.help}" in shown, f"{name} missing from /help"
    assert "Ctrl+T" in shown and "Enter" in shown


def test_every_slash_handler_is_in_the_table_once():
    coroutines = inspect.getmembers(ChatApp, inspect.iscoroutinefunction)
    handlers = {name for name, _ in coroutines if name.startswith("_slash_")}
    in_table = {command.handler.__name__ for command in ChatApp.SLASH_COMMANDS.values()}
    assert handlers == in_table
    assert len(in_table) == len(ChatApp.SLASH_COMMANDS)
    assert {"/help", "/think", "/compact", "/mcp", "/undo"} <= set(ChatApp.SLASH_COMMANDS)


def test_the_table_refuses_a_second_definition_or_a_bad_name():
    def handler() -> None: ...

    with pytest.raises(ValueError, match="defined twice"):
        by_name([SlashCommand("/x", "", "one", handler), SlashCommand("/x", "", "two", handler)])
    with pytest.raises(ValueError, match="start with /"):
        by_name([SlashCommand("x", "", "no slash", handler)])
    text = help_markdown([SlashCommand("/copy", "[N]", "copy a block", handler)])
    assert "- `/copy [N]`: copy a block" in text
