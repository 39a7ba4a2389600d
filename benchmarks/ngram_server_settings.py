"""llama-server's n-gram drafter alone (no model drafter), at a few settings, against plain
decoding in the same rounds: the real SmolLM2-135M Q8_0 target, greedy (or, --sampling chat,
with SmolLM2's card's sampling and seed N in round N: other texts each round, as a chat samples
them), on an edit turn, a file rewrite given in the prompt (tests/support/copy_prompts.py) and
new text (with --bench-edits, bench's edit prompts too, which `dspine tune` measures edits on).

A setting is `M/N` for ngram-mod (a match of M tokens, drafts of at least N; what dspine chains
before a model drafter: 24/17, where a step's draft length tells the drafters apart) or
`simple:N/M` for ngram-simple (the last N tokens looked up in the request's own tokens, M
drafted; what dspine runs alone on a GPU) or `copy` for ngram-copy (dspine's patch: copies
drafted as far as they pay for the passes the server times; what dspine runs alone on a CPU).
Each (prompt, setup) gets a fresh server every round (ngram-mod remembers earlier replies
across requests, which would show a repeated prompt as a copy); the setups take turns prompt by
prompt, the order turned each round. Each setup's figure is the median of its per-round ratios
to plain's run of the same prompt in the same round, with their min-max.

    .venv/bin/python benchmarks/ngram_server_settings.py [--rounds 3] [--tokens 96]
        [--llama-server PATH] [--settings 24/17,simple:6/8,copy] [--bench-edits]
        [--sampling greedy|chat] [--prompts 'edit turn,rewrite']
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

from backends.drafters import NGRAM  # noqa: E402
from backends.events import Delta, End  # noqa: E402
from backends.llama_server import LlamaServerEngine, ServerConfig  # noqa: E402
from backends.sampling import Sampling  # noqa: E402
from tests.support.copy_prompts import PROMPTS, only  # noqa: E402
from tests.support.real_models import smollm2_pair  # noqa: E402

PLAIN = "plain"


def run_once(binary: str | None, target: Path, setup: str, messages: list[dict], sampling: Sampling, logs: Path):
    ngram, extra = None, ()
    if setup.startswith("mapk:"):
        # llama-server's ngram-map-k (not what dspine launches): the key n-gram's first
        # occurrence, its draft as long as that key's last draft kept (up to M).
        size_n, size_m = setup.removeprefix("mapk:").split("/")
        extra = ("--spec-type", "ngram-map-k", "--spec-ngram-map-k-size-n", size_n, "--spec-ngram-map-k-size-m", size_m)
    elif setup == "copy":
        ngram = dataclasses.replace(NGRAM, weighed=True)
    elif setup.startswith("simple:"):
        # llama-server's ngram-simple (dspine's n-gram drafter alone): the latest earlier
        # occurrence of the last N tokens, its next M drafted; nothing kept across requests.
        size_n, size_m = (int(x) for x in setup.removeprefix("simple:").split("/"))
        ngram = dataclasses.replace(
            NGRAM, alone_spec_type="ngram-simple", alone_match=size_n, alone_length=size_m, weighed=False
        )
    elif setup != PLAIN:  # ngram-mod M/N
        match, shortest = (int(x) for x in setup.split("/"))
        ngram = dataclasses.replace(NGRAM, alone_spec_type="ngram-mod", n_match=match, n_min=shortest)
    config = ServerConfig(model=str(target), n_ctx=2048, gpu_layers=0, ngram=ngram, extra_args=extra)
    engine = LlamaServerEngine(config, log_dir=logs, binary=binary).start()
    try:
        command = engine._running.log_path.read_text().splitlines()[0] if engine._running else ""
        if setup == "copy" and "--spec-type ngram-copy" not in command:
            raise SystemExit("this llama-server has no ngram-copy (dspine's third patch): pass --llama-server")
        events = list(engine.stream(messages, think=False, sampling=sampling))
    finally:
        engine.close()
    end = events[-1]
    if not isinstance(end, End):
        raise SystemExit(f"the engine failed: {end}")
    return end.stats, "".join(e.text for e in events if isinstance(e, Delta))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--llama-server", default=None, help="the llama-server to run (default: found)")
    parser.add_argument(
        "--settings",
        default=f"{NGRAM.n_match}/{NGRAM.n_min},simple:{NGRAM.alone_match}/{NGRAM.alone_length},12/4",
        help="ngram-mod match/minimum pairs, simple:N/M for ngram-simple, copy for ngram-copy or mapk:N/M for"
        " ngram-map-k, comma-separated",
    )
    parser.add_argument("--models", type=Path, default=Path.home() / ".cache" / "dspine-bench" / "smollm2")
    parser.add_argument(
        "--bench-edits", action="store_true", help="also bench's edit prompts (what `dspine tune` measures edits on)"
    )
    parser.add_argument("--sampling", choices=["greedy", "chat"], default="greedy")
    parser.add_argument("--prompts", default="", help="only these prompts, comma-separated")
    args = parser.parse_args()
    prompts = dict(PROMPTS)
    if args.bench_edits:
        from app.run.bench import builtin_prompt_files, load_prompts

        edits = [p for p in load_prompts(builtin_prompt_files()) if p.category == "edit"]
        prompts.update({f"bench edit {i + 1}": p.messages for i, p in enumerate(edits)})
    try:
        prompts = only(prompts, args.prompts)
    except ValueError as exc:
        parser.error(f"--prompts: {exc}")
    sampling = Sampling(temperature=0, max_tokens=args.tokens)
    if args.sampling == "chat":
        from app.models.catalog import load_catalog

        card = load_catalog().find("smollm2-135m").sampling
        assert card is not None
        sampling = card.for_mode(False).with_(max_tokens=args.tokens)
    from benchmarks.machine import settle_repacking

    settle_repacking()
    target = smollm2_pair(args.models)["target"]
    logs = Path(tempfile.mkdtemp(prefix="dspine-ngram-settings-"))
    setups = [PLAIN, *args.settings.split(",")]
    ratios: dict[tuple[str, str], list[float]] = {}
    kept: dict[tuple[str, str], list[float]] = {}
    drafts: dict[tuple[str, str], list[int]] = {}
    same: dict[tuple[str, str], list[bool]] = {}
    for r in range(args.rounds):
        for label, messages in prompts.items():
            order = setups[r % len(setups) :] + setups[: r % len(setups)]
            rates, texts = {}, {}
            for setup in order:
                stats, texts[setup] = run_once(args.llama_server, target, setup, messages, sampling.with_(seed=r), logs)
                rates[setup] = stats.tokens_per_s or 0.0
                kept.setdefault((label, setup), []).append(stats.acceptance_length or 1.0)
                counts = drafts.setdefault((label, setup), [0, 0])
                counts[0], counts[1] = counts[0] + stats.drafted, counts[1] + stats.accepted
            for setup in setups[1:]:
                # Drafting can change the text (a verify pass and a single step compute logits
                # apart): a round's ratio then compares two texts.
                same.setdefault((label, setup), []).append(texts[setup] == texts[PLAIN])
                ratios.setdefault((label, setup), []).append(rates[setup] / max(rates[PLAIN], 1e-9))
            print(f"round {r + 1} {label}: " + ", ".join(f"{s} {rates[s]:.1f}" for s in setups), flush=True)
    print()
    how = "greedy" if args.sampling == "greedy" else "its card's sampling, seed N in round N"
    print(f"SmolLM2-135M Q8_0 on llama-server, n-gram alone (match/minimum), {how}, {args.tokens} tokens")
    print("| prompt | " + " | ".join(setups[1:]) + " |")
    print("|---|" + "---|" * (len(setups) - 1))
    for label in prompts:
        cells = []
        for setup in setups[1:]:
            values = ratios[label, setup]
            per_step = statistics.median(kept[label, setup])
            cells.append(f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f}) {per_step:.2f}/step")
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("\nDrafted, kept, and rounds whose text was plain's:")
    for label in prompts:
        for setup in setups[1:]:
            drafted, accepted = drafts[label, setup]
            rounds = same[label, setup]
            share = f"{accepted / drafted:.0%}" if drafted else "-"
            as_plain = f"plain's text in {sum(rounds)} of {len(rounds)}"
            print(f"  {label}, {setup}: {drafted} drafted, {share} kept; {as_plain}")


if __name__ == "__main__":
    main()
