"""In process, the n-gram drafter alone (dspine's own prompt lookup, backends/prompt_lookup.py) by
its settings, against plain decoding: the real SmolLM2-135M Q8_0 on an edit turn, a file rewrite
(tests/support/copy_prompts.py), bench's two edit prompts and one new-text prompt.

Setups are `N/A-B`: drafts of at most N tokens, matches of B down to A tokens (the default is
16/2-4). Every engine stays open; each prompt runs on every setup back to back, the order turned
each round, with another seed each round (under --sampling card: SmolLM2's card, temperature
0.2, top_p 0.9, from the catalog; greedy: temperature 0). Each cell is the median of the
per-round ratios to plain's run of the same prompt and round, with their min-max, and the tokens
kept per verify step.

    .venv/bin/python benchmarks/inproc_lookup_settings.py [--rounds 3] [--tokens 96]
        [--sampling card|greedy] [16/2-4 8/4-4 8/3-4 ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def parse(text: str):
    from backends.prompt_lookup import LookupSettings

    length, match = text.split("/")
    low, high = match.split("-")
    return LookupSettings(n_max=int(length), ngram_min=int(low), ngram_max=int(high), n_min=min(2, int(length)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("setups", nargs="*", default=["16/2-4", "8/4-4", "8/3-4"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--sampling", choices=["card", "greedy"], default="card")
    args = parser.parse_args()

    from app.models.catalog import load_catalog
    from backends.events import End
    from backends.inproc import InprocEngine
    from tests.support.copy_prompts import edit, rewrite
    from tests.support.real_models import smollm2_pair

    pair = smollm2_pair(Path(tempfile.gettempdir()) / "dspine-smollm2")
    card = load_catalog().find("smollm2-135m").sampling
    assert card is not None
    base = card.for_mode(False).with_(max_tokens=args.tokens)
    if args.sampling == "greedy":
        base = base.with_(temperature=0.0)
    root = Path(__file__).resolve().parents[1]
    bench_edits = [
        json.loads(line)["messages"] for line in (root / "assets/prompts/edit.jsonl").read_text().splitlines()
    ]
    code = json.loads((root / "assets/prompts/code.jsonl").read_text().splitlines()[0])["messages"]
    prompts = {"edit turn": edit(), "rewrite": rewrite(), "bench edit 1": bench_edits[0]}
    prompts |= {"bench edit 2": bench_edits[1], "new text (code)": code}

    engines = {"plain": InprocEngine(str(pair["target"]), n_ctx=4096).load()}
    for setup in args.setups:
        engines[setup] = InprocEngine(str(pair["target"]), n_ctx=4096, ngram=parse(setup)).load()
    ratios: dict[tuple[str, str], list[float]] = {}
    kept: dict[tuple[str, str], list[float]] = {}
    try:
        for round_ in range(args.rounds):
            sampling = base.with_(seed=round_)
            order = list(engines) if round_ % 2 == 0 else list(reversed(engines))
            for name, messages in prompts.items():
                rates = {}
                for setup in order:
                    end = None
                    for event in engines[setup].stream(messages, think=False, sampling=sampling):
                        if isinstance(event, End):
                            end = event
                    assert end is not None and end.stats.tokens_per_s, f"{setup}: no reply"
                    rates[setup] = end.stats.tokens_per_s
                    steps = end.stats.verify_steps or 0
                    if steps:
                        kept.setdefault((name, setup), []).append((end.stats.accepted + steps) / steps)
                for setup, rate in rates.items():
                    ratios.setdefault((name, setup), []).append(rate / rates["plain"])
    finally:
        for engine in engines.values():
            engine.close()
    setups = [s for s in engines if s != "plain"]
    print(f"\nin process, {args.sampling} sampling, {args.tokens} tokens, {args.rounds} rounds")
    print(f"{'prompt':<16} " + " ".join(f"{s:>26}" for s in setups))
    for name in prompts:
        cells = []
        for setup in setups:
            r = ratios[(name, setup)]
            step = statistics.median(kept.get((name, setup), [1.0]))
            cells.append(f"{statistics.median(r):.2f}x ({min(r):.2f}-{max(r):.2f}) {step:.2f}/st")
        print(f"{name:<16} " + " ".join(f"{c:>26}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
