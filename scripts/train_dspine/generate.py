"""llama-server for the target's own greedy continuations of the prompts (continuations.py
keeps them, chunk by chunk, in the repository): the prompt's tokens (ChatML, as the server
tokenizes it) and the continuation's tokens.

The server runs with LLAMA_ARG_REPACK=false (the CPU's AMX repack crashes on the machines
this ran on) and, by default, one thread: the trainer shares a 2-core machine."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as reply:
        return json.loads(reply.read())


class Server:
    """llama-server on 127.0.0.1 for the target alone (no drafter: plain greedy decoding)."""

    def __init__(self, binary: Path, model: Path, slots: int = 4, threads: int = 1) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(model.parent / "llama-server.log", "w")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [str(binary), "-m", str(model), "--port", str(self.port), "--host", "127.0.0.1",
             "-c", str(4096 * slots), "-np", str(slots), "-t", str(threads), "--no-webui"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "LLAMA_ARG_REPACK": "false"},
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama-server exited (see {self.log.name})")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                time.sleep(0.5)  # polling a starting server, not waiting for a result
        raise RuntimeError(f"llama-server did not come up in 120 s (see {self.log.name})")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()

    def tokenize(self, text: str) -> list[int]:
        return list(
            _post(self.url + "/tokenize", {"content": text, "add_special": True, "parse_special": True})["tokens"]
        )

    def greedy(self, tokens: list[int], n_predict: int) -> list[int]:
        body = {"prompt": tokens, "n_predict": n_predict, "temperature": 0.0, "top_k": 1,
                "cache_prompt": False, "return_tokens": True, "samplers": ["top_k"]}  # fmt: skip
        return list(_post(self.url + "/completion", body)["tokens"])
