"""The context budget: how many tokens the next request takes against what the engine
holds per conversation, less a reserve for the reply. Counted with the model's own
tokenizer where the engine has one (llama-server's /apply-template + /tokenize,
llama.cpp's tokenizer in-process), estimated elsewhere, and corrected after each
reply by the prompt size the engine reports."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from backends.base import estimate_tokens
from backends.events import Error
from backends.stats import Stats

# When the engine cannot say (a remote server the user gave no --ctx for): a context most
# OpenAI-compatible deployments have at least.
FALLBACK_CONTEXT = 8192
# After a compaction the prompt should sit this far under the budget, so the next turns do not
# compact again at once.
TARGET_SHARE = 0.6

_OVERFLOW_WORDS = re.compile(
    r"exceed_context_size|exceeds the available context|context_length_exceeded|maximum context length"
    r"|prompt is too long|the context may be full|the prompt has \d+ tokens, the context \d+",
    re.I,
)


def is_overflow(error: Error) -> bool:
    """An engine saying the prompt did not fit: flagged by dspine's engines, recognised by its
    words from anything else."""
    return error.overflow or bool(_OVERFLOW_WORDS.search(error.message))


_REPORTED_CONTEXT = re.compile(
    r'"n_ctx":\s*(\d+)|available context size \((\d+) tokens\)|maximum context length is (\d+)|the context (\d+)'
)


def reported_context(error: Error) -> int | None:
    """The context an overflow error names (llama-server's n_ctx, OpenAI's and vLLM's wording)."""
    found = _REPORTED_CONTEXT.search(error.message)
    if found is None:
        return None
    return int(next(g for g in found.groups() if g))


def reply_reserve(n_ctx: int, think: bool, max_tokens: int | None = None) -> int:
    """Room kept for the reply: its max output where one is set, else a share of the context
    (a larger one with thinking on: the thinking comes before the answer)."""
    if max_tokens:
        return min(max_tokens, n_ctx // 2)
    share = n_ctx // 4 if think else n_ctx // 8
    return max(min(share, 8192 if think else 4096), min(256, n_ctx // 4))


# Said once a chat (the screen's note, headless -p's warning) when tools are on and the model's
# chat template leaves their list out: the model can only chat.
TOOLS_UNSEEN_NOTE = (
    "This model's chat template leaves the tool list out, so it cannot read, search, edit or "
    "run anything in the project: it chats only (/context shows it). A model whose template "
    "knows tools (Qwen3, Qwen3.8) can."
)


@dataclass(frozen=True)
class Usage:
    """Where the context goes. `system`: the system prompt with AGENTS.md; `tools`: the tool
    list; `history`: the conversation before this turn; `turn`: this turn so far."""

    n_ctx: int
    reserve: int
    system: int = 0
    tools: int = 0
    history: int = 0
    turn: int = 0
    exact: bool = True  # counted by the model's tokenizer (False: estimated)
    tools_unseen: bool = False  # tools are on, but the chat template leaves their list out

    @property
    def used(self) -> int:
        return self.system + self.tools + self.history + self.turn

    @property
    def available(self) -> int:
        return max(self.n_ctx - self.reserve, 1)

    @property
    def share(self) -> float:
        return self.used / self.available

    def meter(self) -> str:
        """For the readout: `ctx 2.1k/6.1k`."""
        return f"ctx {_k(self.used)}/{_k(self.available)}" + ("" if self.exact else "~")

    def breakdown(self) -> str:
        rows = [
            ("system prompt + AGENTS.md", self.system),
            ("tools", self.tools),
            ("history", self.history),
            ("this turn", self.turn),
        ]
        lines = [f"- {name}: {n:,} tokens" for name, n in rows]
        lines += [
            f"- **used: {self.used:,} of {self.available:,}** ({self.share:.0%})",
            f"- the context is {self.n_ctx:,} tokens; {self.reserve:,} are kept for the reply",
        ]
        if not self.exact:
            lines.append("- estimated: this engine has no tokenizer dspine can ask")
        if self.tools_unseen:
            lines.append("- the model's chat template leaves the tool list out: this model cannot call the tools")
        return "\n".join(lines)


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


Counter = Callable[[list[dict[str, Any]], list[dict[str, Any]] | None], int]


class Budget:
    """Counts prompts for one engine and remembers how far its counts were off."""

    def __init__(
        self, engine: Any, think: bool = True, n_ctx: int | None = None, max_tokens: int | None = None
    ) -> None:
        self.engine = engine
        self.think = think
        self.max_tokens = max_tokens
        self.n_ctx = getattr(engine, "context_size", None) or n_ctx or FALLBACK_CONTEXT
        # Only a remote server has no tokenizer to ask: its counts are estimates, corrected by its reports.
        self.exact = getattr(engine, "name", "") != "remote"
        self.correction = 1.0  # reported / counted, from the last reply (estimates only)
        self._last_counted = 0

    @property
    def reserve(self) -> int:
        return reply_reserve(self.n_ctx, self.think, self.max_tokens)

    @property
    def available(self) -> int:
        return max(self.n_ctx - self.reserve, 1)

    @property
    def target(self) -> int:
        """Where a compaction aims: well under the budget."""
        return int(self.available * TARGET_SHARE)

    def count(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
        counter = getattr(self.engine, "count_tokens", None)
        counted: int | None = None
        if counter is not None:
            try:
                counted = int(counter(messages, tools, self.think))
            except Exception:  # a tokenizer that fails must not stop the chat: estimate instead
                counted = None
        if counted is None:
            counted = estimate_tokens(messages, tools)
        if not self.exact:
            counted = int(counted * self.correction)
        return counted

    def overflowed(self, error: Error) -> None:
        """The engine refused a prompt this budget let through: believe the context it names, and
        count estimates fuller from now on."""
        named = reported_context(error)
        if named and named < self.n_ctx:
            self.n_ctx = named
        if not self.exact:
            self.correction = min(self.correction * 1.25, 4.0)

    def counted_request(self, counted: int) -> None:
        self._last_counted = counted

    def reported(self, stats: Stats | None) -> None:
        """The engine's own prompt size for the request just made (processed + reused from cache)
        sets the correction for estimated counts."""
        if stats is None or self._last_counted <= 0:
            return
        reported = stats.prompt_tokens + stats.prompt_cached
        if reported <= 0 or self.exact:
            return
        raw = self._last_counted / self.correction
        self.correction = min(max(reported / raw, 0.5), 4.0)

    def usage(
        self, system: list[dict[str, Any]], tools: list[dict[str, Any]] | None, history: list[dict], turn: list[dict]
    ) -> Usage:
        """The breakdown, each part the difference of two counts (a template adds text between parts)."""
        base = self.count(system) if system else 0
        with_tools = self.count(system, tools) if tools else base
        with_history = self.count(system + history, tools) if history else with_tools
        whole = self.count(system + history + turn, tools) if turn else with_history
        return Usage(
            self.n_ctx,
            self.reserve,
            base,
            max(with_tools - base, 0),
            max(with_history - with_tools, 0),
            max(whole - with_history, 0),
            self.exact,
            self._unseen(tools, base, with_tools),
        )

    def tools_unseen(self, system: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> bool:
        """Whether the chat template leaves the tool list out (the prompt counts the same with it)."""
        if not tools or not self.exact:
            return False
        return self._unseen(tools, self.count(system), self.count(system, tools))

    def _unseen(self, tools: list[dict[str, Any]] | None, without: int, with_tools: int) -> bool:
        # Estimates always grow with the tools: only the model's own tokenizer can say.
        return bool(tools) and self.exact and with_tools <= without
