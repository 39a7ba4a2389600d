"""Custom commands (prompts from command files, app/agent/command_files.py) registered in
the chat's one slash-command table: a built-in's name stays the built-in's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from ..agent.custom_commands import CustomCommand, first_wins
from .slash_commands import SlashCommand


class SendsPrompts(Protocol):
    async def send_prompt(self, text: str) -> None: ...


def _handler(command: CustomCommand) -> Callable[[SendsPrompts, str], Awaitable[None]]:
    async def run(app: SendsPrompts, argument: str) -> None:
        await app.send_prompt(command.expand(argument))

    run.__name__ = f"custom {command.name}"
    return run


def with_custom(
    builtin: Mapping[str, SlashCommand[Any]], commands: list[CustomCommand]
) -> tuple[dict[str, SlashCommand[Any]], list[str]]:
    """The built-in table with the custom commands after it, and a notice for each custom
    command a built-in's name keeps out."""
    kept, notices = first_wins(commands, builtin)
    table: dict[str, SlashCommand[Any]] = dict(builtin)
    for command in kept:
        table[command.name] = SlashCommand(
            command.name, command.argument_hint, command.help, _handler(command), custom=True
        )
    return table, notices
