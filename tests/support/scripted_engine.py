"""A test double of the engine interface: deltas and statistics on a schedule."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from backends.base import estimate_tokens
from backends.events import Delta, End, StatsUpdate, ToolCall
from backends.stats import Stats


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
