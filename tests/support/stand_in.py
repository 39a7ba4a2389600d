"""A stand-in OpenAI-compatible server on 127.0.0.1 for `dspine chat --engine remote`: each
request's stream is what `chunks(messages)` returns, so a test scripts the model's turns
(a sentence, a tool call, the answer after the tool's result) and reads what was sent."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from tests.support.http_thread import send, serving

Chunks = Callable[[list[dict]], list[dict]]


def choice(delta: dict, finish: str | None = None) -> dict:
    """One streamed chat-completion chunk."""
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


@dataclass
class StandIn:
    url: str  # the base URL, ending in /v1
    requests: list[dict] = field(default_factory=list)  # every request body, in order


@contextmanager
def stand_in(chunks: Chunks) -> Iterator[StandIn]:
    served = StandIn("")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            # What `--engine remote` asks first: the models it serves (one, as most servers do).
            if self.path.rstrip("/") != "/v1/models":
                self.send_error(404)
                return
            send(self, 200, json.dumps({"object": "list", "data": [{"id": "stand-in", "object": "model"}]}).encode())

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            served.requests.append(body)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for chunk in chunks(body["messages"]):
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")

        def log_message(self, *args) -> None:  # keep the test log for what the test prints
            pass

    with serving(Handler) as served.url:
        yield served
