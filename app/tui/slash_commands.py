"""The chat's slash commands: one record each feeds both dispatch and `/help`.

The chat app owns the table (its handlers are its methods); this module holds the
record and turns a table into the help text, so a command cannot be dispatched
without being listed, nor listed without being dispatched.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from .plain import markdown_code

Handler = TypeVar("Handler")

# What `/help` says beyond the commands: keys, attachments and consent.
KEYS_HELP = """- **Enter** sends, **Ctrl+J** adds a line, **Up/Down** walk your prompts
- **Ctrl+T** switches thinking on or off (each mode has its sampling preset)
- **Shift+Tab** cycles the permission mode: ask → accept edits → plan (see `/mode`, `/plan`)
- **Esc** stops a reply and keeps what arrived
- `@path/to/file` attaches a text file to the prompt (up to 256 KiB)
- **Ctrl+G** tints the text that came from accepted draft tokens
- **Ctrl+O** copies the last reply
- **Ctrl+L** lists the saved chats: open, rename (r) or delete (d) one
- Tools (when the chat has a project): the model reads and searches at once; edits, writes,
  commands and MCP calls wait for **y** yes, **n** no or **a** always (this chat; for MCP, always
  that server's tool); **Esc** stops a running tool or command"""


@dataclass(frozen=True)
class SlashCommand(Generic[Handler]):
    name: str  # as typed, with its slash: "/think"
    args: str  # how its argument is written, "" when it takes none: "[on|off]"
    help: str  # one line of Markdown for /help
    handler: Handler
    custom: bool = False  # a prompt from a command file: /help lists it apart

    def usage(self) -> str:
        return f"{self.name} {self.args}".strip()

    def help_line(self) -> str:
        """`- `/name args`: help` for /help; the usage is one code span whatever backticks a
        command file's `argument-hint` holds (its help is escaped where it is made)."""
        return f"- {markdown_code(self.usage())}: {self.help}"


def by_name(commands: Iterable[SlashCommand[Handler]]) -> dict[str, SlashCommand[Handler]]:
    table: dict[str, SlashCommand[Handler]] = {}
    for command in commands:
        if not command.name.startswith("/") or command.name != command.name.lower():
            raise ValueError(f"slash command {command.name!r}: names start with / and are lower case")
        if command.name in table:
            raise ValueError(f"slash command {command.name} is defined twice")
        table[command.name] = command
    return table


def help_markdown(commands: Iterable[SlashCommand[Handler]]) -> str:
    commands = list(commands)
    lines = [command.help_line() for command in commands if not command.custom]
    text = "**dspine chat**\n\n" + KEYS_HELP + "\n\n**Commands**\n\n" + "\n".join(lines) + "\n"
    custom = [command.help_line() for command in commands if command.custom]
    if custom:
        text += "\n**Custom commands** (prompts from command files: each sends its text)\n\n"
        text += "\n".join(custom) + "\n"
    return text
