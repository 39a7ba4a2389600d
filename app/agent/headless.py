"""`dspine chat -p`: the agent session without a screen, for scripts and CI (as `claude -p`,
`codex exec`, `gemini -p` and `opencode run` work).

Nothing here waits on a terminal. What would ask in the chat is decided by the permission
mode (app/agent/modes.py: accept-edits applies edits unasked, plan refuses changes) and by
the rules given on the command line: `--allow TOOL` / `--deny TOOL`, where a command is
allowed only word for word (`run_command:pytest -q`), as "always" covers a command in the
chat. Anything else that would ask is denied, and the model is told so. The chain-limit
question is answered no: a headless run stops rather than loop.

The session's events become one of three outputs (`headless_output.py`); the outcome is
an exit code a script can test (`EXIT_CODES`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .consent import command_words
from .session import Answer, Question

# What a headless run's exit code says (docs/chat.md#headless).
EXIT_OK = 0
EXIT_BAD_INPUT = 2  # a usage error: the prompt, the options, the model (dspine's usual code)
EXIT_ENGINE = 11  # the model or its engine failed (the engines' code)
EXIT_DENIED = 13  # the reply ended, but a tool call was denied (a rule, or nothing allowed it)
EXIT_CODES = {
    EXIT_OK: "the reply ended and nothing was denied",
    EXIT_BAD_INPUT: "bad input: the prompt (one too large for the context too), an option or the model",
    EXIT_ENGINE: "the model or its engine failed",
    EXIT_DENIED: "the reply ended, but a tool call was denied (by a rule, or because nothing allowed it),"
    " or a hook kept the prompt back",
}


class RuleError(ValueError):
    """A rule that names no tool, or a command rule on another tool."""


@dataclass(frozen=True)
class Rule:
    tool: str
    command: tuple[str, ...] | None = None  # run_command only: these exact words

    @classmethod
    def parse(cls, text: str) -> Rule:
        """`edit_file`, `mcp__server__tool`, or `run_command:pytest -q` (a command, word for word)."""
        name, _, command = text.strip().partition(":")
        if not name:
            raise RuleError(f"{text!r} names no tool: give a tool name, e.g. edit_file or run_command:pytest -q")
        if not command:
            return cls(name)
        if name != "run_command":
            raise RuleError(f"{text!r}: only run_command takes a command after ':'")
        words = command_words(command)
        if words is None:
            raise RuleError(
                f"{text!r}: a command rule covers a plain command only (no ;, |, >, $, globs or "
                "variables in front), word for word"
            )
        return cls(name, words)

    def covers(self, tool: str, command: str) -> bool:
        if tool != self.tool:
            return False
        return self.command is None or command_words(command) == self.command


@dataclass
class Decider:
    """The answer to every question a headless run meets, and a record of what it denied."""

    allow: list[Rule] = field(default_factory=list)
    deny: list[Rule] = field(default_factory=list)
    denied: list[dict[str, str]] = field(default_factory=list)
    chain_stopped: bool = False
    # Commands may run with no sandbox (this system has none, or it fails) where a rule allows
    # them: the user said so with --allow-unsandboxed (or `sandbox = false`). Else refused.
    allow_unsandboxed: bool = False

    def refuses(self, tool: str, command: str) -> bool:
        """A --deny rule covers this call (a hook's "allow" does not override it)."""
        return any(rule.covers(tool, command) for rule in self.deny)

    async def ask(self, question: Question) -> Answer:
        if not question.tool:  # the chain limit: stop, never loop unattended
            self.chain_stopped = True
            return "no"
        command = question.command
        if question.outside_sandbox:
            # As "always" never covers it in the chat, no rule does here: a script cannot have
            # seen what the model would run with the network and the whole disk.
            self.denied.append(
                {"tool": question.tool, "command": command, "why": "it asked to run outside the sandbox"}
            )
            return "no"
        if question.guarded:
            # A file that runs later outside the sandbox: the chat always asks, so no rule covers it.
            self.denied.append(
                {
                    "tool": question.tool,
                    "command": command,
                    "why": f"it writes where code runs later ({question.guarded})",
                }
            )
            return "no"
        if question.unsandboxed and not self.allow_unsandboxed:
            self.denied.append(
                {
                    "tool": question.tool,
                    "command": command,
                    "why": f"no sandbox: {question.unsandboxed} --allow-unsandboxed lets allowed commands run so",
                }
            )
            return "no"
        if any(rule.covers(question.tool, command) for rule in self.deny):
            self.denied.append({"tool": question.tool, "command": command, "why": "a --deny rule"})
            return "no"
        if any(rule.covers(question.tool, command) for rule in self.allow):
            return "yes"
        self.denied.append({"tool": question.tool, "command": command, "why": "no --allow rule covers it"})
        return "no"
