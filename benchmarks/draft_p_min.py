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
passes (verify steps) and the drafter's work per generated token. What the drafter's work
is depends on how it drafts: a draft model pays per token it drafts (one decode each), a
block drafter (DSpine, DFlash) pays one block pass per verify step whatever it drafted, so a
block drafter whose floor stops every draft still pays every pass and is never "as fast as
plain". From the counts, the rate in units of one target pass for a drafter that costs `c`
of a target pass per drafted token (draft models) or per block pass (block drafters): c =
0.1 (a small drafter on a GPU) and c = 1 (a drafter as costly as its target, as the SmolLM2
quants are, or a block pass on a CPU), printed as shares of the best floor's. These shares
are modelled from counted work, not timed. `--by work` (the default) picks the floor with
the highest worst-case share at c = 0.1, where drafting can pay at all.

Plain decoding (no drafter) runs in the same rotation, each round beside the floors: every
floor's timed rate is also printed as a ratio to plain's median, with its spread over
rounds, which says whether any floor pays on this machine at all.

    .venv/bin/python benchmarks/draft_p_min.py [--tokens 128] [--rounds 2] [--binary PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
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


BLOCK_KINDS = ("dspine", "dflash")  # one block pass a verify step, whatever it drafts


@dataclass(frozen=True)
class Pair:
    target: Path
    drafter: Path | None  # None: plain decoding
    kind: str = "draft"
    n_max: int = 8


def launch(binary: str, pair: Pair, floor: float, log_dir: Path) -> LlamaServerEngine:
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    drafting = pair.drafter is not None
    config = ServerConfig(
        model=str(pair.target),
        draft_model=str(pair.drafter) if drafting else None,
        drafter_kind=pair.kind if drafting else None,
        n_ctx=2048,
        gpu_layers=0,
        draft_gpu_layers=0,
        n_max=pair.n_max if drafting else 0,
        extra_args=("--poll", "0") + (("--poll-draft", "0", "--spec-draft-p-min", str(floor)) if drafting else ()),
    )
    return LlamaServerEngine(config, binary=binary, log_dir=log_dir).start()


COSTS = (0.1, 1.0)  # a drafted token's cost, in target passes


def run(engine: LlamaServerEngine, think: bool, tokens: int, n_max: int) -> tuple[float, int, int, int]:
    sampling = preset(think).with_(seed=3, max_tokens=tokens)
    end = [e for e in engine.stream(MESSAGES, think=think, sampling=sampling, n_max=n_max) if isinstance(e, End)][-1]
    return end.stats.tokens_per_s or 0.0, end.stats.accepted, end.stats.drafted, end.stats.generated_tokens


def modelled(found: tuple[float, int, int, int], cost: float, kind: str = "draft") -> float:
    """Generated tokens per target pass's worth of work. Each verify step yields its kept drafts
    plus one token and costs one target pass; the drafter adds `cost` per drafted token (a draft
    model) or per verify step (a block drafter: its block pass runs whatever the floor keeps)."""
    _, kept, drafted, tokens = found
    steps = max(tokens - kept, 1)
    drafter_work = cost * steps if kind in BLOCK_KINDS else cost * drafted
    return tokens / (steps + drafter_work)


def spread(values: list[float]) -> str:
    ordered = sorted(values)
    return f"{statistics.median(ordered):.2f}x" + (f" ({ordered[0]:.2f}-{ordered[-1]:.2f})" if len(ordered) > 1 else "")


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
        plain_pair = Pair(pair.target, None)
        for think in (False, True):
            best: dict[float, tuple[float, int, int, int]] = {}
            to_plain: dict[float, list[float]] = {floor: [] for floor in FLOORS}
            for _ in range(args.rounds):
                # plain first one round, last the next: a slow minute hits plain and the floors alike
                order: list[float | None] = [None, *FLOORS]
                if len(to_plain[FLOORS[0]]) % 2:
                    order.reverse()
                rates: dict[float | None, tuple[float, int, int, int]] = {}
                for floor in order:
                    engine = launch(binary, pair if floor is not None else plain_pair, floor or 0.0, logs)
                    try:
                        run(engine, think, 16, pair.n_max)  # warm the caches
                        rates[floor] = run(engine, think, args.tokens, pair.n_max if floor is not None else 0)
                    finally:
                        engine.close()
                for floor in FLOORS:
                    found = rates[floor]
                    to_plain[floor].append(found[0] / max(rates[None][0], 1e-9))
                    if floor not in best or found[0] > best[floor][0]:
                        best[floor] = found
            top = max(found[0] for found in best.values())
            top_work = {c: max(modelled(found, c, pair.kind) for found in best.values()) for c in COSTS}
            mode = "think on " if think else "think off"
            cells = []
            for floor in FLOORS:
                rate, kept, drafted, tokens = best[floor]
                worst[floor] = min(worst[floor], rate / top)
                share = f"{kept}/{drafted} kept" if drafted else "no drafts"
                work = []
                for c in COSTS:
                    per_pass = modelled(best[floor], c, pair.kind)  # plain decoding: 1 token a pass
                    ratio = per_pass / top_work[c]
                    worst_work[floor, c] = min(worst_work[floor, c], ratio)
                    work.append(f"c={c}: {ratio:.3f} of the best, {per_pass:.2f}x plain")
                cells.append(
                    f"p_min {floor}: {rate:.1f} tok/s ({rate / top:.3f}), timed {spread(to_plain[floor])} plain, "
                    f"{share}, modelled {', '.join(work)}"
                )
            print(f"{name:<11} {mode}  " + " | ".join(cells))
    charged = "per block pass" if any(p.kind in BLOCK_KINDS for p in pairs.values()) else "per drafted token"
    print(f"(modelled shares charge the drafter {charged}; timed ratios are to plain decoding in the same rounds)")
    print("worst share of the best, timed: " + ", ".join(f"{floor}: {worst[floor]:.3f}" for floor in FLOORS))
    for c in COSTS:
        shares = ", ".join(f"{floor}: {worst_work[floor, c]:.3f}" for floor in FLOORS)
        print(f"worst share of the best, modelled from counted work, c={c}: {shares}")
    if args.by == "time":
        pick = max(FLOORS, key=lambda floor: worst[floor])
    else:
        pick = max(FLOORS, key=lambda floor: worst_work[floor, COSTS[0]])
    print(f"the floor closest to the best everywhere ({args.by}): {pick}")


if __name__ == "__main__":
    main()
