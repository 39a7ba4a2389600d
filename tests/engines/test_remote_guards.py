"""The remote engine against servers that misbehave: silent, ignoring max_tokens, sending
what no OpenAI stream holds (issue 14, items 9 and 11). A real HTTP server on 127.0.0.1
plays each part."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from backends.events import Delta, End, Error
from backends.remote import RemoteEngine
from backends.sampling import Sampling

GREEDY = Sampling(temperature=0.0)
HELLO = [{"role": "user", "content": "hello"}]


def chunk(content=None, timings=None, finish=None) -> dict:
    delta = {} if content is None else {"content": content}
    body: dict = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if timings:
        body["timings"] = timings
    return body


class Script:
    def __init__(self, chunks: list[dict], then_silent: bool = False) -> None:
        self.chunks = chunks
        self.then_silent = then_silent
        self.bodies: list[dict] = []
        self.release = threading.Event()


@contextmanager
def sse_server(script: Script) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            script.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                for part in script.chunks:
                    self.wfile.write(f"data: {json.dumps(part)}\n\n".encode())
                    self.wfile.flush()
                if script.then_silent:
                    script.release.wait(60)
                    return
                self.wfile.write(b"data: [DONE]\n\n")
            except (BrokenPipeError, ConnectionResetError):
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        script.release.set()
        server.shutdown()
        server.server_close()


def test_a_silent_server_is_an_error_after_the_read_timeout():
    script = Script([chunk("Hel")], then_silent=True)
    with sse_server(script) as url:
        engine = RemoteEngine(url, read_timeout_s=0.5)
        started = time.monotonic()
        events = list(engine.stream(HELLO, sampling=GREEDY))
        took = time.monotonic() - started
        engine.close()
    assert [e.text for e in events if isinstance(e, Delta)] == ["Hel"]
    error = events[-1]
    assert isinstance(error, Error)
    assert url in error.message and "nothing for 0.5 s" in error.message
    assert "read_timeout_s" in error.fix
    assert took < 10


def test_the_engine_stops_at_max_tokens_when_the_server_ignores_it():
    script = Script([chunk(f"t{i} ") for i in range(50)])
    with sse_server(script) as url:
        engine = RemoteEngine(url)
        events = list(engine.stream(HELLO, sampling=Sampling(temperature=0.0, max_tokens=5)))
        engine.close()
    assert script.bodies[0]["max_tokens"] == 5
    text = "".join(e.text for e in events if isinstance(e, Delta))
    assert text == "t0 t1 t2 t3 t4 "
    end = events[-1]
    assert isinstance(end, End) and end.reason == "length" and end.stats.generated_tokens == 5


def test_content_that_is_not_text_is_a_clear_error():
    script = Script([chunk("ok"), chunk([{"type": "text", "text": "a list"}])])
    with sse_server(script) as url:
        engine = RemoteEngine(url)
        events = list(engine.stream(HELLO, sampling=GREEDY))
        engine.close()
    error = events[-1]
    assert isinstance(error, Error), events
    assert "not an OpenAI-compatible stream" in error.message and "delta.content is list" in error.message


def test_timings_with_more_accepted_than_generated_are_a_clear_error():
    timings = {"predicted_n": 3, "predicted_ms": 10.0, "draft_n": 10, "draft_n_accepted": 8}
    script = Script([chunk("a"), chunk("b", timings=timings)])
    with sse_server(script) as url:
        engine = RemoteEngine(url)
        events = list(engine.stream(HELLO, sampling=GREEDY))
        engine.close()
    error = events[-1]
    assert isinstance(error, Error), events
    assert "8 draft tokens accepted" in error.message and "3 generated" in error.message
