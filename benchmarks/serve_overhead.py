"""Per-token cost of `dspine serve` against llama-server direct: same server, same
model and drafter, streamed requests alternating between the two, greedy.

The proxy runs in its own process, as `dspine serve` does; the fastest setup
this machine has (a tiny generated model drafting for itself: every draft
accepted) gives the highest token rate, where a per-token cost shows most.

    .venv/bin/python benchmarks/serve_overhead.py [--rounds 7] [--tokens 1500]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def run_proxy(upstream: str, key: str, port: int, ready) -> None:
    import asyncio
    import socket

    from app.serve.board import Board
    from app.serve.connections import listen, runner
    from app.serve.proxy import Proxy, ProxyConfig

    async def main() -> None:
        proxy = Proxy(ProxyConfig(upstream, key, "bench", 4096), Board())
        app_runner = runner(proxy.app())  # as dspine serve listens: its deadlines wrap every connection
        await app_runner.setup()
        await listen(app_runner, socket.create_server(("127.0.0.1", port)))
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


BODY = {
    "messages": [{"role": "user", "content": "go"}],
    "stream": True,
    # Every sampling field set, so the proxy adds no preset and both paths sample alike.
    "temperature": 0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
    "presence_penalty": 0.0,
    "chat_template_kwargs": {"enable_thinking": False},
}


def one_stream(url: str, key: str | None, tokens: int) -> tuple[float, float, int]:
    """(client-side tok/s between first and last token, llama-server's own tok/s, events)."""
    import json

    import httpx2

    body = {**BODY, "max_tokens": tokens}
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    first = last = 0.0
    events = 0
    server_rate = 0.0
    with (
        httpx2.Client(timeout=300) as http,
        http.stream("POST", url + "/v1/chat/completions", json=body, headers=headers) as reply,
    ):
        for line in reply.iter_lines():
            if not line.startswith("data:"):
                continue
            now = time.perf_counter()
            first = first or now
            last = now
            events += 1
            if '"timings"' in line:
                server_rate = json.loads(line[5:])["timings"]["predicted_per_second"]
    return (events - 2) / (last - first), server_rate, events


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=1500)
    args = parser.parse_args()
    from benchmarks.machine import settle_repacking

    settle_repacking()  # as dspine's engines do: no AMX crash on such a CPU

    import psutil

    from backends.llama_server import LlamaServerEngine, ServerConfig, free_port
    from tests.support.gguf_models import chat_model, write_model

    folder = Path(tempfile.mkdtemp(prefix="dspine-serve-bench-"))
    shape = chat_model()
    target = write_model(folder / "target.gguf", shape, scale=0.02)
    same = write_model(folder / "same.gguf", shape, scale=0.02)
    config = ServerConfig(
        model=str(target),
        draft_model=str(same),
        drafter_kind="draft",
        n_ctx=4096,
        gpu_layers=0,
        draft_gpu_layers=0,
        n_max=8,
        draft_p_min=0.0,  # the generated drafter's near-flat logits never pass the draft kind's floor
    )
    engine = LlamaServerEngine(config, log_dir=folder).start()
    assert engine.base_url and engine.api_key
    port = free_port()
    ready = multiprocessing.Event()
    proxy = multiprocessing.Process(target=run_proxy, args=(engine.base_url, engine.api_key, port, ready), daemon=True)
    proxy.start()
    ready.wait(30)
    proxy_cpu = psutil.Process(proxy.pid)
    direct_url, proxy_url = engine.base_url, f"http://127.0.0.1:{port}"
    try:
        one_stream(direct_url, engine.api_key, 100)  # warm up both paths
        one_stream(proxy_url, None, 100)
        direct, via, server_direct, server_via, cpu_per_token = [], [], [], [], []
        for _ in range(args.rounds):
            rate, server, _events = one_stream(direct_url, engine.api_key, args.tokens)
            direct.append(rate)
            server_direct.append(server)
            before = sum(proxy_cpu.cpu_times()[:2])
            rate, server, events = one_stream(proxy_url, None, args.tokens)
            cpu_per_token.append((sum(proxy_cpu.cpu_times()[:2]) - before) / events)
            via.append(rate)
            server_via.append(server)
    finally:
        proxy.terminate()
        engine.close()
    med = statistics.median
    print(
        f"{args.tokens} tokens a request, greedy, every draft accepted (k=8), {args.rounds} rounds alternating, median"
    )
    print(f"  llama-server direct   {med(direct):8.1f} tok/s at the client (server's own {med(server_direct):.1f})")
    print(f"  through dspine serve  {med(via):8.1f} tok/s at the client (server's own {med(server_via):.1f})")
    # This machine's load moves llama-server's own rate between rounds; what the proxy can
    # cost is the gap between the rate the client sees and the rate the server produced.
    kept_direct = med([c / s for c, s in zip(direct, server_direct, strict=True)])
    kept_via = med([c / s for c, s in zip(via, server_via, strict=True)])
    print(f"  client rate / server's own rate: direct {kept_direct:.4f}, through serve {kept_via:.4f}")
    print(f"  added cost per streamed token: {1 - kept_via / kept_direct:.2%} of llama-server's rate")
    cost = med(cpu_per_token)
    print(f"  proxy CPU per streamed token: {cost * 1e6:.1f} us = {cost * 800:.1%} of a token's time at 800 tok/s")


if __name__ == "__main__":
    main()
