"""What a user gets after `dspine tune`, against plain decoding, in one run (issue #47's
measure): the real SmolLM2-135M pair (Q8_0 target, its Q4_1 as the drafter), each engine:

1. `dspine tune`'s own measuring (app/run/tune.measure), timed: its pick;
2. then, taking turns round by round (each prompt on every setup back to back, the order
   turned each round): plain decoding, the tune's pick, and the default without a tune on
   this machine (app/run/drafting_choice: on a CPU, plain with n-gram drafts);
3. on bench's prompts (new text, every category), an edit turn and a file rewrite given in
   the prompt (tests/support/copy_prompts.py), greedy; or (--sampling chat) with the chat's
   sampling, seed N in round N (each round samples other texts), which is what the tune
   measures under: SmolLM2's card's (temperature 0.2, top_p 0.9, the catalog's), or
   (--sampling qwen) Qwen3.8's non-thinking preset, which every model had before the catalog
   carried presets (its presence penalty of 1.5 makes copies of a file less likely to be kept).

Each setup's speedup is the median of its per-prompt, per-round ratios to plain's run just
before or after it, with their min-max. Goals: new text >= 0.97x plain, edit and rewrite
>= 1.3x, the tune under 90 s for the small bundle.

    .venv/bin/python benchmarks/tune_defaults.py [--engines inproc,server] [--rounds 3]
        [--tokens 96] [--llama-server PATH] [--tune-rounds 2] [--sampling greedy|chat|qwen]
        [--prompts 'edit turn,rewrite']
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="inproc,server")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--tune-rounds", type=int, default=2)
    parser.add_argument("--only-tune", action="store_true", help="time the tune and print its pick only")
    parser.add_argument(
        "--prompts",
        default="",
        help="only these prompts, comma-separated (e.g. 'edit turn,rewrite': more rounds in the same time)",
    )
    parser.add_argument("--llama-server", type=Path, default=None, help="the llama-server to run (default: found)")
    parser.add_argument(
        "--sampling",
        choices=["greedy", "chat", "qwen"],
        default="greedy",
        help="the setups' runs greedy, or with the chat's sampling (what `dspine tune` measures under)",
    )
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="dspine-tune-bench-"))
    for name in ("DATA", "CONFIG", "CACHE", "STATE"):
        os.environ[f"XDG_{name}_HOME"] = str(home / name.lower())
    os.environ.pop("DSPINE_CONFIG", None)
    if args.llama_server is not None:
        os.environ["DSPINE_LLAMA_SERVER"] = str(args.llama_server)

    from app.models.catalog import load_catalog
    from app.run.bench import builtin_prompt_files, load_prompts
    from app.run.drafting_choice import apply_pick, choose
    from app.run.engines import EngineOptions, ModelFiles, open_engine
    from app.run.tune import measure
    from app.run.tune_record import Pick
    from app.settings import load_settings
    from backends.events import End
    from backends.sampling import QWEN_CARD
    from tests.support.copy_prompts import edit, rewrite
    from tests.support.real_models import smollm2_pair

    pair = smollm2_pair(Path(tempfile.gettempdir()) / "dspine-smollm2")
    card = load_catalog().find("smollm2-135m").sampling
    assert card is not None
    files = ModelFiles(
        "smollm2-135m", pair["target"], pair["q4"], "draft", QWEN_CARD if args.sampling == "qwen" else card
    )
    settings = load_settings()
    prompts = [(p.category, p.messages) for p in load_prompts(builtin_prompt_files()) if p.category != "edit"]
    prompts += [("edit turn", edit()), ("rewrite", rewrite())]
    if args.prompts:
        wanted = {name.strip() for name in args.prompts.split(",") if name.strip()}
        unknown = wanted - {category for category, _ in prompts}
        if unknown:
            parser.error(f"--prompts: no prompt named {', '.join(sorted(unknown))}")
        prompts = [(category, messages) for category, messages in prompts if category in wanted]

    for engine in [e.strip() for e in args.engines.split(",") if e.strip()]:
        started = time.monotonic()
        tuned, _, ran = measure(files, engine, settings, rounds=args.tune_rounds)
        tune_s = time.monotonic() - started
        print(f"\n## {engine}: dspine tune took {tune_s:.0f} s ({ran} runs); picked {tuned.summary}")
        if args.only_tune:
            continue
        default = choose(files, None, engine, settings, on_gpu=False)
        default_pick = Pick(
            drafter=False,
            ngram=bool(default.ngram),
            new_text=default.turns is None or default.turns.new_text,
            edit=default.turns is None or default.turns.edit,
        )
        setups = {
            "plain": Pick(drafter=False, ngram=False),
            f"tuned ({tuned.pick.label})": tuned.pick,
            f"no-GPU default ({default_pick.label})": default_pick,
            "drafter (before)": Pick(drafter=True, ngram=True),
        }
        engines: dict = {}

        def open_all(engines=engines, setups=setups, engine=engine) -> None:
            for running in engines.values():
                running.close()
            engines.clear()
            for name, pick in setups.items():
                options = EngineOptions(
                    engine=engine,  # type: ignore[arg-type]
                    n_max=pick.n_max,
                    break_even=False,
                    ngram=pick.ngram,
                    turn_drafting=pick.turn_drafting(),
                )
                engines[name] = open_engine(apply_pick(files, pick), options, settings)

        rates: dict[tuple[str, str], list[float]] = {}
        ratios: dict[tuple[str, str], list[float]] = {}
        sampling = files.sampling.for_mode(False).with_(max_tokens=args.tokens)
        if args.sampling == "greedy":
            sampling = sampling.with_(temperature=0.0)
        try:
            for round_ in range(args.rounds):
                # Fresh engines each round: llama-server's n-gram drafter remembers the replies of
                # earlier requests, and a repeated greedy prompt would draft whole.
                open_all()
                order = list(engines) if round_ % 2 == 0 else list(reversed(engines))
                for category, messages in prompts:
                    measured = {}
                    for name in order:
                        end = None
                        for event in engines[name].stream(messages, think=False, sampling=sampling.with_(seed=round_)):
                            if isinstance(event, End):
                                end = event
                        assert end is not None and end.stats.tokens_per_s, f"{name}: no reply"
                        measured[name] = end.stats.tokens_per_s
                        rates.setdefault((category, name), []).append(end.stats.tokens_per_s)
                    for name, rate in measured.items():
                        ratios.setdefault((category, name), []).append(rate / measured["plain"])
        finally:
            for running in engines.values():
                running.close()
        print(f"\n{'prompt':<12} " + " ".join(f"{name[:34]:>34}" for name in setups))
        for category in dict.fromkeys(c for c, _ in prompts):
            cells = []
            for name in setups:
                r = ratios[(category, name)]
                tok = statistics.median(rates[(category, name)])
                cells.append(f"{tok:6.1f} t/s {statistics.median(r):.2f}x ({min(r):.2f}-{max(r):.2f})")
            print(f"{category:<12} " + " ".join(f"{c:>34}" for c in cells))
        new = [
            statistics.median(ratios[(c, name)])
            for c in dict.fromkeys(c for c, _ in prompts)
            if c not in ("edit turn", "rewrite")
            for name in setups
            if name.startswith("tuned")
        ]
        if new:
            print(f"tuned on new text: {min(new):.2f}-{max(new):.2f}x plain (category medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
