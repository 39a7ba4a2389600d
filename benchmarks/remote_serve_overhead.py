"""What `dspine serve --engine remote` costs a request against calling the remote directly:
a llama-server started as a remote (its own key file, /metrics, a drafter), `dspine serve
--url` in front of it as a user runs it (its own process, the remote's key from
DSPINE_API_KEY), streamed greedy requests alternating between the two, the order turned
each round. The fastest setup this machine has (a tiny generated model drafting for
itself) gives the highest token rate, where a per-token cost shows most.

    .venv/bin/python benchmarks/remote_serve_overhead.py [--rounds 8] [--tokens 1000]

Prints, per round, what each path costs outside the server (the request's wall time less
the server's own prompt and generation time, from its timings), and what serve adds, as
median and min-max and as a share of a direct request's time.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.serve_overhead import BODY  # noqa: E402  (the same request both measure)


def timed(url: str, key: str | None, tokens: int) -> tuple[float, float]:
    """(the request's wall time at the client, the server's own time for it: prompt + generation).
    Their difference is what the path costs outside the server: this machine's load moves the
    server's own time by several times between requests, and would drown any proxy's cost."""
    import json

    import httpx2

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    server_s = 0.0
    started = time.perf_counter()
    with (
        httpx2.Client(timeout=600) as http,
        http.stream(
            "POST", url + "/v1/chat/completions", json={**BODY, "max_tokens": tokens}, headers=headers
        ) as reply,
    ):
        for line in reply.iter_lines():
            if line.startswith("data:") and '"timings"' in line:
                timings = json.loads(line[5:])["timings"]
                server_s = (timings["prompt_ms"] + timings["predicted_ms"]) / 1000
    return time.perf_counter() - started, server_s


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--verbose", action="store_true", help="print each round's figures")
    args = parser.parse_args()
    from benchmarks.machine import settle_repacking

    settle_repacking()  # as dspine's engines do: no AMX crash on such a CPU

    from backends.llama_server import LlamaServerEngine, ServerConfig, free_port
    from tests.support.gguf_models import chat_model, write_model

    folder = Path(tempfile.mkdtemp(prefix="dspine-remote-bench-"))
    shape = chat_model()
    target = write_model(folder / "target.gguf", shape, scale=0.02)
    same = write_model(folder / "same.gguf", shape, scale=0.02)
    config = ServerConfig(
        model=str(target), draft_model=str(same), drafter_kind="draft", n_ctx=4096, gpu_layers=0,
        draft_gpu_layers=0, n_max=8, draft_p_min=0.0,
    )  # fmt: skip
    remote = LlamaServerEngine(config, log_dir=folder).start()  # keyed (its own key, in a 0600 file)
    assert remote.base_url and remote.api_key
    port = free_port()
    env = {**os.environ, "DSPINE_API_KEY": remote.api_key, "LLAMA_ARG_REPACK": "false"}
    serve = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--url", remote.base_url + "/v1", "--port", str(port), "--think", "off"],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert serve.stdout is not None
        for line in serve.stdout:
            if re.match(r"serving ", line):
                break
        direct, via = remote.base_url, f"http://127.0.0.1:{port}"
        timed(direct, remote.api_key, 100)  # warm both paths
        timed(via, None, 100)
        outside: dict[str, list[float]] = {"direct": [], "serve": []}
        walls: list[float] = []
        for round_ in range(args.rounds):
            order = [("direct", direct, remote.api_key), ("serve", via, None)]
            if round_ % 2:
                order.reverse()
            for name, url, key in order:
                wall, server_s = timed(url, key, args.tokens)
                outside[name].append(wall - server_s)
                if name == "direct":
                    walls.append(wall)
                if args.verbose:
                    print(f"  round {round_} {name}: wall {wall:.3f} s, server {server_s:.3f} s")
    finally:
        serve.terminate()
        serve.wait(30)
        remote.close()
    med = statistics.median
    added = [v - d for v, d in zip(outside["serve"], outside["direct"], strict=True)]
    print(
        f"{args.tokens} tokens a streamed request, greedy, {args.rounds} rounds alternating (order turned each round)"
    )
    print(f"  time outside the server, direct:        {med(outside['direct']) * 1000:7.1f} ms a request (median)")
    print(f"  time outside the server, through serve: {med(outside['serve']) * 1000:7.1f} ms a request (median)")
    print(
        f"  added by serve: {med(added) * 1000:.1f} ms a request ({min(added) * 1000:.1f} to {max(added) * 1000:.1f})"
    )
    print(f"  a direct request took {med(walls):.3f} s ({min(walls):.3f} to {max(walls):.3f})")
    share = [a / w for a, w in zip(added, walls, strict=True)]
    print(f"  = {med(share):.2%} of a direct request's time ({min(share):.2%} to {max(share):.2%}); goal: under 2%")


if __name__ == "__main__":
    main()
