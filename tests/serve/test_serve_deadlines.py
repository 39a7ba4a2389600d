"""What a web page or a stalled client can do to serve's proxy over real HTTP
(issue 22, points 3 and 9): refused Host and Origin, bodies not declared JSON,
wrong types, a key header that is not UTF-8, and the header, idle, body and
write deadlines. None of these reach llama-server, so the proxy here has none
behind it (a request that got through would fail with 502, not pass)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time

import httpx2
import pytest
from aiohttp import web

from app.serve.board import Board
from app.serve.proxy import Proxy, ProxyConfig
from tests.conftest import wait_for
from tests.support.serve_harness import AppThread

NOWHERE = "http://127.0.0.1:9"  # discard port: nothing answers


@pytest.fixture
def proxy_at():
    started: list[AppThread] = []

    def start(api_key: str | None = None, origins: tuple[str, ...] = (), **deadlines) -> str:
        proxy = Proxy(ProxyConfig(NOWHERE, "upstream-key", "m", 2048, api_key=api_key, origins=origins), Board())
        proxy.body_idle_s = deadlines.pop("body_idle_s", proxy.body_idle_s)
        served = AppThread(proxy.app(), before_cleanup=proxy.stop, **deadlines).start()
        started.append(served)
        return f"http://127.0.0.1:{served.port}"

    yield start
    for served in started:
        served.stop()


CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


def test_a_web_pages_simple_post_is_refused(proxy_at):
    base = proxy_at()
    # What a page's fetch() sends without a preflight: text/plain and its Origin.
    page = httpx2.post(
        base + "/v1/chat/completions",
        content=json.dumps(CHAT),
        headers={"Content-Type": "text/plain;charset=UTF-8", "Origin": "http://evil.example"},
    )
    assert page.status_code == 403 and "Origin" in page.json()["error"]["message"]
    no_origin = httpx2.post(
        base + "/v1/chat/completions", content=json.dumps(CHAT), headers={"Content-Type": "text/plain"}
    )
    assert no_origin.status_code == 415 and "application/json" in no_origin.json()["error"]["message"]
    blob = httpx2.post(base + "/v1/chat/completions", content=json.dumps(CHAT))  # a Blob body: no Content-Type
    assert blob.status_code == 415


def test_dns_rebinding_is_refused(proxy_at):
    base = proxy_at()
    for path in ("/v1/models", "/health"):
        rebound = httpx2.get(base + path, headers={"Host": "evil.example:8080"})
        assert rebound.status_code == 403 and "Host" in rebound.json()["error"]["message"]
    assert httpx2.get(base + "/v1/models", headers={"Host": "localhost:8080"}).status_code == 200


def test_an_allowed_origin_gets_cors_and_others_do_not(proxy_at):
    base = proxy_at(origins=("http://localhost:3000",))
    allowed = {"Origin": "http://localhost:3000"}
    preflight = httpx2.options(
        base + "/v1/chat/completions",
        headers={**allowed, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"},
    )
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == "http://localhost:3000"
    assert preflight.headers["Access-Control-Allow-Headers"] == "content-type"
    models = httpx2.get(base + "/v1/models", headers=allowed)
    assert models.status_code == 200 and models.headers["Access-Control-Allow-Origin"] == "http://localhost:3000"
    other = httpx2.options(base + "/v1/chat/completions", headers={"Origin": "http://localhost:4000"})
    assert other.status_code == 403 and "Access-Control-Allow-Origin" not in other.headers


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**CHAT, "model": 5}, "model"),
        ({**CHAT, "chat_template_kwargs": "abc"}, "chat_template_kwargs"),
        ({"messages": {"role": "user", "content": "hi"}}, "messages"),
        ({**CHAT, "reasoning_effort": ["high"]}, "reasoning_effort"),
    ],
)
def test_wrong_types_are_a_400_naming_the_field(proxy_at, body, field):
    base = proxy_at()
    reply = httpx2.post(base + "/v1/chat/completions", json=body)
    assert reply.status_code == 400, reply.text
    assert field in reply.json()["error"]["message"]
    plain = httpx2.post(base + "/tokenize", json={"content": "x", "model": 5})
    assert plain.status_code == 400 and "model" in plain.json()["error"]["message"]


@pytest.mark.parametrize("depth", [200, 100_000])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/messages/count_tokens", "/tokenize"])
def test_deeply_nested_json_is_a_400_not_a_500(proxy_at, path, depth):
    # Issue 34: json.loads raised RecursionError and the proxy answered 500.
    base = proxy_at()
    nested = b'{"messages": [{"role": "user", "content": ' + b"[" * depth + b"]" * depth + b"}]}"
    reply = httpx2.post(base + path, content=nested, headers={"Content-Type": "application/json"})
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and "deep" in error["message"] and path in error["message"]


def test_a_key_header_that_is_not_utf8_is_a_401(proxy_at):
    base = proxy_at(api_key="k-" + "x" * 30)
    for name in ("x-api-key", "Authorization"):
        value = b"\xff\xfe\x80" if name == "x-api-key" else b"Bearer \xff\xfe\x80"
        reply = httpx2.get(base + "/v1/models", headers={name: value})
        assert reply.status_code == 401, reply.text
    assert httpx2.get(base + "/v1/models", headers={"x-api-key": "k-" + "x" * 30}).status_code == 200


def _closed_within(sock: socket.socket, seconds: float) -> bytes:
    """What the server sent before it closed the connection (fails if it did not in time)."""
    sock.settimeout(seconds)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def test_headers_must_arrive_in_time(proxy_at):
    base = proxy_at(header_s=0.5)
    port = int(base.rsplit(":", 1)[1])
    slow = socket.create_connection(("127.0.0.1", port))
    slow.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n")  # and then nothing
    started = time.monotonic()
    assert _closed_within(slow, 10) == b""
    assert time.monotonic() - started < 5
    silent = socket.create_connection(("127.0.0.1", port))  # connects and says nothing
    assert _closed_within(silent, 10) == b""
    prompt = socket.create_connection(("127.0.0.1", port))
    prompt.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    assert b'"ok"' in _closed_within(prompt, 10)


def test_idle_connections_and_stalled_bodies_are_cut(proxy_at):
    base = proxy_at(idle_s=0.5, body_idle_s=0.5)
    port = int(base.rsplit(":", 1)[1])
    idle = socket.create_connection(("127.0.0.1", port))
    idle.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")  # keep-alive, then silence
    started = time.monotonic()
    assert b"200 OK" in _closed_within(idle, 10)
    assert time.monotonic() - started < 5
    stalled = socket.create_connection(("127.0.0.1", port))
    stalled.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b'Content-Length: 1000\r\n\r\n{"messages": ['
    )
    answer = _closed_within(stalled, 10)
    assert answer.startswith(b"HTTP/1.1 408") and b"request body" in answer


def test_a_client_that_stops_reading_is_cut_off():
    """A reply the client does not read fills the socket; after the stall deadline the
    connection is cut and the handler ends (so it would free its slot)."""
    ended: list[str] = []

    async def flood(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        try:
            for _ in range(512):
                await response.write(b"x" * 2**20)
            ended.append("wrote everything")
        except (asyncio.CancelledError, ConnectionError):
            ended.append("cut off")
            raise
        return response

    app = web.Application()
    app.router.add_get("/flood", flood)
    served = AppThread(app, write_stall_s=0.5).start()
    try:
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.connect(("127.0.0.1", served.port))
        client.sendall(b"GET /flood HTTP/1.1\r\nHost: localhost\r\n\r\n")  # and never reads
        wait_for(lambda: ended, timeout=20, what="the stalled reply to be cut off")
        assert ended == ["cut off"]
        client.close()
    finally:
        served.stop()


def test_a_client_that_hangs_up_after_the_last_event_counts_as_done():
    """The OpenAI SDK closes the connection once it has read `data: [DONE]`; an upstream that
    has not closed its own stream yet must not make that a dropped request (seen as a flaky
    `dropped` on the board under load)."""
    release = asyncio.Event()

    async def upstream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]}
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode() + b"data: [DONE]\n\n")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(release.wait(), 10)  # the upstream's stream stays open a while
        return response

    fake = web.Application()
    fake.router.add_post("/v1/chat/completions", upstream)
    behind = AppThread(fake).start()
    board = Board()
    proxy = Proxy(ProxyConfig(f"http://127.0.0.1:{behind.port}", "upstream-key", "m", 2048), board)
    served = AppThread(proxy.app(), before_cleanup=proxy.stop).start()
    try:
        url = f"http://127.0.0.1:{served.port}/v1/chat/completions"
        with httpx2.stream("POST", url, json={**CHAT, "stream": True}, timeout=20) as reply:
            for line in reply.iter_lines():
                if line == "data: [DONE]":
                    break  # and hang up, as the SDK does
        wait_for(lambda: board.done, timeout=20, what="the request on the board")
        assert [figures.state for figures in board.done] == ["done"]
    finally:
        served.stop()
        behind.stop()


def test_a_malformed_request_is_one_line_on_stderr_not_a_traceback(capsys):
    """A header with an ESC in it (curl -A $'ua\\e[41m') made aiohttp print "Error handling
    request" and a traceback into serve's terminal; now one line, its control characters shown."""
    app = web.Application()
    served = AppThread(app).start()
    try:
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
            conn.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nUser-Agent: ua\x1b[41mBAD\r\n\r\n")
            answer = conn.recv(4096)
        assert b" 400 Bad Request" in answer.split(b"\r\n")[0]
        said: list[str] = []
        wait_for(lambda: said.append(capsys.readouterr().err) or "serve:" in "".join(said), 10, "the line")
        said_all = "".join(said)
        assert "Traceback" not in said_all and "\x1b" not in said_all
        line = next(line for line in said_all.splitlines() if line.startswith("serve:"))
        assert "Error handling request" in line and "Invalid header value char" in line
    finally:
        served.stop()
