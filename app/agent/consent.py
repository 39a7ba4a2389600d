"""What waits for the user: edits, writes and commands, unless the user said
"always" in this chat (per tool; for commands, per leading word)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Literal

Decision = Literal["yes", "no", "always"]

# A command with any of these is more than one program: "always for git" must not let
# `git status; rm -rf ~` through.
_SHELL_CONTROL = re.compile(r"[;&|`<>\n]|\$\(")


def leading_word(command: str) -> str | None:
    """The program a simple command runs (`git` for `git status`); None for a compound one."""
    if _SHELL_CONTROL.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    words = [w for w in words if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w)]  # VAR=1 cmd
    return words[0] if words else None


@dataclass
class Consent:
    always_tools: set[str] = field(default_factory=set)
    always_commands: set[str] = field(default_factory=set)

    def must_ask(self, tool: str, command: str = "") -> bool:
        """For a tool whose record says it waits for consent (toolbox.ToolSpec.needs_consent):
        whether this call still asks, or an "always" covers it."""
        if tool == "run_command":
            word = leading_word(command)
            return word is None or word not in self.always_commands
        return tool not in self.always_tools

    def always_label(self, tool: str, command: str = "") -> str | None:
        """What "always" would cover, for the key's label; None when it cannot be offered."""
        if tool == "run_command":
            word = leading_word(command)
            return f"always run `{word}` in this chat" if word else None
        return f"always {tool.replace('_', ' ')} in this chat"

    def remember(self, tool: str, decision: Decision, command: str = "") -> None:
        if decision != "always":
            return
        if tool == "run_command":
            word = leading_word(command)
            if word:
                self.always_commands.add(word)
        else:
            self.always_tools.add(tool)
