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

from .events import STATS_INTERVAL_S, Delta, End, EndReason, Event, StatsUpdate, ToolCall, end_reason
from .reply_spec import apply_sglang, apply_vllm
from .server_draft import positions, reached
from .stats import Stats, count_ngram_step, count_positions
from .thinking import ThinkSplitter

if TYPE_CHECKING:
    import httpx2


# Chunks read past max_tokens before the stream is cut: a server that honours the limit sends
# its last chunks (finish_reason, usage, llama-server's final timings with the draft counts)
# within them; one that ignores it is cut here, and nothing past the limit is shown.
LIMIT_GRACE = 8


class StreamBroken(Exception):
    """The stream ended without [DONE]: the server went away mid-reply."""

    def __init__(self, stats: Stats) -> None:
        super().__init__("stream ended early")
        self.stats = stats


class StreamMalformed(ValueError):
    """The server sent something an OpenAI-compatible stream never holds."""


class StreamStalled(Exception):
    """The server kept the stream open with nothing in it (comments, empty deltas) too long."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"nothing but keep-alives for {seconds:g} s")
        self.seconds = seconds


# What a stream may hold, whatever a server sends: one line (an SSE event; a whole reply's
# chunk is kilobytes), one tool call's arguments (a file written whole is at most megabytes).
MAX_LINE_BYTES = 8 * 2**20
MAX_ARGUMENTS_CHARS = 8 * 2**20
MAX_ERROR_BYTES = 4096  # of an error answer's body, read for its message


def read_bounded(response: httpx2.Response, limit: int = MAX_ERROR_BYTES) -> bytes:
    """At most `limit` bytes of a body (an error answer's, which a hostile server sends without end)."""
    kept = bytearray()
    for chunk in response.iter_bytes():
        kept += chunk[: limit - len(kept)]
        if len(kept) >= limit:
            break
    return bytes(kept)


def bounded_lines(chunks: Iterator[bytes], limit: int = MAX_LINE_BYTES) -> Iterator[str]:
    """The lines of a byte stream, none over `limit` bytes (StreamMalformed past it): a line
    without end must not take the memory."""
    pending = bytearray()
    for chunk in chunks:
        start = len(pending)  # what was pending holds no line break: only the new bytes are searched
        pending += chunk
        while (cut := pending.find(b"\n", start)) >= 0:
            yield pending[:cut].decode("utf-8", "replace")
            del pending[: cut + 1]
            start = 0
        if len(pending) > limit:
            raise StreamMalformed(f"it sent a line of over {limit // 2**20} MiB")
    if pending:
        yield pending.decode("utf-8", "replace")


def _text(value: Any, where: str) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    raise StreamMalformed(f"its {where} is {type(value).__name__}, not text")


def _count(timings: dict, key: str, default: int) -> int:
    value = timings.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 2**53:
        raise StreamMalformed(f"its {key} is {str(value)[:40]!r}, not a count")
    return int(value)


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
    stats.prompt_tokens = _count(timings, "prompt_n", stats.prompt_tokens)
    stats.prompt_cached = _count(timings, "cache_n", stats.prompt_cached)
    stats.prompt_s = float(timings.get("prompt_ms", 0.0)) / 1000
    stats.generated_tokens = _count(timings, "predicted_n", stats.generated_tokens)
    # llama-server times generation from its first token: with one token in, predicted_ms
    # is about a microsecond, and the rate from it a meaningless million tok/s.
    stats.decode_s = float(timings.get("predicted_ms", 0.0)) / 1000 if stats.generated_tokens > 1 else 0.0
    if "draft_n" in timings:
        stats.drafted = _count(timings, "draft_n", 0)
        stats.accepted = _count(timings, "draft_n_accepted", 0)
    if "draft_tested_per_pos" in timings:
        # dspine's patched llama-server counts by position itself: exact, so it replaces
        # what StepPositions inferred from the rises of draft_n.
        stats.position_tested, stats.position_kept = positions(timings)
        stats.position_reached = reached(timings)
    # Each verify step yields its accepted draft tokens plus one of the target's own. Mid-stream,
    # llama-server announces a step's accepted drafts on the chunk of its first token, before
    # the rest are counted as generated: the difference then falls for a moment, and the
    # readout showed "accept len 26" mid-reply on a pair that ended at 7.2. Steps only grow.
    stats.verify_steps = max(stats.generated_tokens - stats.accepted, stats.verify_steps, 0)


def check_counts(stats: Stats) -> None:
    """Every accepted token is a drafted one and a generated one; a server saying otherwise
    would give acceptance above 100% and steps below zero. Checked on the final counts only:
    mid-stream, llama-server announces a verify step's accepted drafts on the chunk of its
    first token, before the rest of its tokens are counted as generated."""
    if stats.accepted > stats.drafted or stats.accepted > stats.generated_tokens:
        raise StreamMalformed(
            f"its timings say {stats.accepted} draft tokens accepted of {stats.drafted} drafted "
            f"and {stats.generated_tokens} generated"
        )


# Where a server sends no timings, this client's clock times the reply from its first text to
# its end; a reply that arrives at once (a scripted server, a proxy that buffers the stream)
# spans too little of it to time: 24 tokens in 0.3 ms read 80,000 tok/s. Below this span the
# speed is not known, and the readout says so rather than show that.
MIN_TIMED_SPAN_S = 0.05


def timed_span(since: float) -> float:
    """Seconds from `since` to now, or 0.0 (not timed) where that is too short to time a reply."""
    span = time.monotonic() - since
    return span if span >= MIN_TIMED_SPAN_S else 0.0


def apply_usage(stats: Stats, usage: dict, decode_s: float) -> None:
    # OpenAI's prompt_tokens counts the whole prompt; ours counts what was processed, so
    # the cached part (from llama-server's timings, when it sent them) comes off.
    if "prompt_tokens" in usage:
        stats.prompt_tokens = max(_count(usage, "prompt_tokens", 0) - stats.prompt_cached, 0)
    stats.generated_tokens = _count(usage, "completion_tokens", stats.generated_tokens)
    if not stats.decode_s:
        stats.decode_s = decode_s
    if not stats.verify_steps:
        stats.verify_steps = stats.generated_tokens


def _object(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise StreamMalformed(f"its {where} is {type(value).__name__}, not an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise StreamMalformed(f"its {where} is {type(value).__name__}, not a list")
    return value


def parse_chunk(payload: str) -> dict[str, Any]:
    """One `data:` line's chunk; what is not a JSON object is StreamMalformed, said in words
    (Python's "Expecting value: line 1 column 1" reached the user before)."""
    try:
        chunk = json.loads(payload)
    except RecursionError:
        raise StreamMalformed("a data line nested too deeply to be a chunk") from None
    except ValueError:
        raise StreamMalformed("a data line that is not JSON") from None
    if not isinstance(chunk, dict):
        raise StreamMalformed(f"it sent {type(chunk).__name__} where a chunk object belongs")
    for name in ("timings", "usage"):
        if chunk.get(name) is not None:
            _object(chunk[name], name)
    return chunk


def gather_call(calls: dict[int, dict[str, str]], part: Any) -> None:
    part = _object(part, "delta.tool_calls entry")
    index = part.get("index", len(calls))
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 1024:
        raise StreamMalformed(f"its tool call index is {str(index)[:40]!r}, not a small whole number")
    call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
    call["id"] = _text(part.get("id"), "tool call id") or call["id"]
    function = _object(part.get("function"), "tool call function")
    call["name"] += _text(function.get("name"), "tool call name")
    call["arguments"] += _text(function.get("arguments"), "tool call arguments")
    if len(call["arguments"]) > MAX_ARGUMENTS_CHARS:
        raise StreamMalformed(f"a tool call's arguments ran past {MAX_ARGUMENTS_CHARS // 2**20} MiB")


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
        accepted = _count(timings, "draft_n_accepted", self.accepted)
        predicted = _count(timings, "predicted_n", self.predicted)
        self.pending += max(accepted - self.accepted, 0)
        tokens = max(predicted - self.predicted, 0)
        self.accepted, self.predicted = accepted, predicted
        drafted = min(self.pending, tokens)
        self.pending -= drafted
        return drafted


class StepPositions:
    """Acceptance by draft position from llama-server's per-token timings: a verify step
    raises draft_n by the tokens it drafted and draft_n_accepted by those kept, on the chunk
    of its first token, so each rise is one step (checked against a real llama-server)."""

    def __init__(self, ngram_above: int | None = None) -> None:
        self.drafted = 0
        self.accepted = 0
        # A step that drafted more than this came from the n-gram drafter chained first (its
        # drafts are never shorter than its n_min, the model drafter's never longer than its
        # length); None: not told apart.
        self.ngram_above = ngram_above

    def feed(self, stats: Stats, timings: dict | None) -> None:
        if not timings or "draft_n" not in timings:
            return
        drafted, accepted = int(timings["draft_n"]), int(timings.get("draft_n_accepted", 0))
        if drafted > self.drafted:
            step, kept = drafted - self.drafted, max(accepted - self.accepted, 0)
            count_positions(stats, step, kept)
            if self.ngram_above is not None and step > self.ngram_above:
                count_ngram_step(stats, step, kept)
        self.drafted, self.accepted = max(drafted, self.drafted), max(accepted, self.accepted)


class _ReplySoFar:
    """What one streamed completion has brought so far: the text in flight, the tool calls in
    pieces, the figures, and when it last made progress."""

    def __init__(self, started: float, max_tokens: int | None, ngram_above: int | None) -> None:
        self.started = started
        self.max_tokens = max_tokens
        self.splitter = ThinkSplitter()
        self.attribution = DraftAttribution()
        self.positions = StepPositions(ngram_above)
        self.stats = Stats()
        self.finish: EndReason = "stop"
        self.last_stats = 0.0
        self.first_at: float | None = None
        self.calls: dict[int, dict[str, str]] = {}
        self.chunks_with_text = 0
        self.progress_at = time.monotonic()

    def chunk_events(self, chunk: dict[str, Any]) -> Iterator[Event]:
        """One chunk's text out, its tool call pieces and figures kept."""
        drafted = self.attribution.drafted(chunk.get("timings"))
        self.positions.feed(self.stats, chunk.get("timings"))
        for choice in _list(chunk.get("choices"), "choices"):
            yield from self._choice_events(_object(choice, "choice"), drafted)
        if chunk.get("timings"):
            apply_timings(self.stats, chunk["timings"])
        if chunk.get("usage"):
            apply_usage(self.stats, chunk["usage"], timed_span(self.first_at or self.started))
        if chunk.get("metrics"):
            apply_vllm(self.stats, chunk["metrics"])
        if chunk.get("sglext"):
            apply_sglang(self.stats, chunk["sglext"])

    def _choice_events(self, choice: dict[str, Any], drafted: int) -> Iterator[Event]:
        delta = _object(choice.get("delta"), "delta")
        thinking = _text(delta.get("reasoning_content") or delta.get("reasoning"), "delta.reasoning_content")
        content = _text(delta.get("content"), "delta.content")
        if thinking or content:
            self.chunks_with_text += 1
            if self.first_at is None:
                self.first_at = time.monotonic()
                self.stats.ttft_s = self.first_at - self.started
            if self.max_tokens is not None and self.chunks_with_text > self.max_tokens:
                return  # past the limit a server that ignores it sends more: never shown
        if thinking:
            yield Delta(thinking, "thinking", drafted)
        if content:
            yield from self.splitter.feed(content, drafted)
        for part in _list(delta.get("tool_calls"), "delta.tool_calls"):
            gather_call(self.calls, part)
        if thinking or content or delta.get("tool_calls") or choice.get("finish_reason"):
            self.progress_at = time.monotonic()
        if choice.get("finish_reason"):
            self.finish = end_reason(str(choice["finish_reason"]))

    def stats_update(self, chunk: dict[str, Any]) -> StatsUpdate | None:
        """The figures so far, at most every STATS_INTERVAL_S and on a chunk that carried some."""
        now = time.monotonic()
        if now - self.last_stats >= STATS_INTERVAL_S and (chunk.get("timings") or chunk.get("usage")):
            self.last_stats = now
            return StatsUpdate(self.stats.copy())
        return None

    def done_events(self, check_counts_at_end: bool) -> Iterator[Event]:
        """[DONE]: the text held back, the tool calls whole, the end."""
        if self.max_tokens is not None and self.chunks_with_text > self.max_tokens:
            self.finish = "length"  # what was shown ended at the limit, whatever the server sent after
            self.stats.generated_tokens = min(self.stats.generated_tokens, self.max_tokens)
        if check_counts_at_end:
            check_counts(self.stats)
        yield from self.splitter.flush()
        yield from finished_calls(self.calls)
        yield End(self.finish, self.stats.copy())

    def cut_events(self, max_tokens: int) -> Iterator[Event]:
        """The end of a stream cut LIMIT_GRACE chunks past max_tokens: counted up to the limit."""
        self.stats.generated_tokens = min(max(self.stats.generated_tokens, self.chunks_with_text), max_tokens)
        if not self.stats.decode_s:
            self.stats.decode_s = timed_span(self.first_at or self.started)
        self.stats.verify_steps = self.stats.verify_steps or self.stats.generated_tokens
        yield from self.splitter.flush()
        yield from finished_calls(self.calls)
        yield End("length", self.stats.copy())

    def cancelled_end(self) -> End:
        # Stopped: what was streamed so far counts (the server's own figures come at the end).
        self.stats.generated_tokens = max(self.stats.generated_tokens, self.chunks_with_text)
        if not self.stats.decode_s and self.first_at is not None:
            self.stats.decode_s = timed_span(self.first_at)
        return End("cancelled", self.stats.copy())


def stream_chat(
    response: httpx2.Response,
    cancelled: threading.Event,
    started: float,
    max_tokens: int | None = None,
    check_counts_at_end: bool = False,
    ngram_above: int | None = None,
    stall_s: float | None = None,
) -> Iterator[Event]:
    """The events of one streamed completion; a cancel stops it within one line.

    With `max_tokens` nothing past it is shown even if the server ignores the request's
    max_tokens, and the stream is cut LIMIT_GRACE chunks later (a server that honours it
    sends its final figures in between): tokens are counted as streamed chunks (one token each from llama-server,
    SGLang and vLLM) or the server's own count when its timings give one.
    `check_counts_at_end`: final draft counts that cannot be are an error (an unknown
    server; the managed llama-server's are trusted). `ngram_above`: see StepPositions.
    `stall_s`: StreamStalled when that long passes with no text, tool call or end (a server's
    comments and empty deltas keep a read timeout from ever firing)."""
    import httpx2  # loaded already: the response is one of its objects

    lines = bounded_lines(response.iter_bytes())
    reply = _ReplySoFar(started, max_tokens, ngram_above)
    while not cancelled.is_set():
        if stall_s is not None and time.monotonic() - reply.progress_at > stall_s:
            raise StreamStalled(stall_s)
        try:
            line = next(lines, None)
        except (OSError, ValueError, RuntimeError, httpx2.HTTPError, httpx2.StreamError):
            # A cancel (from the chat's thread) closes the response under the reader: httpx's
            # read error was not among these, so the engine ended the reply with empty figures
            # ("0 tokens · - tok/s · cancelled" after hundreds were on screen).
            if cancelled.is_set():
                break
            raise
        if line is None:
            yield from reply.splitter.flush()
            if cancelled.is_set():
                break
            raise StreamBroken(reply.stats.copy())
        line = line.strip()
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            yield from reply.done_events(check_counts_at_end)
            return
        chunk = parse_chunk(payload)
        yield from reply.chunk_events(chunk)
        counted = max(reply.chunks_with_text, reply.stats.generated_tokens)
        if max_tokens is not None and counted >= max_tokens + LIMIT_GRACE:
            yield from reply.cut_events(max_tokens)
            return
        update = reply.stats_update(chunk)
        if update is not None:
            yield update
    yield reply.cancelled_end()


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
