"""The thin layer between clients and llama-server: checks the key, sets each
request's think mode and preset, queues requests beyond the slots (first come,
first served), passes the bytes through as they arrive and records the figures.

aiohttp serves the clients; httpx2 (the project's one HTTP client) speaks to
llama-server. A client that goes away cancels its handler, which closes the
upstream stream, so llama-server stops generating and the slot is free."""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx2
from aiohttp import web

from backends.break_even import BreakEven
from backends.message_order import MERGE, SystemRule
from backends.reply_guard import LoopWatch
from backends.sampling import QWEN_CARD, SamplingPresets

from . import guards
from .board import Board
from .cache_rules import clean
from .figures import DONE, DROPPED, FAILED, RequestFigures, client_name
from .intake import BODY_IDLE_S, MAX_BODY, BodyBudget, read_body, reservation, too_large
from .model_list import model_list
from .modes import draft_length_for, prepare, split_model_name, with_draft_length
from .overflow import translate_error
from .reply_limit import with_reply_limit
from .stopping import STOPPING, Stopping, end_stream
from .streamed_text import StreamedText
from .system_messages import SystemMessageError
from .system_messages import apply as order_system_messages
from .validate import NotJson, body_problem, parse_body
from .window import budget

# Endpoints with figures: path -> whether a chat template (and so a think mode) applies.
GENERATING = {
    "/v1/chat/completions": True,
    "/chat/completions": True,
    "/v1/completions": False,
    "/completions": False,
    "/v1/messages": True,
    "/v1/responses": True,
}
# Passed through as they are (no generation, no figures).
PLAIN = ("/v1/messages/count_tokens", "/tokenize", "/detokenize", "/apply-template")


TAIL_BYTES = 64  # enough for the last event's marker
_LAST_EVENTS = (b"data: [DONE]", b"event: message_stop")


def events_end(data: bytes) -> int:
    """Where the last whole server-sent event in `data` ends (0: none is whole yet); events end
    with a blank line, LF or CRLF."""
    lf, crlf = data.rfind(b"\n\n"), data.rfind(b"\r\n\r\n")
    return max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0)


class _Relay:
    """A streamed reply passed on as it comes, whole events only (the start of one waits for its
    end), so a last event of dspine's own (stopping, a loop) never lands inside half of one; the
    reply's text watched for a loop, which ends it as in the chat."""

    def __init__(self) -> None:
        self.pending = b""
        self.tail = b""  # the last bytes written, to see the stream's own last event go out
        self.answer = StreamedText()
        self.watch = LoopWatch()

    async def copy(self, reply, response: web.StreamResponse, figures: RequestFigures):
        """Every event written; the loop found, where the reply loops (then it stops there)."""
        async for piece in reply.aiter_raw():
            figures.feed(piece)
            data = self.pending + piece
            end = events_end(data)
            self.pending = data[end:]
            if end:
                await response.write(data[:end])
                self.tail = (self.tail + data[:end])[-TAIL_BYTES:]
            loop = next((found for text in self.answer.feed(piece) if (found := self.watch.feed(text))), None)
            if loop is not None:
                return loop
        if self.pending:
            await response.write(self.pending)  # a stream whose last event lacks its blank line
            self.tail = (self.tail + self.pending)[-TAIL_BYTES:]
        return None


def _ended(tail: bytes) -> bool:
    """Whether the bytes written end with the stream's own last event (OpenAI's `[DONE]`,
    Anthropic's `message_stop` and its data)."""
    return any(marker in tail for marker in _LAST_EVENTS)


