"""A Hugging Face hub on 127.0.0.1 for tests: the listing API, resolve with
HEAD and Range, gated and missing repositories, and knobs to misbehave
(slow, drop the connection, corrupt a byte, ignore Range, lie about a size).
It counts every body byte it sends, per file, so tests can assert exactly
what a resumed download fetched."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse


@dataclass
class FakeRepo:
    repo_id: str
    files: dict[str, bytes]
    commit: str = "0123456789abcdef0123456789abcdef01234567"
    gated: bool = False
    lfs: bool = True

    def sha256(self, path: str) -> str:
        return self._digest("sha256", path)

    def sha1(self, path: str) -> str:
        return self._digest("sha1", path)

    def _digest(self, algorithm: str, path: str) -> str:
        data = self.files[path]
        key = (algorithm, path, id(data), len(data))
        cache = self.__dict__.setdefault("_digests", {})
        if key not in cache:
            cache[key] = hashlib.new(algorithm, data).hexdigest()
        return cache[key]


@dataclass
class Misbehaviour:
    bytes_per_second: float | None = None  # throttle body bytes
    drop_after: dict[str, int] = field(default_factory=dict)  # path -> close after N bytes, once
    corrupt_at: dict[str, int] = field(default_factory=dict)  # path -> flip the byte at this offset
    ignore_range: bool = False
    listed_size: dict[str, int] = field(default_factory=dict)  # path -> size the listing claims
    freeze_after: dict[str, int] = field(default_factory=dict)  # path -> go silent after N bytes, once


class FakeHub:
    TOKEN = "hf_test_token"

    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.misbehave = Misbehaviour()
        self.served: dict[str, int] = {}  # "repo/path" -> body bytes sent
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, range)
        self._lock = threading.Lock()
        self.thaw = threading.Event()  # releases frozen responses (set on stop)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeHub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.thaw.set()
        self._server.shutdown()
        self._server.server_close()

    def add_repo(self, repo_id: str, files: dict[str, bytes], **kwargs) -> FakeRepo:
        repo = FakeRepo(repo_id, files, **kwargs)
        self.repos[repo_id] = repo
        return repo

    def served_bytes(self, repo_id: str | None = None, path: str | None = None) -> int:
        with self._lock:
            return sum(
                n
                for key, n in self.served.items()
                if (repo_id is None or key.startswith(repo_id + "/")) and (path is None or key == f"{repo_id}/{path}")
            )

    def reset_counts(self) -> None:
        with self._lock:
            self.served.clear()
            self.requests.clear()

    def _count(self, key: str, n: int) -> None:
        with self._lock:
            self.served[key] = self.served.get(key, 0) + n

    def _handler_class(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def _json(self, status: int, payload, headers: dict[str, str] | None = None) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _error(self, status: int, code: str, message: str = "") -> None:
                self._json(
                    status, {"error": message or code}, {"X-Error-Code": code, "X-Error-Message": message or code}
                )

            def _repo(self, repo_id: str) -> FakeRepo | None:
                repo = hub.repos.get(repo_id)
                if repo is None:
                    self._error(404, "RepoNotFound", "Repository not found")
                    return None
                auth = self.headers.get("Authorization", "")
                if repo.gated and auth != f"Bearer {FakeHub.TOKEN}":
                    self._error(401, "GatedRepo", "Access to this model is restricted")
                    return None
                return repo

            def _entry(self, repo: FakeRepo, path: str) -> dict:
                data = repo.files[path]
                size = hub.misbehave.listed_size.get(path, len(data))
                entry = {"type": "file", "oid": repo.sha1(path), "size": size, "path": path}
                if repo.lfs:
                    entry["lfs"] = {"oid": repo.sha256(path), "size": size, "pointerSize": 134}
                return entry

            def do_HEAD(self) -> None:
                self.do_GET()

            def do_GET(self) -> None:
                parsed = urlparse(self.path)
                path = unquote(parsed.path)
                hub.requests.append((self.command, path, self.headers.get("Range")))
                m = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?", path)
                if m:
                    repo = self._repo(m.group(1))
                    if repo:
                        self._json(
                            200,
                            {
                                "id": repo.repo_id,
                                "sha": repo.commit,
                                "siblings": [{"rfilename": p} for p in repo.files],
                                "gated": repo.gated,
                            },
                        )
                    return
                m = re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?", path)
                if m:
                    repo = self._repo(m.group(1))
                    if repo:
                        prefix = (m.group(3) or "").strip("/")
                        entries = [self._entry(repo, p) for p in sorted(repo.files) if p.startswith(prefix)]
                        self._json(200, entries)
                    return
                m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
                if m:
                    repo = self._repo(m.group(1))
                    if repo:
                        self._resolve(repo, m.group(3))
                    return
                self._error(404, "EntryNotFound", "no route")

            def _resolve(self, repo: FakeRepo, file_path: str) -> None:
                if file_path not in repo.files:
                    self._error(404, "EntryNotFound", "Entry not found")
                    return
                misbehave = hub.misbehave
                data: bytes | bytearray = repo.files[file_path]
                if file_path in misbehave.corrupt_at:
                    data = bytearray(data)
                    data[misbehave.corrupt_at[file_path]] ^= 0xFF
                size = len(data)
                start = 0
                wanted = self.headers.get("Range")
                if wanted and not misbehave.ignore_range:
                    rm = re.fullmatch(r"bytes=(\d+)-(\d*)", wanted.strip())
                    start = int(rm.group(1))
                    if start >= size:
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{size}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                self.send_response(206 if start else 200)
                etag = repo.sha256(file_path) if repo.lfs else repo.sha1(file_path)
                self.send_header("ETag", f'"{etag}"')
                if repo.lfs:
                    self.send_header("X-Linked-Etag", f'"{etag}"')
                    self.send_header("X-Linked-Size", str(size))
                self.send_header("X-Repo-Commit", repo.commit)
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(size - start))
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
                self.end_headers()
                if self.command == "HEAD":
                    return
                self._send_body(repo, file_path, memoryview(data)[start:])

            def _send_body(self, repo: FakeRepo, file_path: str, body: memoryview) -> None:
                misbehave = hub.misbehave
                key = f"{repo.repo_id}/{file_path}"
                drop = misbehave.drop_after.pop(file_path, None)
                freeze = misbehave.freeze_after.pop(file_path, None)
                rate = misbehave.bytes_per_second
                step = 1024 * 1024 if rate is None else max(1024, int(rate / 50))
                began = time.monotonic()
                sent = 0
                try:
                    while sent < len(body):
                        piece = body[sent : sent + step]
                        if drop is not None and sent + len(piece) > drop:
                            piece = piece[: max(0, drop - sent)]
                            self.wfile.write(piece)
                            hub._count(key, len(piece))
                            self.close_connection = True
                            self.connection.shutdown(2)
                            return
                        if freeze is not None and sent + len(piece) > freeze:
                            piece = piece[: max(0, freeze - sent)]
                            self.wfile.write(piece)
                            self.wfile.flush()
                            hub._count(key, len(piece))
                            # Silent, connection open: what a frozen mirror looks like.
                            hub.thaw.wait(120)
                            self.close_connection = True
                            return
                        self.wfile.write(piece)
                        sent += len(piece)
                        hub._count(key, len(piece))
                        if rate is not None:
                            # Throttle: the server paces its own output.
                            ahead = sent / rate - (time.monotonic() - began)
                            if ahead > 0:
                                time.sleep(ahead)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

        return Handler


def main() -> None:
    """Serve a hub with some random files, for trying dspine by hand."""
    import argparse
    import random

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--rate", type=float, default=None, help="throttle to this many MiB/s")
    args = parser.parse_args()
    rng = random.Random(0)
    hub = FakeHub()
    hub.add_repo("demo/Demo-GGUF", {"Demo-Q4_K_M.gguf": rng.randbytes(args.mib * 1024 * 1024)})
    hub.add_repo("unsloth/Qwen3.8-27B-GGUF", {"Qwen3.8-27B-Q4_K_M.gguf": rng.randbytes(args.mib * 1024 * 1024)})
    hub.add_repo(
        "aj9o9/Qwen3.8-27B-DSpine-b16-GGUF",
        {"Qwen3.8-27B-DSpine-b16-Q4_K_M.gguf": rng.randbytes(args.mib * 256 * 1024)},
    )
    if args.rate:
        hub.misbehave.bytes_per_second = args.rate * 1024 * 1024
    hub.start()
    print(f"HF_ENDPOINT={hub.url}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
