"""One streamed chat completion from an OpenAI-compatible server, as events.

Shared by the managed llama-server and remote servers (SGLang, vLLM): SSE
lines in, Delta / ToolCall / StatsUpdate / End out. Streamed `tool_calls`
arrive in pieces keyed by index (id and name first, the arguments' JSON in
fragments); they go out whole, once the stream ends. llama-server's `timings` (per token
with "timings_per_token") carry the draft counts; other servers' `usage`
gives at least the token counts.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .events import STATS_INTERVAL_S, Delta, End, Event, StatsUpdate, ToolCall
from .server_draft import positions
from .stats import Stats
from .thinking import ThinkSplitter

if TYPE_CHECKING:
    import httpx2


class StreamBroken(Exception):
    """The stream ended without [DONE]: the server went away mid-reply."""

    def __init__(self, stats: Stats) -> None:
        super().__init__("stream ended early")
        self.stats = stats


def interrupt(response: httpx2.Response | None) -> None:
    """Stop a stream from another thread: shut the socket down under the reader
    (closing the response object itself is not safe across threads), whose next
    read then ends. The server sees the client go and stops generating."""
    stream = response.extensions.get("network_stream") if response is not None else None
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def apply_timings(stats: Stats, timings: dict) -> None:
    stats.prompt_tokens = int(timings.get("prompt_n", stats.prompt_tokens))
    stats.prompt_cached = int(timings.get("cache_n", stats.prompt_cached))
    stats.prompt_s = float(timings.get("prompt_ms", 0.0)) / 1000
    stats.generated_tokens = int(timings.get("predicted_n", stats.generated_tokens))
    stats.decode_s = float(timings.get("predicted_ms", 0.0)) / 1000
    if "draft_n" in timings:
        stats.drafted = int(timings["draft_n"])
        stats.accepted = int(timings.get("draft_n_accepted", 0))
    if "draft_tested_per_pos" in timings:  # dspine's patched llama-server
        stats.position_tested, stats.position_kept = positions(timings)
    # Each verify step yields its accepted draft tokens plus one of the target's own.
    stats.verify_steps = max(stats.generated_tokens - stats.accepted, 0)


def apply_usage(stats: Stats, usage: dict, decode_s: float) -> None:
    # OpenAI's prompt_tokens counts the whole prompt; ours counts what was processed, so
    # the cached part (from llama-server's timings, when it sent them) comes off.
    if "prompt_tokens" in usage:
        stats.prompt_tokens = max(int(usage["prompt_tokens"]) - stats.prompt_cached, 0)
    stats.generated_tokens = int(usage.get("completion_tokens", stats.generated_tokens))
    if not stats.decode_s:
        stats.decode_s = decode_s
    if not stats.verify_steps:
        stats.verify_steps = stats.generated_tokens


def gather_call(calls: dict[int, dict[str, str]], part: dict[str, Any]) -> None:
    call = calls.setdefault(int(part.get("index", len(calls))), {"id": "", "name": "", "arguments": ""})
    call["id"] = part.get("id") or call["id"]
    function = part.get("function") or {}
    call["name"] += function.get("name") or ""
    call["arguments"] += function.get("arguments") or ""


def finished_calls(calls: dict[int, dict[str, str]]) -> Iterator[ToolCall]:
    for index in sorted(calls):
        call = calls[index]
        yield ToolCall(call["id"] or f"call_{index}", call["name"], call["arguments"] or "{}")


class DraftAttribution:
    """Which chunks of llama-server's stream are accepted drafts, from the cumulative counts
    in its per-token timings: a verify step raises draft_n_accepted by N on the chunk of its
    first token, and its tokens follow one a chunk, the N accepted drafts first, then the
    target's own. Checked against a real llama-server with a mirror and a noisy drafter."""

    def __init__(self) -> None:
        self.accepted = 0
        self.predicted = 0
        self.pending = 0  # accepted drafts announced but not yet streamed

    def drafted(self, timings: dict | None) -> int:
        """The accepted draft tokens among this chunk's; 0 without timings (other servers)."""
        if not timings:
            return 0
        accepted = int(timings.get("draft_n_accepted", self.accepted))
        predicted = int(timings.get("predicted_n", self.predicted))
        self.pending += max(accepted - self.accepted, 0)
        tokens = max(predicted - self.predicted, 0)
        self.accepted, self.predicted = accepted, predicted
        drafted = min(self.pending, tokens)
        self.pending -= drafted
        return drafted


def stream_chat(response: httpx2.Response, cancelled: threading.Event, started: float) -> Iterator[Event]:
    """The events of one streamed completion; a cancel stops it within one line."""
    splitter = ThinkSplitter()
    attribution = DraftAttribution()
    stats = Stats()
    finish = "stop"
    last_stats = 0.0
    first_at: float | None = None
    calls: dict[int, dict[str, str]] = {}
    lines = response.iter_lines()
    while not cancelled.is_set():
        line = next(lines, None)
        if line is None:
            yield from splitter.flush()
            if cancelled.is_set():
                break
            raise StreamBroken(stats.copy())
        line = line.strip()
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            yield from splitter.flush()
            yield from finished_calls(calls)
            yield End(finish, stats.copy())
            return
        chunk: dict[str, Any] = json.loads(payload)
        drafted = attribution.drafted(chunk.get("timings"))
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            thinking = delta.get("reasoning_content") or delta.get("reasoning")
            if (thinking or delta.get("content")) and first_at is None:
                first_at = time.monotonic()
                stats.ttft_s = first_at - started
            if thinking:
                yield Delta(thinking, "thinking", drafted)
            if delta.get("content"):
                yield from splitter.feed(delta["content"], drafted)
            for part in delta.get("tool_calls") or []:
                gather_call(calls, part)
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
        if chunk.get("timings"):
            apply_timings(stats, chunk["timings"])
        if chunk.get("usage"):
            apply_usage(stats, chunk["usage"], time.monotonic() - (first_at or started))
        now = time.monotonic()
        if now - last_stats >= STATS_INTERVAL_S and (chunk.get("timings") or chunk.get("usage")):
            last_stats = now
            yield StatsUpdate(stats.copy())
    yield End("cancelled", stats.copy())


def chat_body(
    messages: list[dict[str, Any]],
    think: bool,
    sampling,
    extra: dict[str, Any] | None = None,
    tools: list[dict[str, Any]] | None = None,
) -> dict:
    body: dict[str, Any] = {
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "chat_template_kwargs": {"enable_thinking": think},
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "min_p": sampling.min_p,
        "presence_penalty": sampling.presence_penalty,
    }
    if tools:
        body["tools"] = tools
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    if sampling.max_tokens is not None:
        body["max_tokens"] = sampling.max_tokens
    body.update(extra or {})
    return body
