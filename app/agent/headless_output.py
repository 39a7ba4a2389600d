"""What `dspine chat -p` prints: the session's events in one of three formats.

- `text`: the answer as it streams, on standard output; tool calls and notices on
  standard error, one line each.
- `json`: one object at the end: the answer, why it stopped, usage, speed, acceptance,
  the tool calls and what was denied, the chat's id (for `--resume`) and the exit code.
- `stream-json`: one JSON object a line as things happen (`text`, `tool_call`,
  `tool_result`, `notice`), then the same `result` object as `json`.

Model text is data: it is written as it came (JSON escapes it; plain text strips nothing
but terminal escape sequences, as the chat does).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TextIO

from backends.events import Delta, End, Error
from backends.stats import Stats

from ..terminal_text import controls_shown, for_terminal
from .headless import EXIT_BAD_INPUT, EXIT_DENIED, EXIT_ENGINE, EXIT_OK, Decider
from .session import Notice, ReplyEnded, ReplyEvents, SessionEvent, ToolFinished, ToolStarted
from .todos import Todo

OutputFormat = Literal["text", "json", "stream-json"]
FORMATS: tuple[OutputFormat, ...] = ("text", "json", "stream-json")
# What to do where a prompt did not go to the model (the chat's notice names /compact and /new).
NOT_SENT_FIXES = {
    "too_large": "run again with a larger --ctx (as far as the model's window allows) or a shorter prompt",
    "model_too_large": "the model wrote more than the context holds: ask for smaller steps, or run with a larger --ctx",
    "blocked": "the hook's reason says why: change the prompt, or the hook in the settings that hold it",
}


@dataclass
class HeadlessOutput:
    form: OutputFormat
    out: TextIO
    err: TextIO
    decider: Decider
    answer: str = ""  # the last reply's answer (a tool round's reply is followed by another)
    error: Error | None = None
    end: End | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    totals: Stats = field(default_factory=Stats)  # summed over the run's replies
    decode_s: float = 0.0
    first_ttft: float | None = None
    todos: Callable[[], list[Todo]] | None = None  # the model's todo list as it is now (the toolbox's)
    not_sent: str = ""  # why a prompt did not go to the model (session.Notice.not_sent), if one did not
    not_run: list[str] = field(default_factory=list)  # the project's hooks and servers not used, and why
    blocked: list[dict[str, str]] = field(default_factory=list)  # calls a PreToolUse hook blocked, and why

    def _line(self, event_type: str, **fields: Any) -> None:
        # ASCII only: a lone surrogate or a U+2028 in model text never breaks a line reader.
        self.out.write(json.dumps({"type": event_type, **fields}) + "\n")
        self.out.flush()

    async def emit(self, event: SessionEvent) -> None:
        if isinstance(event, ReplyEvents):
            for item in event.events:
                if isinstance(item, Delta) and item.text:
                    if self.form == "stream-json":
                        self._line("text", kind=item.kind, text=item.text)
                    elif self.form == "text" and item.kind == "answer":
                        self.out.write(for_terminal(item.text).encode("utf-8", "replace").decode("utf-8"))
                        self.out.flush()
        elif isinstance(event, ReplyEnded):
            self.answer = event.answer
            if event.error is not None:
                self.error = event.error
            if event.end is not None:
                self.end = event.end
                self._add(event.end.stats)
        elif isinstance(event, ToolStarted):
            call = {"id": event.call.id, "name": event.call.name, "arguments": event.call.arguments}
            if self.form == "stream-json":
                self._line("tool_call", **call)
            elif self.form == "text":
                if self.answer:
                    self.out.write("\n")
                self.err.write(f"⚙ {controls_shown(event.call.name)} {controls_shown(event.call.arguments)[:200]}\n")
        elif isinstance(event, ToolFinished):
            record = {"id": event.call.id, "name": event.call.name, "decision": event.decision}
            if event.unsandboxed:
                record["unsandboxed"] = event.unsandboxed  # every form says a command ran with no sandbox
            self.tool_calls.append({**record, "arguments": event.call.arguments})
            if event.decision == "blocked by a hook":
                # A guard said no: the run did not do what was asked, and a script must be able to tell.
                self.blocked.append({"tool": event.call.name, "why": event.result})
            if self.form == "stream-json":
                self._line("tool_result", **record, result=event.result)
                if event.call.name == "todo_write" and self.todos is not None:
                    self._line("todos", todos=[asdict(t) for t in self.todos()])
            elif self.form == "text":
                self.err.write(f"  → {event.decision}\n")
                if event.unsandboxed:
                    self.err.write(f"  ⚠ ran with NO sandbox: {event.unsandboxed}\n")
        elif isinstance(event, Notice):
            if event.not_sent:
                # The run failed, whatever came before: the error (and its exit code) a script sees.
                self.not_sent = event.not_sent
                self.error = Error(event.text, NOT_SENT_FIXES[event.not_sent])
            if self.form == "stream-json":
                self._line("notice", severity=event.severity, text=event.text)
            elif not event.not_sent:  # that one is the closing error
                self.err.write(f"{event.severity}: {for_terminal(event.text)}\n")

    def _add(self, stats: Stats) -> None:
        t = self.totals
        t.prompt_tokens += stats.prompt_tokens
        t.generated_tokens += stats.generated_tokens
        t.drafted += stats.drafted
        t.accepted += stats.accepted
        t.verify_steps += stats.verify_steps
        t.decode_s += stats.decode_s
        if self.first_ttft is None and stats.ttft_s is not None:
            self.first_ttft = stats.ttft_s

    @property
    def exit_code(self) -> int:
        if self.not_sent == "too_large":
            return EXIT_BAD_INPUT
        if self.not_sent == "blocked":
            return EXIT_DENIED
        if self.error is not None:
            return EXIT_ENGINE
        return EXIT_DENIED if self.decider.denied or self.blocked else EXIT_OK

    def result(self, session_id: int | None, model: str) -> dict[str, Any]:
        t = self.totals
        return {
            "type": "result",
            "result": self.answer,
            "is_error": self.error is not None,
            "error": {"message": self.error.message, "fix": self.error.fix} if self.error else None,
            "stop_reason": self.end.reason if self.end else None,
            "stop_note": self.end.note or None if self.end else None,  # why dspine ended it (a loop)
            "exit_code": self.exit_code,
            "session_id": session_id,
            "model": model,
            "usage": {"prompt_tokens": t.prompt_tokens, "generated_tokens": t.generated_tokens},
            "speed": {"tokens_per_s": t.tokens_per_s, "ttft_s": self.first_ttft},
            "acceptance": {
                "drafted": t.drafted,
                "accepted": t.accepted,
                "rate": t.acceptance_rate,
                "length": t.acceptance_length,
            },
            "tool_calls": self.tool_calls,
            "denied": self.decider.denied,
            "blocked": self.blocked,
            "chain_stopped": self.decider.chain_stopped,
            "not_run": self.not_run,
        }

    def finish(self, session_id: int | None, model: str) -> int:
        """The closing output; returns the exit code."""
        result = self.result(session_id, model)
        if self.form == "json":
            self.out.write(json.dumps(result, indent=2) + "\n")
        elif self.form == "stream-json":
            self._line("result", **{k: v for k, v in result.items() if k != "type"})
        else:
            if self.answer and not self.answer.endswith("\n"):
                self.out.write("\n")
            if self.error is not None:
                self.err.write(f"error: {for_terminal(self.error.message)}\nfix: {for_terminal(self.error.fix)}\n")
            for denied in self.decider.denied:
                what = f"{denied['tool']} {denied['command']}".strip()
                hint = "; --allow lets it run" if denied["why"] == "no --allow rule covers it" else ""
                self.err.write(f"denied: {controls_shown(what)} ({denied['why']}{hint})\n")
            for blocked in self.blocked:
                self.err.write(f"blocked: {controls_shown(blocked['tool'])} ({for_terminal(blocked['why'])})\n")
            if self.decider.chain_stopped:
                self.err.write("stopped: the model chained too many rounds of tool calls\n")
        self.out.flush()
        return self.exit_code


def startup_failure(form: OutputFormat, message: str, fix: str, code: int, model: str | None) -> dict[str, Any]:
    """The `result` of a run that failed before its first request (a bad option, an engine
    that did not start, a remote server that refused the key), in the shape `json` and
    `stream-json` end with."""
    return {
        "type": "result",
        "result": "",
        "is_error": True,
        "error": {"message": message, "fix": fix},
        "stop_reason": None,
        "stop_note": None,
        "exit_code": code,
        "session_id": None,
        "model": model,
        "usage": {"prompt_tokens": 0, "generated_tokens": 0},
        "speed": {"tokens_per_s": None, "ttft_s": None},
        "acceptance": {"drafted": 0, "accepted": 0, "rate": None, "length": None},
        "tool_calls": [],
        "denied": [],
        "blocked": [],
        "chain_stopped": False,
        "not_run": [],
    }
