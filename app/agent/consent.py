"""What waits for the user: edits, writes and commands, unless the user said
"always" in this chat.

"Always" covers exactly what the user saw. For edits and writes it is per tool
(each still shows its diff in the chat). For a command it is that command, word
for word: a program name alone says nothing about what a command does
(`git -c core.fsmonitor=CMD status` runs CMD, `pytest --basetemp=$HOME` empties
the home folder), so "always" on `git status` covers `git status` and nothing
else. Commands whose meaning is not plain from their words (environment
assignments in front, several commands, redirections, expansions, globs) are
never covered: they ask every time.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from dataclasses import dataclass, field
from typing import Literal

Decision = Literal["yes", "no", "always"]

# Characters after which the shell runs something other than the words shown, or turns a word
# into other words (expansions, globs, braces, comments, escapes, and a tilde where some shell
# expands it: a word's start, after `=` or `:`): a command holding any of them is never covered
# by "always" (`HEAD~1` is fine). Quotes and spaces are fine: with none of these inside,
# `git  'status'` is the same argv as `git status`.
_SHELL_SYNTAX = re.compile(r"""[;&|<>()`$\\*?\[\]{}#!]|(?:^|[\s=:'"])~""")
# A command longer than this is shown as its head and tail with what is hidden between (the
# question's keys must never sit on screen with part of the command out of sight), and
# "always" is never offered for it: the user cannot have seen it whole.
SHOWN_CHARS = 1200
SHOWN_LINES = 20
HEAD_CHARS, HEAD_LINES = 600, 8
TAIL_CHARS, TAIL_LINES = 400, 6
# `NAME=value` in front of the program: an environment assignment, which can make any program
# run another (LD_PRELOAD, PATH, GIT_EXTERNAL_DIFF, GIT_CONFIG_PARAMETERS, PYTEST_ADDOPTS, ...).
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")


def _shown_plainly(command: str) -> bool:
    """No control or invisible characters: what the consent screen draws is what runs (a
    right-to-left override would show the words in another order)."""
    # Categories C (controls, format characters such as U+202E) and Z (spaces other than the
    # plain one: a no-break space looks like a word break and is not one).
    return all(ch in " \t" or unicodedata.category(ch)[0] not in "CZ" for ch in command)


def shown_whole(command: str) -> bool:
    return len(command) <= SHOWN_CHARS and command.count("\n") < SHOWN_LINES


def shown_command(command: str) -> str:
    """The command as the consent question shows it: whole when it fits on a screen, else its
    head and its tail (where `; rm -rf ~` would hide) with how much is hidden between."""
    if shown_whole(command):
        return command
    head = "\n".join(command[:HEAD_CHARS].split("\n")[:HEAD_LINES])
    tail = "\n".join(command[-TAIL_CHARS:].split("\n")[-TAIL_LINES:])
    hidden = command[len(head) : len(command) - len(tail)]
    lines = hidden.count("\n")
    what = f"{len(hidden):,} characters" + (f" ({lines:,} line breaks)" if lines else "")
    return f"{head}\n\n[… {what} hidden here: the command is {len(command):,} characters in all …]\n\n{tail}"


def command_words(command: str) -> tuple[str, ...] | None:
    """The words (argv) a plain command runs, for matching it again; None when "always"
    cannot cover it: shell syntax, an environment assignment in front, hidden characters."""
    if not command.strip() or not _shown_plainly(command) or _SHELL_SYNTAX.search(command):
        return None
    try:
        words = tuple(shlex.split(command))
    except ValueError:  # an unclosed quote
        return None
    if not words or _ASSIGNMENT.match(words[0]):
        return None
    return words


@dataclass
class Consent:
    always_tools: set[str] = field(default_factory=set)
    always_commands: set[tuple[str, ...]] = field(default_factory=set)

    def must_ask(self, tool: str, command: str = "") -> bool:
        """For a tool whose record says it waits for consent (toolbox.ToolSpec.needs_consent):
        whether this call still asks, or an "always" covers it."""
        if tool == "run_command":
            words = command_words(command)
            return words is None or words not in self.always_commands
        return tool not in self.always_tools

    def always_label(self, tool: str, command: str = "") -> str | None:
        """What "always" would cover, for the key's label; None when it cannot be offered."""
        if tool == "run_command":
            if command_words(command) is None or not shown_whole(command):
                return None
            return "always run exactly this command in this chat (any other asks)"
        return f"always {tool.replace('_', ' ')} in this chat"

    def remember(self, tool: str, decision: Decision, command: str = "") -> None:
        if decision != "always":
            return
        if tool == "run_command":
            words = command_words(command)
            if words is not None and shown_whole(command):
                self.always_commands.add(words)
        else:
            self.always_tools.add(tool)
