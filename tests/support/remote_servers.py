"""Remote engines for tests, on 127.0.0.1: a stand-in that answers in a recorded server's
shapes (vLLM's and SGLang's listings, /metrics, /server_info and per-request figures; see
remote_shapes/SOURCES.md), with an API key and counters that advance with each reply as
the real ones do."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.support.http_thread import send, serving

SHAPES = Path(__file__).parent / "remote_shapes"

# One reply's speculation: 4 steps of 3 drafts keeping 0, 1, 2 and 3 (as the recorded chunk).
STEP_DRAFTED, STEP_KEPT = [3, 3, 3, 3], [0, 1, 2, 3]
WORDS = ["The", " answer", " is", " four", ".", " Two", " and", " two", " make", " four", "."]


@dataclass
class Shaped:
    url: str = ""  # the OpenAI base, ending in /v1
    key: str | None = None
    kind: str = "vllm"  # vllm or sglang: in that server's shapes; generic: a bare OpenAI server
    version: str = "0.5.23"  # SGLang's /server_info version (per-reply figures from 0.5.19)
    model_id: str = "Qwen/Qwen3-8B"  # what a generic server serves (vLLM's and SGLang's: as recorded)
    # Misbehaving (issue 50's hostile trial): /v1/models a byte at a time, or far too large;
    # /metrics that never ends; other clients' replies counted with each of ours; a plain-text
    # 404 to every chat request.
    trickle_models: bool = False
    huge_models: bool = False
    endless_metrics: bool = False
    others_per_reply: int = 0
    chat_404_text: bool = False
    looping: bool = False  # a reply of one line and then `#` lines without end, until the client goes
    per_request: bool = False  # vLLM's --per-request-spec-decode-metrics
    counters: bool = True  # /metrics with the speculation counters
    replies: int = 0
    looped: int = 0  # pieces of a looping reply sent
    hung_up: bool = False  # the client closed a looping reply
    bodies: list[dict] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)  # set when the server stops

    def metrics_page(self) -> str:
        """vLLM's page as recorded, its counters advanced by every reply so far."""
        page = (SHAPES / "vllm_metrics_spec.prom").read_text()
        base = {"drafts": 1843, "draft_tokens": 5529, "accepted": 3211}
        now = {
            "drafts": base["drafts"] + self.replies * len(STEP_DRAFTED),
            "draft_tokens": base["draft_tokens"] + self.replies * sum(STEP_DRAFTED),
            "accepted": base["accepted"] + self.replies * sum(STEP_KEPT),
        }
        page = page.replace(f"}} {base['drafts']}.0", f"}} {now['drafts']}.0")
        page = page.replace(f"}} {base['draft_tokens']}.0", f"}} {now['draft_tokens']}.0")
        page = page.replace(f"}} {base['accepted']}.0", f"}} {now['accepted']}.0")
        for position, start in enumerate((1402, 1050, 759)):
            kept_here = sum(1 for kept in STEP_KEPT if kept > position)
            page = page.replace(
                f'position="{position}"}} {start}.0', f'position="{position}"}} {start + self.replies * kept_here}.0'
            )
        return page


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {
        "object": "chat.completion.chunk",
        "model": "Qwen/Qwen3-8B",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


@contextmanager
def shaped_server(**options) -> Iterator[Shaped]:
    served = Shaped(**options)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
            send(self, status, body, kind)

        def _authorised(self) -> bool:
            # vLLM guards the /v1 paths only, SGLang all but /health and /metrics; both answer
            # {"error": "Unauthorized"}.
            guarded = self.path.startswith("/v1") or (served.kind == "sglang" and self.path != "/metrics")
            if served.key is None or not guarded:
                return True
            if self.headers.get("Authorization") == f"Bearer {served.key}":
                return True
            self._send(401, json.dumps({"error": "Unauthorized"}).encode())
            return False

        def do_GET(self) -> None:
            if not self._authorised():
                return
            if self.path == "/v1/models" and (served.trickle_models or served.huge_models):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                try:
                    if served.huge_models:
                        self.wfile.write(b'{"data": [' + b" " * (32 * 2**20))
                    else:
                        for byte in b'{"object": "list", "data": []}' * 100:
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                            served.stop.wait(0.5)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                return
            if self.path == "/metrics" and served.endless_metrics:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                try:
                    while not served.stop.is_set():
                        self.wfile.write(b"# still here\n")
                        self.wfile.flush()
                        served.stop.wait(0.2)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                return
            if self.path == "/v1/models":
                listing = json.loads(
                    (SHAPES / f"{served.kind}_v1_models.json").read_text() if served.kind != "generic" else "{}"
                )
                if served.kind == "generic":
                    listing = {"object": "list", "data": [{"id": served.model_id, "object": "model", "owned_by": "me"}]}
                self._send(200, json.dumps(listing).encode())
            elif self.path == "/metrics" and served.counters and served.kind == "vllm":
                self._send(200, served.metrics_page().encode(), "text/plain; version=0.0.4")
            elif self.path == "/metrics" and served.counters and served.kind == "sglang":
                self._send(200, (SHAPES / "sglang_metrics_spec.prom").read_bytes(), "text/plain; version=0.0.4")
            elif self.path in ("/server_info", "/get_server_info") and served.kind == "sglang":
                info = json.loads((SHAPES / "sglang_server_info.json").read_text())
                info["version"] = served.version
                self._send(200, json.dumps(info).encode())
            else:
                self._send(404, b'{"detail":"Not Found"}')

        def do_POST(self) -> None:
            if not self._authorised():
                return
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            served.bodies.append(body)
            if served.chat_404_text:
                self._send(404, b"no such route", "text/plain")
                return
            if body.get("model") != served.model_id and served.kind != "sglang":  # SGLang answers any name
                message = f"The model `{body.get('model')}` does not exist."
                error = {"error": {"message": message, "type": "NotFoundError", "param": None, "code": 404}}
                self._send(404, json.dumps(error).encode())
                return
            if served.looping:
                self._loop()
                return
            events = [_chunk({"role": "assistant", "content": ""})]
            events += [_chunk({"content": word}) for word in WORDS]
            events.append(_chunk({}, "stop"))
            final: dict = {
                "object": "chat.completion.chunk",
                "choices": [],
                "usage": {"prompt_tokens": 12, "completion_tokens": len(WORDS), "total_tokens": 12 + len(WORDS)},
            }
            if served.per_request:
                recorded = json.loads((SHAPES / "vllm_chat_stream_final_usage_chunk.json").read_text())
                final["metrics"] = recorded["metrics"]
            events.append(final)
            if served.kind == "sglang" and body.get("return_spec_tokens_details"):
                recorded = json.loads((SHAPES / "sglang_chat_completion_sglext.json").read_text())
                events.append({"object": "chat.completion.chunk", "choices": [], "sglext": recorded["sglext"]})
            served.replies += 1 + served.others_per_reply  # before the last event: clients read /metrics after it
            payload = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _loop(self) -> None:
            """What a small model did to a new user's first prompt: a function, then `#` lines
            until the client hangs up (counted in `served.looped`)."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                for piece in ["def reverse(head):\n", "    return head\n", *["#", "\n"] * 100_000]:
                    if served.stop.is_set():
                        return
                    self.wfile.write(f"data: {json.dumps(_chunk({'content': piece}))}\n\n".encode())
                    self.wfile.flush()
                    served.looped += 1
            except (BrokenPipeError, ConnectionResetError):
                served.hung_up = True

    with serving(Handler) as served.url:
        try:
            yield served
        finally:
            served.stop.set()  # before the server stops: a handler still writing ends


@contextmanager
def not_openai_server() -> Iterator[str]:
    """Something that answers HTTP, but 404 to /v1/models (a web page, another API)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            send(self, 404, b"<html>not here</html>", "text/html")

    with serving(Handler) as url:
        yield url


@contextmanager
def keyed_llama_server(binary: Path, target: Path, drafter: Path, folder: Path) -> Iterator[tuple[str, str]]:
    """A real llama-server as a remote: its key in a 0600 file, /metrics on, a drafter.
    Yields its OpenAI base URL and the key."""
    from tests.support.draft_log_server import DraftLogServer

    key = "sk-test-remote"
    key_file = folder / "key"
    key_file.write_text(key + "\n")
    key_file.chmod(0o600)
    running = DraftLogServer(
        binary, target, drafter, folder / "llama-server.log", n_max=4, spec_type="draft-simple", n_ctx=2048,
        extra=("--api-key-file", str(key_file), "--metrics"),
    )  # fmt: skip
    try:
        yield running.url + "/v1", key
    finally:
        running.close()
