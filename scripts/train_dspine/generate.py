"""The target's own greedy continuations of the prompts, from the patched llama-server.

One JSON line a prompt in `sequences.jsonl`: the prompt's tokens (ChatML, as the server
tokenizes it) and the continuation's tokens. Lines already written are kept, so a stopped
run goes on where it stopped.

The server runs with LLAMA_ARG_REPACK=false (the CPU's AMX repack crashes on the machines
this ran on) and, by default, one thread: the trainer shares a 2-core machine."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .corpus import Prompt, chat


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


def generate(
    prompts: list[Prompt], out: Path, binary: Path, model: Path, n_predict: int, slots: int = 4, threads: int = 1
) -> None:
    done = set()
    if out.exists():
        done = {json.loads(line)["text"] for line in out.read_text().splitlines() if line.strip()}
    todo = [p for p in prompts if p.text not in done]
    print(f"continuations: {len(done)} done, {len(todo)} to go ({n_predict} tokens each)", flush=True)
    if not todo:
        return
    server = Server(binary, model, slots=slots, threads=threads)
    start = time.monotonic()
    try:

        def one(prompt: Prompt) -> dict:
            tokens = server.tokenize(chat(prompt.messages))
            return {"category": prompt.category, "family": prompt.family, "held_out": prompt.held_out,
                    "text": prompt.text, "prompt": tokens,
                    "continuation": server.greedy(tokens, n_predict)}  # fmt: skip

        with out.open("a") as sink, ThreadPoolExecutor(slots) as pool:
            for i, record in enumerate(pool.map(one, todo), 1):
                sink.write(json.dumps(record) + "\n")
                sink.flush()
                if i % 20 == 0 or i == len(todo):
                    rate = i / (time.monotonic() - start)
                    print(f"  {i}/{len(todo)} prompts, {(len(todo) - i) / rate:.0f} s left", flush=True)
    finally:
        server.stop()