@dataclass(frozen=True)
class ProxyConfig:
    upstream_url: str  # llama-server, http://127.0.0.1:PORT (or a remote server's root)
    upstream_key: str | None  # the upstream's own key: never shown to clients
    model_name: str  # what /v1/models says, e.g. qwen3.8-27b
    n_ctx: int
    default_think: bool = True
    parallel: int = 1
    api_key: str | None = None  # what clients must send; None on loopback without one
    # Draft length per think mode, when llama-server honours one per request (learned by chat/run/bench).
    draft_lengths: dict[bool, int] | None = None
    bind_host: str = "127.0.0.1"  # the --host: a request's Host header must name it (or loopback)
    origins: tuple[str, ...] = ()  # web page origins allowed to call (the serve_origins setting)
    # Where later system/developer messages go for the template in force (backends/message_order.py).
    system_rule: SystemRule = MERGE
    window: int = 0  # one slot's context (what one request holds); 0: n_ctx over the slots
    thinks: bool = True  # the model has a thinking mode (/v1/models lists :think and :no-think)
    # The sampling a request gets where it sets none, per think mode (the model's card's).
    sampling: SamplingPresets = QWEN_CARD
    cache_rules: bool = True  # cache_rules.py: volatile system lines out (off only to measure without)
    # A remote upstream: the model name its requests must carry (vLLM answers 404 to any other),
    # and what its errors call it.
    upstream_model: str | None = None
    upstream_extra: tuple[tuple[str, object], ...] = ()  # fields every request carries (SGLang's figures)
    upstream_name: str = "llama-server"

    @property
    def slot_window(self) -> int:
        return self.window or self.n_ctx // max(self.parallel, 1)

    @property
    def reply_limit(self) -> int:
        """The limit of a reply whose request sets none: the window's reply reserve."""
        return budget(self.slot_window).reply


def error(status: int, message: str, kind: str = "invalid_request_error") -> web.Response:
    """An error both OpenAI and Anthropic clients read: {"error": {"message", "type"}}."""
    return web.json_response({"type": "error", "error": {"message": message, "type": kind}}, status=status)


