"""The draft probability floor (`--spec-draft-p-min`: a draft stops at the first position
where the drafter's own probability for its token is below it) for plain draft models,
measured in one run through dspine's patched llama-server: the real SmolLM2-135M Q8_0
target with its Q4_1 (close) and Q2_K (far) quants as drafters, and the generated pair
of benchmarks/engine_speed.py (a 95M target, its 1-block drafter with noise). Each
mode's preset with a fixed seed, draft length 8.

Prints tok/s and accepted share per floor, and each floor's rate as a share of the
best floor's, per pair and mode; the kind's default in backends/drafters.py is the
floor closest to the best everywhere (the highest worst-case share). The servers take
turns round after round and each is scored by its best round (this machine's other
tenants only ever add time).

Timings on a loaded 2-core machine swing by 2-3x between runs that do the same work, so
each floor's work is also counted, which load does not change (a fixed seed): target
passes (verify steps) and drafted tokens per generated token. From those, the rate in
units of one target pass for a drafter that costs `c` of a target pass per drafted
token: c = 0.1 (a small drafter on a GPU, where a verify pass of a few tokens costs
about one decode step) and c = 1 (a drafter as big as its target, as the SmolLM2 quants
are), printed as shares of the best floor's. `--by work` (the default) picks the floor
with the highest worst-case share at c = 0.1, where drafting can pay at all: at c = 1 no
floor beats plain decoding (a kept draft costs what the target pass it saves costs), and
break-even (backends/break_even.py) switches such a drafter off.

    .venv/bin/python benchmarks/draft_p_min.py [--tokens 128] [--rounds 2] [--binary PATH]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.events import End  # noqa: E402
from backends.llama_server import LlamaServerEngine, ServerConfig  # noqa: E402
from backends.sampling import preset  # noqa: E402
from benchmarks.engine_speed import MESSAGES, make_pair  # noqa: E402
from tests.support.real_models import smollm2_pair  # noqa: E402

FLOORS = (0.0, 0.3, 0.5, 0.75, 0.9)


@dataclass(frozen=True)
class Pair:
    target: Path
    drafter: Path
    kind: str = "draft"
    n_max: int = 8


def launch(binary: str, pair: Pair, floor: float, log_dir: Path) -> LlamaServerEngine:
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    config = ServerConfig(
        model=str(pair.target),
        draft_model=str(pair.drafter),
        drafter_kind=pair.kind,
        n_ctx=2048,
        gpu_layers=0,
        draft_gpu_layers=0,
        n_max=pair.n_max,
        extra_args=("--poll", "0", "--poll-draft", "0", "--spec-draft-p-min", str(floor)),
    )
    return LlamaServerEngine(config, binary=binary, log_dir=log_dir).start()


COSTS = (0.1, 1.0)  # a drafted token's cost, in target passes


def run(engine: LlamaServerEngine, think: bool, tokens: int, n_max: int) -> tuple[float, int, int, int]:
    sampling = preset(think).with_(seed=3, max_tokens=tokens)
    end = [e for e in engine.stream(MESSAGES, think=think, sampling=sampling, n_max=n_max) if isinstance(e, End)][-1]
    return end.stats.tokens_per_s or 0.0, end.stats.accepted, end.stats.drafted, end.stats.generated_tokens


def modelled(found: tuple[float, int, int, int], cost: float) -> float:
    """Tokens per target pass: each verify step yields its kept drafts plus one token."""
    _, kept, drafted, tokens = found
    steps = max(tokens - kept, 1)
    return tokens / (steps + cost * drafted)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--binary", help="the patched llama-server (default: the tests' cached build)")
    parser.add_argument("--by", choices=["time", "work"], default="work", help="what picks the default")
    parser.add_argument(
        "--kind",
        choices=["draft", "dspine"],
        default="draft",
        help="draft: the plain draft models; dspine: a DSpine drafter for SmolLM2 (--dspine)",
    )
    parser.add_argument("--dspine", type=Path, help="the DSpine drafter's GGUF (with --kind dspine)")
    args = parser.parse_args()
    from benchmarks.machine import settle_repacking

    settle_repacking()  # as dspine's engines do: no AMX crash on such a CPU
    if args.kind == "dspine" and args.dspine is None:
        parser.error("--kind dspine needs --dspine PATH.gguf (a DSpine drafter for SmolLM2-135M)")
    if args.binary:
        binary = args.binary
    else:
        from tests.support.patched_server import build_folder

        binary = str(build_folder() / "bin" / "llama-server")
    real = smollm2_pair(Path(tempfile.gettempdir()) / "dspine-smollm2")
    if args.kind == "dspine":
        pairs = {"smollm2 dspine": Pair(real["target"], args.dspine, "dspine", 15)}
    else:
        generated = make_pair(Path(tempfile.mkdtemp(prefix="dspine-p-min-")), 0.15)
        pairs = {
            "smollm2 q4": Pair(real["target"], real["q4"]),
            "smollm2 q2": Pair(real["target"], real["q2"]),
            "generated": Pair(*generated),
        }
    logs = Path(tempfile.mkdtemp(prefix="dspine-p-min-logs-"))
    worst: dict[float, float] = dict.fromkeys(FLOORS, 1.0)
    worst_work: dict[tuple[float, float], float] = {(floor, c): 1.0 for floor in FLOORS for c in COSTS}
    for name, pair in pairs.items():
        for think in (False, True):
            best: dict[float, tuple[float, int, int, int]] = {}
            for _ in range(args.rounds):
                for floor in FLOORS:
                    engine = launch(binary, pair, floor, logs)
                    try:
                        run(engine, think, 16, pair.n_max)  # warm the caches
                        found = run(engine, think, args.tokens, pair.n_max)
                    finally:
                        engine.close()
                    if floor not in best or found[0] > best[floor][0]:
                        best[floor] = found
            top = max(found[0] for found in best.values())
            top_work = {c: max(modelled(found, c) for found in best.values()) for c in COSTS}
            mode = "think on " if think else "think off"
            cells = []
            for floor in FLOORS:
                rate, kept, drafted, tokens = best[floor]
                worst[floor] = min(worst[floor], rate / top)
                share = f"{kept}/{drafted} kept" if drafted else "no drafts"
                work = []
                for c in COSTS:
                    ratio = modelled(best[floor], c) / top_work[c]
                    worst_work[floor, c] = min(worst_work[floor, c], ratio)
                    work.append(f"c={c}: {ratio:.3f}")
                cells.append(f"p_min {floor}: {rate:.1f} tok/s ({rate / top:.3f}), {share}, {', '.join(work)}")
            print(f"{name:<11} {mode}  " + " | ".join(cells))
    print("worst share of the best, timed: " + ", ".join(f"{floor}: {worst[floor]:.3f}" for floor in FLOORS))
    for c in COSTS:
        shares = ", ".join(f"{floor}: {worst_work[floor, c]:.3f}" for floor in FLOORS)
        print(f"worst share of the best, counted work, c={c}: {shares}")
    if args.by == "time":
        pick = max(FLOORS, key=lambda floor: worst[floor])
    else:
        pick = max(FLOORS, key=lambda floor: worst_work[floor, COSTS[0]])
    print(f"the floor closest to the best everywhere ({args.by}): {pick}")


if __name__ == "__main__":
    main()
