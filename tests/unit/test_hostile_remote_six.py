"""A hostile remote server (issue 66, the sixth trial): what it sends is made valid where it
enters dspine and bounded in memory and time; its password never shows. A real HTTP server on
127.0.0.1 plays the remote."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler

import pytest

from backends.events import Delta, End, Error, ToolCall
from backends.openai_stream import MAX_LINE_BYTES
from backends.remote import RemoteEngine
from backends.remote_info import shown_url
from tests.support.http_thread import send, serving

LISTING = {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "me"}]}


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    body = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


MALFORMED = {
    "not_json": b"{not json",
    "choices_text": b'{"choices": "abc"}',
    "choice_number": b'{"choices": [7]}',
    "delta_list": b'{"choices": [{"delta": [1, 2]}]}',
    "call_text": b'{"choices": [{"delta": {"tool_calls": ["x"]}}]}',
    "call_index": b'{"choices": [{"delta": {"tool_calls": [{"index": "zero"}]}}]}',
    "call_function": b'{"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": 5}}]}}]}',
    "timings_text": b'{"choices": [], "timings": "fast"}',
    "usage_list": b'{"choices": [], "usage": [1]}',
}


def hostile(mode: str, stop: threading.Event):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            send(self, 200, json.dumps(LISTING).encode()) if self.path == "/v1/models" else send(self, 404, b"{}")

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            if mode in MALFORMED:
                send(self, 200, b"data: " + MALFORMED[mode] + b"\n\n" + b"data: [DONE]\n\n", "text/event-stream")
                return
            if mode == "surrogate":
                raw = b'data: {"choices": [{"index": 0, "delta": {"content": "a\\ud800b"}}]}\n\n'
                payload = raw + _chunk({}, "stop") + b"data: [DONE]\n\n"
                send(self, 200, payload, "text/event-stream")
                return
            self.send_response(500 if mode == "endless_error" else 200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            try:
                if mode == "endless_line":
                    self.wfile.write(b"data: ")
                piece = {
                    "endless_error": b"x" * 65536,
                    "endless_line": b"y" * 65536,
                    "endless_arguments": _chunk(
                        {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "z" * 60000}}]}
                    ),
                    "keepalive": b": still here\n\n" + _chunk({"content": ""}),
                }[mode]
                while not stop.is_set():
                    self.wfile.write(piece)
                    self.wfile.flush()
                    if mode == "keepalive":
                        stop.wait(0.05)
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler


def reply_of(mode: str, read_timeout_s: float = 30.0) -> tuple[list, float]:
    stop = threading.Event()
    with serving(hostile(mode, stop)) as url:
        engine = RemoteEngine.connect(url, None, "m", read_timeout_s=read_timeout_s)
        started = time.monotonic()
        try:
            events = list(engine.stream([{"role": "user", "content": "hi"}], think=False))
        finally:
            stop.set()
            engine.close()
    return events, time.monotonic() - started


def test_a_lone_surrogate_from_a_server_is_made_valid_where_it_enters():
    events, _ = reply_of("surrogate")
    text = "".join(e.text for e in events if isinstance(e, Delta))
    assert text == "a\ufffdb"
    text.encode("utf-8")  # what the history saves and the terminal draws
    assert Delta("\udfff").text == "\ufffd" and ToolCall("i", "n", '{"p": "\ud800"}').arguments == '{"p": "\ufffd"}'


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("endless_error", "answered 500"),
        ("endless_line", f"line of over {MAX_LINE_BYTES // 2**20} MiB"),
        ("endless_arguments", "arguments ran past"),
    ],
)
def test_an_endless_body_line_or_tool_call_is_cut_with_a_message(mode, said):
    events, took = reply_of(mode)
    errors = [e for e in events if isinstance(e, Error)]
    assert errors and said in errors[0].message, events[-3:]
    assert len(errors[0].message) < 1000 and took < 20


def test_a_stream_of_keepalives_ends_within_the_read_timeout():
    events, took = reply_of("keepalive", read_timeout_s=1.0)
    assert isinstance(events[-1], Error) and "keep-alives" in events[-1].message
    assert took < 10 and not any(isinstance(e, End) for e in events)


def test_a_password_in_the_url_is_never_shown():
    assert shown_url("http://me:hunter2@gpu-box:8000/v1") == "http://me:***@gpu-box:8000/v1"
    assert shown_url("https://gpu-box/v1") == "https://gpu-box/v1"
    with pytest.raises(Exception) as caught:
        RemoteEngine.connect("http://me:hunter2@127.0.0.1:9/v1", None, "m", read_timeout_s=2)
    assert "hunter2" not in str(caught.value) and "***" in str(caught.value)


@pytest.mark.parametrize("mode", sorted(MALFORMED))
def test_a_malformed_stream_is_said_in_words_not_pythons(mode):
    """A data line that is not JSON said "cannot talk to ...: Expecting value: line 1 column 2
    (char 1)"; a list where an object belongs ended the chat with a traceback."""
    events, _ = reply_of(mode)
    errors = [e for e in events if isinstance(e, Error)]
    assert errors, events
    message = errors[0].message
    assert "not an OpenAI-compatible stream" in message, message
    for python in ("Expecting", "object has no attribute", "invalid literal", "not subscriptable", "char "):
        assert python not in message, message
