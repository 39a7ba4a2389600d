"""One request's figures as the proxy sees it pass, pure: counted from the bytes
of the stream without decoding each chunk (only the one that carries
llama-server's `timings` or an Anthropic `usage` is parsed), so watching costs
next to nothing per token."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from backends.openai_stream import apply_timings
from backends.reply_spec import apply_sglang, apply_vllm
from backends.stats import Stats

QUEUED, RUNNING, DONE, DROPPED, FAILED = "queued", "running", "done", "dropped", "failed"
# The events worth parsing: llama-server's timings, usage, vLLM's per-request metrics, SGLang's sglext.
_FIGURES = (b'"timings"', b'"usage"', b'"metrics"', b'"sglext"')


@dataclass
class RequestFigures:
    number: int
    endpoint: str  # /v1/chat/completions, /v1/completions, /v1/messages
    client: str
    think: bool | None
    stream: bool
    received: float = field(default_factory=time.monotonic)
    started: float | None = None  # left the queue
    first_token: float | None = None
    finished: float | None = None
    state: str = QUEUED
    events: int = 0  # SSE events seen: about one per token while streaming
    stats: Stats = field(default_factory=Stats)
    status: int | None = None
    _tail: bytes = b""

    # -- what the proxy reports -------------------------------------------------

    def begin(self) -> None:
        self.started = time.monotonic()
        self.state = RUNNING

    def feed(self, data: bytes) -> None:
        """A piece of the streamed body, as it arrives (events may split across pieces)."""
        if self.first_token is None:
            self.first_token = time.monotonic()
        self.events += data.count(b"data:")
        if any(marker in data for marker in _FIGURES) or self._tail:
            self._scan(data)

    def finish(self, state: str = DONE, body: bytes | None = None) -> None:
        if body is not None:  # a whole (non-streamed) reply
            if self.first_token is None:
                self.first_token = time.monotonic()
            self._read_reply(body)
        self.finished = time.monotonic()
        self.state = state
        if self.stats.ttft_s is None and self.first_token is not None:
            self.stats.ttft_s = self.first_token - self.received
        if not self.stats.generated_tokens and self.stream:
            self.stats.generated_tokens = max(self.events - 1, 0)  # [DONE] / message_stop is no token
        # A whole reply arrives at once: its decode time is what the server's own figures say,
        # or unknown (llama-server's /v1/messages reports none). From its arrival to now is no
        # decode time: 30 tokens "in" 40 us read as 700,000 tok/s, and break-even judged by it.
        if not self.stats.decode_s and self.first_token is not None and body is None:
            self.stats.decode_s = self.finished - self.first_token
        if not self.stats.verify_steps:
            self.stats.verify_steps = self.stats.generated_tokens

    # -- what the readout shows -------------------------------------------------

    @property
    def live_tokens(self) -> int:
        return self.stats.generated_tokens or self.events

    @property
    def live_tokens_per_s(self) -> float | None:
        if self.finished is not None:
            return self.stats.tokens_per_s
        if self.first_token is None:
            return None
        elapsed = time.monotonic() - self.first_token
        return self.events / elapsed if elapsed > 0.05 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint,
            "client": self.client,
            "think": self.think,
            "stream": self.stream,
            "state": self.state,
            "status": self.status,
            "queued_s": (self.started - self.received) if self.started is not None else None,
            **self.stats.to_json(),
        }

    # -- parsing --------------------------------------------------------------

    def _scan(self, data: bytes) -> None:
        text = self._tail + data
        lines = text.split(b"\n")
        self._tail = lines.pop()  # an unfinished line waits for the next piece
        for line in lines:
            if line.startswith(b"data:") and any(marker in line for marker in _FIGURES):
                try:
                    self._read_event(json.loads(line[5:]))
                except ValueError:
                    continue
        if not any(marker in self._tail for marker in _FIGURES):
            self._tail = b""

    def _read_reply(self, body: bytes) -> None:
        try:
            self._read_event(json.loads(body))
        except ValueError:
            return

    def _read_event(self, event: Any) -> None:
        if not isinstance(event, dict):
            return
        if isinstance(event.get("timings"), dict):
            apply_timings(self.stats, event["timings"])
            return
        usage = event.get("usage") or (event.get("message") or {}).get("usage")
        if isinstance(usage, dict) and not self.stats.drafted:
            # OpenAI usage, or Anthropic's (input_tokens / output_tokens): no timings there.
            prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
            generated = usage.get("completion_tokens", usage.get("output_tokens"))
            if isinstance(prompt, int) and prompt:
                self.stats.prompt_tokens = prompt
            if isinstance(generated, int) and generated:
                self.stats.generated_tokens = generated
            cached = usage.get("cache_read_input_tokens")  # llama-server's Anthropic usage: the reused part
            if isinstance(cached, int) and cached:
                self.stats.prompt_cached = cached
        # A remote vLLM's or SGLang's own figures of the request (backends/reply_spec.py).
        if event.get("metrics"):
            apply_vllm(self.stats, event["metrics"])
        if event.get("sglext"):
            apply_sglang(self.stats, event["sglext"])


def client_name(user_agent: str | None, peer: str | None) -> str:
    """A short name for who asked: the User-Agent's product, and the address when not local."""
    product = (user_agent or "?").split()[0][:32] if user_agent else "?"
    if peer and peer not in ("127.0.0.1", "::1", "localhost"):
        return f"{product}@{peer}"
    return product
