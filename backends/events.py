"""What an engine streams: text deltas, tool calls, statistics, the end, or an error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from .stats import Stats

# Engines send statistics at most this often (20 times a second, the pace at which the
# chat redraws; text deltas go out as they come).
STATS_INTERVAL_S = 0.05


def valid_text(text: str) -> str:
    """Text as it may go on: a lone surrogate (JSON's `"\\ud800"` from a server) is U+FFFD, so
    nothing that saves or draws it later (SQLite, a terminal, a JSON line) fails on it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)
    return text


def _made_valid(event: object, *names: str) -> None:
    for name in names:
        value = getattr(event, name)
        if isinstance(value, str):
            object.__setattr__(event, name, valid_text(value))


@dataclass(frozen=True)
class Delta:
    """Text as it enters dspine from an engine or a server: made valid here (`valid_text`)."""

    text: str
    kind: Literal["answer", "thinking"] = "answer"
    # How many of its tokens were accepted drafts; 0 also when the engine cannot tell.
    # Engines send a delta per token, so a delta with drafted > 0 is drafted text.
    drafted: int = 0

    def __post_init__(self) -> None:
        _made_valid(self, "text")


@dataclass(frozen=True)
class ToolCall:
    """The model asks for a tool: OpenAI's shape, the arguments as JSON text."""

    id: str
    name: str
    arguments: str  # a JSON object, as the model wrote it (it may not parse)

    def __post_init__(self) -> None:
        _made_valid(self, "id", "name", "arguments")

    def as_message_part(self) -> dict:
        """The entry of an assistant message's `tool_calls`."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class StatsUpdate:
    stats: Stats


# Why a reply ended: the model stopped, it reached max_tokens, the user cancelled it, it
# asked for tools (the reply goes on once their results are in), or dspine stopped a loop
# (backends/reply_guard.py).
EndReason = Literal["stop", "length", "cancelled", "tool_calls", "loop"]
END_REASONS: tuple[EndReason, ...] = get_args(EndReason)


def end_reason(finish: str) -> EndReason:
    """A server's `finish_reason` in these words: OpenAI's older "function_call" is
    "tool_calls"; one dspine does not tell apart (content_filter, ...) ends it as "stop"."""
    if finish == "function_call":
        return "tool_calls"
    for reason in END_REASONS:
        if finish == reason and reason != "loop":  # dspine's own word, never a server's
            return reason
    return "stop"


@dataclass(frozen=True)
class End:
    reason: EndReason
    stats: Stats
    note: str = ""  # said to the user where dspine ended the reply (a loop, the reply limit)


@dataclass(frozen=True)
class Error:
    message: str
    fix: str = ""
    # The prompt did not fit in the context (llama-server's exceed_context_size_error, a
    # llama.cpp decode failure, a remote's 400 about the context): shorten it and try again.
    overflow: bool = False

    def __post_init__(self) -> None:
        _made_valid(self, "message", "fix")


Event = Delta | ToolCall | StatsUpdate | End | Error
