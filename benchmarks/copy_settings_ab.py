"""Copies from the context (prompt lookup alone, in process) under other settings, timed
against plain decoding in turn: the real SmolLM2-135M Q8_0, its card's sampling with seed N
in round N (each round samples other texts; `--greedy`: temperature 0 on edits and rewrites
of files of 4 to 9 classes, one text each), the order of the setups turned each round. Every
setup weighs its copies against one table of pass costs (timed once), so a difference is the
rule's. Each setup's ratio is its tok/s over plain's on the same prompt and seed: median,
mean and quartiles over the texts.

    .venv/bin/python benchmarks/copy_settings_ab.py --setting resync_window=8 \\
        --setting resync_window=2 [--rounds 24] [--tokens 96] [--greedy] [--bench-edits]
        [--prompts 'edit turn'] [--first-seed 100]

A setting is `field=value[,field=value]` of backends/prompt_lookup.LookupSettings.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def parse_setting(text: str):
    from backends.prompt_lookup import LookupSettings

    fields = {f.name: f.type for f in dataclasses.fields(LookupSettings)}
    changes: dict[str, object] = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        name = name.strip()
        if name not in fields or not value:
            raise SystemExit(f"--setting {text!r}: {name!r} is not a LookupSettings field=value")
        changes[name] = value.strip().lower() in ("1", "true", "yes") if fields[name] in (bool, "bool") else int(value)
    return dataclasses.replace(LookupSettings(), **changes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", action="append", default=[], help="field=value[,field=value] (repeatable)")
    parser.add_argument("--rounds", type=int, default=24)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--greedy", action="store_true")
    parser.add_argument("--bench-edits", action="store_true", help="bench's edit prompts too (the tune's)")
    parser.add_argument("--prompts", default="", help="only these prompts, comma-separated")
    parser.add_argument("--first-seed", type=int, default=0, help="round N samples with seed first-seed + N")
    args = parser.parse_args()
    settings = {text: parse_setting(text) for text in args.setting} or {"defaults": parse_setting("n_max=16")}

    from app.models.catalog import load_catalog
    from backends.events import End
    from backends.inproc import InprocEngine
    from tests.support.copy_prompts import NEW_TEXT, bench_edits, edit, kind_of, only, other_files, rewrite
    from tests.support.real_models import smollm2_pair

    pair = smollm2_pair(Path(tempfile.gettempdir()) / "dspine-smollm2")
    card = load_catalog().find("smollm2-135m").sampling
    assert card is not None
    sampling = card.for_mode(False).with_(max_tokens=args.tokens)
    if args.greedy:
        sampling = sampling.with_(temperature=0.0)
        prompts = other_files()
    else:
        prompts = {"edit turn": edit(), "rewrite": rewrite(), "poem": NEW_TEXT}
    if args.bench_edits:
        prompts |= bench_edits()
    try:
        prompts = only(prompts, args.prompts)
    except ValueError as exc:
        parser.error(f"--prompts: {exc}")

    engines = {"plain": InprocEngine(str(pair["target"]), n_ctx=4096, presets=card).load()}
    costs = None
    try:
        for name, lookup in settings.items():
            engine = InprocEngine(str(pair["target"]), n_ctx=4096, presets=card, ngram=lookup, copy_costs=costs)
            engines[name] = engine.load()
            costs = engine.copy_costs  # timed by the first; the others weigh against the same table
        ratios: dict[tuple[str, str], list[float]] = {}
        for round_ in range(args.rounds):
            order = list(engines) if round_ % 2 == 0 else list(reversed(engines))
            for prompt, messages in prompts.items():
                rates = {}
                for name in order:
                    for event in engines[name].stream(
                        messages, think=False, sampling=sampling.with_(seed=args.first_seed + round_)
                    ):
                        if isinstance(event, End):
                            rates[name] = event.stats.tokens_per_s
                for name in settings:
                    ratios.setdefault((kind_of(prompt), name), []).append(rates[name] / rates["plain"])
    finally:
        for engine in engines.values():
            engine.close()
    print(f"\n{'prompt':10} {'setting':32} {'median':>7} {'mean':>6}  quartiles  texts")
    for (kind, name), values in ratios.items():
        low, _, high = statistics.quantiles(values, n=4)
        print(
            f"{kind:10} {name:32} {statistics.median(values):6.2f}x {statistics.mean(values):5.2f}x"
            f"  {low:.2f}-{high:.2f}  {len(values)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
