"""Any OpenAI-compatible server (vLLM or SGLang with tensor parallelism, or llama-server on a
bigger machine): a URL and an API key. `connect` asks the server what it is first
(remote_probe); acceptance comes from each reply's timings (llama-server), else from the
server's /metrics counters read before and after the reply (vLLM, llama-server with
--metrics), else the readout says the server does not report it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .base import estimate_tokens
from .events import End, Error, Event
from .openai_stream import StreamBroken, StreamMalformed, StreamStalled, chat_body, read_bounded, stream_chat
from .openai_stream import interrupt as _interrupt
from .remote_info import RemoteServer, sglang_accept_length
from .remote_probe import PROBE_TIMEOUT_S, Prober, check_url, probe, shown_url
from .sampling import Sampling, preset
from .spec_metrics import Counters, apply, fits_one_reply
from .stats import Stats

if TYPE_CHECKING:
    import httpx2


# How OpenAI-compatible servers say a prompt is too long: OpenAI's code, llama-server's type,
# vLLM's and SGLang's wording, Anthropic's.
_OVERFLOW = (
    "context_length_exceeded",
    "exceed_context_size",
    "maximum context length",
    "prompt is too long",
    "context length",
    "context window",
)


def _overflow(status: int, detail: str) -> bool:
    return status in (400, 413) and any(words in detail.lower() for words in _OVERFLOW)


@dataclass
class RemoteEngine:
    url: str  # e.g. http://gpu-box:30000/v1
    api_key: str | None = None
    model: str | None = None
    drafter: str | None = None
    name: str = "remote"
    # No data for this long (not the whole reply) is an error: a frozen server must not hang the chat.
    read_timeout_s: float = 60.0
    n_ctx: int | None = None  # the context when the server does not say its own (--ctx)
    server: RemoteServer | None = None  # what the server said it is (connect); None: not asked
    # Every request asks for no drafts (bench's plain rows); only where the server honours a
    # request's draft length (server.per_request_draft).
    draft_off: bool = False
    _cancel: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _response_in_use: httpx2.Response | None = field(default=None, init=False, repr=False)
    _client: httpx2.Client | None = field(default=None, init=False, repr=False)
    _metrics_reader: Prober | None = field(default=None, init=False, repr=False)

    @classmethod
    def connect(
        cls,
        url: str,
        api_key: str | None = None,
        model: str | None = None,
        drafter: str | None = None,
        read_timeout_s: float = 60.0,
        n_ctx: int | None = None,
        key_option: str = "--api-key",
    ) -> RemoteEngine:
        """An engine for a server that answered the probe: its model, window and speculation known.
        `key_option`: the option that gives the key, as the errors name it."""
        engine = cls(url, api_key, model, drafter, read_timeout_s=read_timeout_s, n_ctx=n_ctx)
        engine.server = probe(url, api_key, model, min(PROBE_TIMEOUT_S, read_timeout_s), key_option)
        engine.model = engine.server.model
        engine.drafter = drafter or engine.server.speculation  # what the readout names as the drafter
        return engine

    @property
    def drafter_name(self) -> str | None:
        # What the user said the server runs, else what the server says it runs.
        return self.drafter or (self.server.speculation if self.server else None)

    def __post_init__(self) -> None:
        check_url(self.url)

    def cancel(self) -> None:
        self._cancel.set()
        _interrupt(self._response_in_use)

    @property
    def alive(self) -> bool:
        return True  # a remote server's failures show on the requests that meet them

    @property
    def context_size(self) -> int | None:
        """The server's own window where it says one: a request past it is refused there."""
        if self.server is not None and self.server.context:
            return self.server.context
        return self.n_ctx

    def count_tokens(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, think: bool = True
    ) -> int:
        """An estimate: an OpenAI-compatible server has no tokenize endpoint to ask. The session
        corrects it with the prompt tokens the server reports after each reply."""
        return estimate_tokens(messages, tools)

    def close(self) -> None:
        self.cancel()
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._metrics_reader is not None:
            self._metrics_reader.close()
            self._metrics_reader = None

    def stream(
        self,
        messages: list[dict[str, Any]],
        think: bool = True,
        sampling: Sampling | None = None,
        n_max: int | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> Iterator[Event]:
        import httpx2

        self._cancel.clear()
        body = chat_body(messages, think, sampling or preset(think), self._request_extra(n_max), tools)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        if self._client is None:
            self._client = httpx2.Client(timeout=httpx2.Timeout(30.0, read=self.read_timeout_s))
        before = self._counters() if self._counted_on_server() else None
        started = time.monotonic()
        try:
            with self._client.stream(
                "POST", self.url.rstrip("/") + "/chat/completions", json=body, headers=headers
            ) as response:
                self._response_in_use = response
                if response.status_code != 200:
                    yield self._refusal(response)
                    return
                limit = body.get("max_tokens")
                stall = self.read_timeout_s
                for event in stream_chat(response, self._cancel, started, limit, True, stall_s=stall):
                    if isinstance(event, End):
                        self._account(event.stats, before)
                    yield event
        except (StreamStalled, StreamBroken, OSError, httpx2.HTTPError, httpx2.StreamError, ValueError) as exc:
            yield self._failure(exc)  # StreamMalformed is a ValueError, httpx2.ReadTimeout an HTTPError
        finally:
            self._response_in_use = None

    def _request_extra(self, n_max: int | None) -> dict[str, Any]:
        """What a request carries beyond the chat body: the model, what the server asked for
        (server.request_extra), and the draft length where the server honours one per request."""
        extra: dict[str, Any] = {"model": self.model} if self.model else {}
        extra.update(dict(self.server.request_extra) if self.server else {})
        if self.server is not None and self.server.per_request_draft:
            length = 0 if self.draft_off else n_max
            if length is not None:
                extra["speculative.n_max"] = length  # dspine's patched llama-server: 0 drafts nothing
        return extra

    def _refusal(self, response: httpx2.Response) -> Error:
        """The error for an answer other than 200, with the start of what the server said."""
        detail = read_bounded(response).decode(errors="replace")[:500]
        status = response.status_code
        fix = "check the API key" if status in (401, 403) else "check the URL and the server's log"
        return Error(f"{shown_url(self.url)} answered {status}: {detail}", fix, overflow=_overflow(status, detail))

    def _failure(self, exc: Exception) -> Event:
        """What a stream that failed mid-way ends with; a cancel's broken read ends it as cancelled.
        Checked in the order the kinds were caught: StreamMalformed before other ValueErrors."""
        import httpx2

        if isinstance(exc, StreamStalled):
            return Error(
                f"{shown_url(self.url)} sent nothing but keep-alives for {exc.seconds:g} s",
                "check that the server is not stuck or overloaded; a slower server needs a longer read "
                "timeout (dspine setting read_timeout_s); the conversation is kept",
            )
        if isinstance(exc, StreamBroken):
            return Error(f"{shown_url(self.url)} closed the stream mid-reply", "the conversation is kept; try again")
        if isinstance(exc, StreamMalformed):
            return Error(
                f"{shown_url(self.url)} sent a reply that is not an OpenAI-compatible stream: {exc}",
                "check that the URL is the server's OpenAI-compatible base (ending in /v1); the conversation is kept",
            )
        if self._cancel.is_set():
            return End("cancelled", Stats())
        if isinstance(exc, httpx2.ReadTimeout):
            return Error(
                f"{shown_url(self.url)} sent nothing for {self.read_timeout_s:g} s",
                "check that the server is not stuck or overloaded; a slower server needs a longer read "
                "timeout (dspine setting read_timeout_s)",
            )
        return Error(f"cannot talk to {shown_url(self.url)}: {exc}", "check that the server runs and the URL is right")

    # -- acceptance where the reply does not carry it -------------------------------------

    def _counted_on_server(self) -> bool:
        return self.server is not None and self.server.counters and not self.server.per_reply_counts

    def _counters(self) -> Counters | None:
        return self._prober().counters()

    def _prober(self) -> Prober:
        """Reads of /metrics and /server_info, each bounded in time and size (remote_probe)."""
        if self._metrics_reader is None:
            self._metrics_reader = Prober(self.url, self.api_key)
        return self._metrics_reader

    def _account(self, stats: Stats, before: Counters | None) -> None:
        """A reply's acceptance from the server's counters when its own figures had none.
        The counters are the whole server's: with other clients on it, theirs count too."""
        if stats.drafted or self.server is None:
            return
        if before is not None:
            after = self._counters()
            if after is not None:
                counted = after.delta(before)
                if not counted.draft_tokens:
                    return
                if not fits_one_reply(counted, stats.generated_tokens):
                    # More drafts kept, or more verify steps, than this reply has tokens: other
                    # requests ran on the server meanwhile, and their counts are not this reply's.
                    stats.draft_note = "acceptance not shown: other requests moved the server's counters"
                    return
                apply(stats, counted)
                return
        if self.server.server_average:
            average = self._server_average()
            if average is not None:
                stats.draft_note = f"server average accept len {average:.2f} (no per-reply figures)"
                return
        if not self.server.per_reply_counts:
            stats.draft_note = "acceptance not reported by this server"

    def _server_average(self) -> float | None:
        """SGLang's running average of tokens per verify step, from /server_info."""
        prober = self._prober()
        return sglang_accept_length(prober.get_json("/server_info") or prober.get_json("/get_server_info"))
