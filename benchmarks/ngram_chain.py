"""N-gram drafts chained before the model drafter, side by side in one run: on the real
SmolLM2-135M pair (Q8_0 target, its Q4_1 as drafter), both engines, greedy, prompts that
copy from the context (a file rewritten, a method patched) and one that copies nothing
(a poem), each with: plain decoding, the model drafter, n-gram drafts alone, the chain.

    .venv/bin/python benchmarks/ngram_chain.py [--tokens 160] [--rounds 1] [--engines inproc,server]
        [--ngram-match N] [--llama-server PATH] [--drafter q4_1|dspine --dspine PATH.gguf]

`--drafter dspine` puts a DSpine drafter for SmolLM2 (--dspine: a drafter
far cheaper than its target, as on a GPU pair) behind the copies instead of the Q4_1 file,
on the (patched) llama-server only.

Goals (issue #38): the chain at least 1.4x plain on the rewrite, and within 3% of the best
single drafter on new text. Each cell is the best of --rounds replies (tok/s from the
engine's own decode time), with the kept tokens per verify step and how many of the kept
tokens were copies.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.drafters import NGRAM  # noqa: E402
from backends.events import End  # noqa: E402
from backends.inproc import InprocEngine  # noqa: E402
from backends.llama_server import LlamaServerEngine, ServerConfig  # noqa: E402
from backends.prompt_lookup import LookupSettings  # noqa: E402
from backends.sampling import Sampling  # noqa: E402
from backends.stats import Stats  # noqa: E402
from tests.support.copy_prompts import PROMPTS  # noqa: E402
from tests.support.real_models import smollm2_pair  # noqa: E402

SETUPS = ("plain", "model", "n-gram", "chain")
N_MAX = 8  # the model drafter's length (the real pair's best region, tests/engines/test_real_model.py)


def open_engine(args: argparse.Namespace, engine: str, setup: str, pair: dict[str, Path], log_dir: Path):
    dspine = args.drafter == "dspine"
    drafter = (args.dspine if dspine else pair["q4"]) if setup in ("model", "chain") else None
    ngram = setup in ("n-gram", "chain")
    if engine == "inproc":
        return InprocEngine(
            str(pair["target"]),
            draft_path=str(drafter) if drafter else None,
            n_ctx=2048,
            n_max=N_MAX,
            ngram=LookupSettings() if ngram else None,
        ).load()
    config = ServerConfig(
        model=str(pair["target"]),
        draft_model=str(drafter) if drafter else None,
        drafter_kind=("dspine" if dspine else "draft") if drafter else None,
        n_ctx=2048,
        gpu_layers=0,
        draft_gpu_layers=0,
        n_max=(15 if dspine else N_MAX) if drafter else None,  # DSpine: a block of 16 drafts 15 in place
        ngram=dataclasses.replace(NGRAM, n_match=args.ngram_match) if ngram else None,
    )
    return LlamaServerEngine(config, log_dir=log_dir, binary=args.llama_server).start()


def measure(engine, messages: list[dict], tokens: int, rounds: int) -> Stats:
    best: Stats | None = None
    for _ in range(rounds):
        events = list(engine.stream(messages, think=False, sampling=Sampling(temperature=0, max_tokens=tokens)))
        end = events[-1]
        if not isinstance(end, End):
            raise SystemExit(f"the engine failed: {end}")
        if best is None or (end.stats.tokens_per_s or 0) > (best.tokens_per_s or 0):
            best = end.stats
    assert best is not None
    return best


def cell(stats: Stats, plain: Stats | None) -> str:
    rate = stats.tokens_per_s or 0.0
    ratio = f" {rate / plain.tokens_per_s:.2f}x" if plain and plain.tokens_per_s else ""
    per_step = f" {stats.acceptance_length:.2f}/step" if stats.drafted and stats.acceptance_length else ""
    copied = f" ({stats.ngram_accepted} copied)" if stats.ngram_drafted else ""
    return f"{rate:.1f} tok/s{ratio}{per_step}{copied}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=160)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--engines", default="inproc,server")
    parser.add_argument("--llama-server", default=None, help="the (patched) llama-server to run")
    parser.add_argument("--ngram-match", type=int, default=NGRAM.n_match, help="the server's n-gram match length")
    parser.add_argument("--drafter", choices=("q4_1", "dspine"), default="q4_1", help="the model drafter")
    parser.add_argument("--dspine", type=Path, help="the DSpine drafter's GGUF (with --drafter dspine)")
    parser.add_argument("--models", type=Path, default=Path.home() / ".cache" / "dspine-bench" / "smollm2")
    args = parser.parse_args()
    from benchmarks.machine import settle_repacking

    settle_repacking()  # as dspine's engines do: no AMX crash on such a CPU
    if args.drafter == "dspine" and args.dspine is None:
        parser.error("--drafter dspine needs --dspine PATH.gguf (a DSpine drafter for SmolLM2-135M)")
    if args.drafter == "dspine" and args.engines != "server":
        parser.error("--drafter dspine runs on the (patched) llama-server only: add --engines server")
    pair = smollm2_pair(args.models)
    log_dir = args.models / "logs"
    results: dict[tuple[str, str, str], Stats] = {}
    for engine_name in args.engines.split(","):
        for setup in SETUPS:
            print(f"{engine_name} / {setup} ...", file=sys.stderr, flush=True)
            engine = open_engine(args, engine_name, setup, pair, log_dir)
            try:
                for label, messages in PROMPTS.items():
                    results[engine_name, setup, label] = measure(engine, messages, args.tokens, args.rounds)
            finally:
                engine.close()
    drafter = "the DSpine drafter trained here" if args.drafter == "dspine" else f"Q4_1 at {N_MAX}"
    print(f"SmolLM2-135M Q8_0, model drafter {drafter}, greedy, {args.tokens} tokens, best of {args.rounds}")
    print()
    print("| engine | prompt | " + " | ".join(SETUPS) + " |")
    print("|---|---|" + "---|" * len(SETUPS))
    for engine_name in args.engines.split(","):
        for label in PROMPTS:
            plain = results[engine_name, "plain", label]
            row = [cell(results[engine_name, setup, label], plain) for setup in SETUPS]
            print(f"| {engine_name} | {label} | " + " | ".join(row) + " |")
    print()
    for engine_name in args.engines.split(","):
        for label in PROMPTS:
            rates = {s: results[engine_name, s, label].tokens_per_s or 0.0 for s in SETUPS}
            best_single = max(rates["model"], rates["n-gram"])
            print(
                f"{engine_name} {label}: chain {rates['chain'] / rates['plain']:.2f}x plain, "
                f"{rates['chain'] / best_single:.3f} of the best single drafter"
            )


if __name__ == "__main__":
    main()
