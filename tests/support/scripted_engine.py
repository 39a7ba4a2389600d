"""Test doubles of the engine interface: ScriptedEngine streams deltas and statistics on a
schedule; ProjectEngine works through a project with tool calls and counts its context."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field

from app.agent.compaction import is_summary_request
from backends.base import estimate_tokens
from backends.events import Delta, End, Error, StatsUpdate, ToolCall
from backends.stats import Stats


def tool_call(name: str, suffix: str = "", **args) -> ToolCall:
    """A tool call for a script, its id made of the name (and `suffix`, where one turn's
    calls of the same tool must differ)."""
    return ToolCall(f"c_{name}{suffix}", name, json.dumps(args))


@dataclass
class ScriptedEngine:
    answer: list[str] = field(default_factory=lambda: ["Here is ", "the **answer**.\n\n", "```python\nprint(1)\n```\n"])
    thinking: list[str] = field(default_factory=list)
    tokens_per_s: float = 200.0
    speculative: bool = True
    name: str = "scripted"
    drafted_pieces: set[int] = field(default_factory=set)  # answer pieces sent as accepted drafts
    drafter_name: str | None = "scripted-drafter.gguf"
    calls: list[dict] = field(default_factory=list)
    # One script a reply, in order (the last repeats): text pieces and tool calls. Empty:
    # every reply is `answer`.
    turns: list[list[str | ToolCall]] = field(default_factory=list)
    last_token_at: float = 0.0
    context_size: int | None = 8192  # what the session's budget counts against
    _cancel: threading.Event = field(default_factory=threading.Event)

    @property
    def drafter(self) -> str | None:
        return "dspine" if self.speculative else None

    def cancel(self) -> None:
        self._cancel.set()

    def count_tokens(self, messages, tools=None, think=True) -> int:
        return estimate_tokens(messages, tools)

    def close(self) -> None:
        pass

    def stream(self, messages, think=True, sampling=None, n_max=None, tools=None):
        self._cancel.clear()
        self.calls.append({"messages": messages, "think": think, "tools": tools})
        if self.turns:
            yield from self._turn(self.turns[min(len(self.calls), len(self.turns)) - 1])
            return
        stats = Stats(prompt_tokens=len(messages) * 10, prompt_s=0.01)
        started = time.monotonic()
        pieces = [(t, "thinking") for t in self.thinking] + [(a, "answer") for a in self.answer]
        for index, (text, kind) in enumerate(pieces):
            if self._cancel.is_set():
                yield End("cancelled", stats.copy())
                return
            # The schedule of a model producing tokens, paced by the clock (per-token sleeps
            # would drift at high rates).
            ahead = (index + 1) / self.tokens_per_s - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
            self.last_token_at = time.monotonic()
            if stats.ttft_s is None:
                stats.ttft_s = time.monotonic() - started
            answer_index = index - len(self.thinking)
            yield Delta(text, kind, 1 if kind == "answer" and answer_index in self.drafted_pieces else 0)
            stats.generated_tokens = index + 1
            stats.decode_s = time.monotonic() - started
            if self.speculative:
                stats.drafted += 4
                stats.accepted += 3
                stats.verify_steps = max(1, stats.generated_tokens // 4)
            else:
                stats.verify_steps = stats.generated_tokens
            yield StatsUpdate(stats.copy())
        yield End("stop", stats.copy())

    def _turn(self, script: list[str | ToolCall]):
        stats = Stats(prompt_tokens=10, prompt_s=0.01, ttft_s=0.001)
        for piece in script:
            if self._cancel.is_set():
                yield End("cancelled", stats.copy())
                return
            yield Delta(piece) if isinstance(piece, str) else piece
            stats.generated_tokens += 4
            stats.drafted += 4
            stats.accepted += 3
            stats.verify_steps += 1
            stats.decode_s += 0.01
        calls = any(isinstance(p, ToolCall) for p in script)
        yield End("tool_calls" if calls else "stop", stats.copy())


@dataclass
class ProjectEngine:
    """A model working through a project: each prompt `read mod07` makes it read that file,
    then it answers. A summary request (its last message asks for one) gets a summary.
    Every request is checked against the context as the session counts it."""

    context_size: int = 3072
    name: str = "scripted"
    drafter: str | None = None
    drafter_name: str | None = None
    calls: list[dict] = field(default_factory=list)
    summaries: list[list[dict]] = field(default_factory=list)
    summary_tools: list[list[dict] | None] = field(default_factory=list)
    summary_at: list[int] = field(default_factory=list)  # chat requests before each summary request
    overflow_on: set[int] = field(default_factory=set)  # request numbers answered with an overflow error
    always_overflow: bool = False

    def count_tokens(self, messages, tools=None, think=True) -> int:
        return estimate_tokens(messages, tools)

    def cancel(self) -> None:
        pass

    def close(self) -> None:
        pass

    def stream(self, messages, think=True, sampling=None, n_max=None, tools=None):
        if is_summary_request(messages):
            self.summaries.append(messages)
            self.summary_tools.append(tools)
            self.summary_at.append(len(self.calls))
            assert not think and sampling is not None and sampling.max_tokens
            yield Delta("## Goal\nRead the modules one by one.\n## Open problems\nnone")
            yield End("stop", Stats(prompt_tokens=10))
            return
        self.calls.append({"messages": messages, "tools": tools, "tokens": self.count_tokens(messages, tools)})
        number = len(self.calls)
        if self.always_overflow or number in self.overflow_on:
            n = self.count_tokens(messages, tools)
            yield Error(
                f'llama-server answered 400: {{"error": {{"type": "exceed_context_size_error", "message": '
                f'"request ({n} tokens) exceeds the available context size ({self.context_size} tokens)"}}}}',
                overflow=True,
            )
            return
        assert self.count_tokens(messages, tools) <= self.context_size, "a request over the context"
        last = messages[-1]
        if last["role"] == "user" and last["content"].startswith("read "):
            name = last["content"].split()[1]
            yield ToolCall(f"call_{number}", "read_file", json.dumps({"path": f"src/{name}.py"}))
            yield End("tool_calls", Stats(prompt_tokens=self.count_tokens(messages, tools)))
            return
        yield Delta(f"Done with request {number}.")
        yield End("stop", Stats(prompt_tokens=self.count_tokens(messages, tools), generated_tokens=5))