class Proxy:
    def __init__(
        self,
        config: ProxyConfig,
        board: Board,
        on_done: Callable[[RequestFigures, dict[str, Any]], None] | None = None,
        break_even: BreakEven | None = None,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.board = board
        self.on_done = on_done
        # Per think mode, drafting stops where it runs below plain (needs a per-request draft length).
        self.break_even = break_even if config.draft_lengths is not None else None
        self.on_note = on_note
        self.slots = asyncio.Semaphore(config.parallel)  # FIFO: waiters are served in arrival order
        self.upstream: httpx2.AsyncClient | None = None
        self.stopping = Stopping()
        # Bodies in memory at once: one of the largest per slot.
        self.budget = BodyBudget(config.parallel * MAX_BODY)
        self.body_idle_s = BODY_IDLE_S

    # -- the app ----------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(
            middlewares=[self._guard, self._stoppable, self._auth, self._bounded], client_max_size=MAX_BODY
        )
        app.on_response_prepare.append(self._cors)
        app.router.add_get("/health", self._health)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/models", self._models)
        for path in GENERATING:
            app.router.add_post(path, self._generate)
        for path in PLAIN:
            app.router.add_post(path, self._plain)
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        return app

    async def _open(self, _app: web.Application) -> None:
        # No keep-alive upstream: llama-server may close a connection after a stream,
        # and a request sent down it then fails; a fresh local connection costs ~0.1 ms.
        key = self.config.upstream_key
        self.upstream = httpx2.AsyncClient(
            base_url=self.config.upstream_url,
            headers={"Authorization": f"Bearer {key}"} if key else {},
            timeout=httpx2.Timeout(None, connect=10),
            limits=httpx2.Limits(max_keepalive_connections=0),
        )

    async def _close(self, _app: web.Application) -> None:
        if self.upstream is not None:
            await self.upstream.aclose()

    async def stop(self) -> None:
        """End every request in flight (streams with a last event saying why); then the
        runner's cleanup has nothing left to wait for."""
        await self.stopping.stop()

    @web.middleware
    async def _guard(self, request: web.Request, handler):
        """What only a web page would send: a foreign Host (DNS rebinding), an Origin not
        allowed, a body that is not declared JSON (see guards.py)."""
        origin = request.headers.get("Origin")
        preflight = request.method == "OPTIONS" and origin is not None
        refusal = guards.check(
            method=request.method,
            host=request.headers.get("Host"),
            origin=origin,
            content_type=request.content_type if "Content-Type" in request.headers else None,
            bind_host=self.config.bind_host,
            origins=self.config.origins,
        )
        if refusal is not None:
            kind = "permission_error" if refusal.status == 403 else "invalid_request_error"
            return error(refusal.status, refusal.message, kind)
        if preflight:
            return web.Response(status=204)  # _cors adds the allowed origin's headers
        return await handler(request)

    async def _cors(self, request: web.BaseRequest, response: web.StreamResponse) -> None:
        origin = request.headers.get("Origin")
        if origin is not None and guards.origin_allowed(origin, self.config.origins):
            response.headers.update(guards.cors_headers(origin, request.headers.get("Access-Control-Request-Headers")))

    @web.middleware
    async def _stoppable(self, request: web.Request, handler):
        task = asyncio.current_task()
        self.stopping.track(task)
        try:
            return await handler(request)
        except asyncio.CancelledError:
            if not self.stopping.caught_stop():
                raise
            return error(503, STOPPING, "api_error")
        finally:
            self.stopping.untrack(task)

    @web.middleware
    async def _bounded(self, request: web.Request, handler):
        """A body's bytes are reserved before it is read (intake.py)."""
        if request.method != "POST":
            return await handler(request)
        refused = too_large(request.content_length)
        if refused is not None:
            return refused
        async with self.budget.hold(reservation(request.content_length)):
            return await handler(request)

    @web.middleware
    async def _auth(self, request: web.Request, handler):
        key = self.config.api_key
        if key is None or request.path == "/health":
            return await handler(request)
        given = request.headers.get("x-api-key") or ""
        bearer = request.headers.get("Authorization", "")
        if bearer.lower().startswith("bearer "):
            given = bearer[7:].strip()
        # aiohttp keeps a header's non-UTF-8 bytes as surrogates: compare them as they came.
        if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"), key.encode()):
            return error(401, "missing or wrong API key (send Authorization: Bearer KEY or x-api-key)", "auth_error")
        return await handler(request)

    # -- endpoints that answer here ---------------------------------------------

    async def _health(self, _request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _models(self, _request: web.Request) -> web.Response:
        config = self.config
        return web.json_response(model_list(config.model_name, config.slot_window, config.default_think, config.thinks))

    # -- pass-through ------------------------------------------------------------

    async def _plain(self, request: web.Request) -> web.StreamResponse:
        assert self.upstream is not None
        raw = await read_body(request, self.body_idle_s)
        try:
            body = parse_body(request.path, raw) if raw else {}
        except NotJson as exc:
            return error(400, str(exc))
        problem = body_problem(request.path, body)
        if problem:
            return error(400, problem)
        if isinstance(body, dict) and "model" in body:
            body["model"] = self.config.upstream_model or split_model_name(body["model"])[0]
        if isinstance(body, dict):  # count_tokens and apply-template render the template too
            try:
                body = order_system_messages(request.path, body, self.config.system_rule)
            except SystemMessageError as exc:
                return error(400, str(exc))
        try:
            reply = await self.upstream.post(request.path, json=body)
        except httpx2.HTTPError as exc:
            return error(502, f"{self.config.upstream_name} did not answer: {exc}", "api_error")
        return web.Response(body=reply.content, status=reply.status_code, content_type="application/json")

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        raw = await read_body(request, self.body_idle_s)
        try:
            body = parse_body(request.path, raw)
        except NotJson as exc:
            return error(400, str(exc))
        del raw
        problem = body_problem(request.path, body)
        if problem:
            return error(400, problem)
        try:
            ordered = order_system_messages(request.path, body, self.config.system_rule)
        except SystemMessageError as exc:
            return error(400, str(exc))
        prepared = prepare(
            ordered, self.config.default_think, chat=GENERATING[request.path], presets=self.config.sampling
        )
        stream = bool(body.get("stream"))
        client = client_name(request.headers.get("User-Agent"), request.remote)
        figures = self.board.open(request.path, client, prepared.think, stream)
        length = draft_length_for(prepared.think, self.config.draft_lengths, self.config.default_think)
        mode = self.config.default_think if prepared.think is None else prepared.think
        # A client's own speculative.n_max is left alone, and its reply judges nothing.
        judged = self.break_even if "speculative.n_max" not in prepared.body else None
        if judged is not None and not judged.drafting(mode):
            length = 0
        upstream_body = clean(prepared.body)[0] if self.config.cache_rules else prepared.body
        upstream_body = with_reply_limit(upstream_body, self.config.reply_limit)
        if self.config.upstream_model is not None:
            upstream_body = {**upstream_body, "model": self.config.upstream_model}
        if self.config.upstream_extra:
            upstream_body = {**dict(self.config.upstream_extra), **upstream_body}  # the client's own win
        data = json.dumps(with_draft_length(upstream_body, length)).encode()
        dropped = False
        try:
            async with self.slots:
                figures.begin()
                if stream:
                    return await self._stream(request, data, figures)
                return await self._whole(request, data, figures)
        except (asyncio.CancelledError, ConnectionResetError):
            dropped = True  # the client went away (after the last byte it counts as done)
            raise
        finally:
            if figures.finished is None:
                figures.finish(DROPPED if dropped else FAILED)
            self.board.close(figures)
            if judged is not None and figures.state == DONE:
                stats = figures.stats
                # Asked to draft (any length but 0), whatever it drafted: a drafter that drafts
                # nothing still costs its passes, and that reply is what break-even must see.
                note = judged.observed(mode, length != 0, stats.generated_tokens, stats.decode_s)
                if note and self.on_note is not None:
                    self.on_note(note)
            if self.on_done is not None:
                self.on_done(figures, body)

    async def _whole(self, request: web.Request, data: bytes, figures: RequestFigures) -> web.StreamResponse:
        assert self.upstream is not None
        try:
            reply = await self.upstream.post(request.path, content=data, headers={"Content-Type": "application/json"})
        except httpx2.HTTPError as exc:
            figures.status = 502
            return error(502, f"{self.config.upstream_name} did not answer: {exc}", "api_error")
        figures.status = reply.status_code
        figures.finish(DONE if reply.status_code == 200 else FAILED, body=reply.content)
        if reply.status_code != 200:
            status, body = translate_error(request.path, reply.status_code, reply.content, self.config.upstream_name)
            return web.Response(body=body, status=status, content_type="application/json")
        return web.Response(
            body=reply.content,
            status=reply.status_code,
            content_type=reply.headers.get("content-type", "application/json").split(";")[0],
        )

    async def _stream(self, request: web.Request, data: bytes, figures: RequestFigures) -> web.StreamResponse:
        assert self.upstream is not None
        upstream_request = self.upstream.build_request(
            "POST", request.path, content=data, headers={"Content-Type": "application/json"}
        )
        try:
            reply = await self.upstream.send(upstream_request, stream=True)
        except httpx2.HTTPError as exc:
            figures.status = 502
            return error(502, f"{self.config.upstream_name} did not answer: {exc}", "api_error")
        try:
            figures.status = reply.status_code
            if reply.status_code != 200:
                status, body = translate_error(
                    request.path, reply.status_code, await reply.aread(), self.config.upstream_name
                )
                return web.Response(body=body, status=status, content_type="application/json")
            response = web.StreamResponse(
                status=200,
                headers={
                    "Content-Type": reply.headers.get("content-type", "text/event-stream"),
                    "Cache-Control": "no-cache",
                },
            )
            relay = _Relay()
            try:
                await response.prepare(request)
                loop = await relay.copy(reply, response, figures)
                if loop is not None:
                    figures.finish(FAILED)  # ended with an error event; break-even does not judge it
                    await end_stream(response, request.path, True, loop.note(), "reply_looped")
                    return response  # closing the upstream stream stops its generation
            except asyncio.CancelledError:
                if _ended(relay.tail):
                    # The client read the last event ([DONE], message_stop) and hung up before the
                    # upstream's stream closed: every event was delivered, so the request is done.
                    figures.finish(DONE)
                    raise
                if not (response.prepared and self.stopping.caught_stop()):
                    raise  # the client went away
                await end_stream(response, request.path, True, STOPPING)
                return response
            except httpx2.HTTPError as exc:
                await end_stream(response, request.path, True, f"{self.config.upstream_name} stopped mid-reply ({exc})")
                return response
            figures.finish(DONE)  # every byte is written; the client may hang up during write_eof
            await response.write_eof()
            return response
        finally:
            await reply.aclose()  # a client gone mid-stream: llama-server sees the socket close and stops
