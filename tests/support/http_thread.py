"""A small HTTP server on 127.0.0.1 in a thread of the test process, for the stand-ins that
play a server's part (an OpenAI-compatible one, a remote that misbehaves)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Yields the server's OpenAI base URL (http://127.0.0.1:PORT/v1); stopped when the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes, kind: str = "application/json") -> None:
    """A whole answer: status, type, length, body."""
    handler.send_response(status)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
