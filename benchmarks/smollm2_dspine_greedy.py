"""The shipped SmolLM2 DSpine drafter (issue 70) against plain decoding, the model's own Q4_1
file as a classic draft model, the same DSpine drafter without its last-write refinement
(`dflash.dspine.top_k` 0) and its DFlash twin trained at the same budget, on dspine's patched
llama-server, greedy, on `dspine bench`'s prompts (never trained on) by category.

Every setup has its own llama-server (one thread, block 16: 15 drafts a step), all up for the
whole run; each round sends every prompt to every setup, in an order that alternates from
round to round. Printed per category and setup: tokens per target pass (1 + the drafts a
verify step kept, from the server's own counts: generated / (generated - accepted)), its
spread over the prompts, and tok/s over plain's as the median of the per-round ratios with
their min-max.

    .venv/bin/python benchmarks/smollm2_dspine_greedy.py [--twin PATH.gguf] [--previous PATH.gguf] \
        [--rounds 3] [--tokens 96]

`--previous`: an earlier DSpine drafter (the one a new shipped file replaces), as one more setup.
`--held-out N`: also the first N prompts per category of the trainer's held-out families
(scripts/train_dspine/corpus.py: code.convert, math.sequence, edit.rename, prose.letter), as
categories of their own ("held-out code"): the bench files hold 2 to 4 prompts a category.
They are rendered as the trainer rendered them, with SmolLM2's default system turn; the
bench's prompts have none, so compare a held-out category with itself, not with the bench's.
`--only NAME ...`: these setups and plain (acceptance alone needs one round: greedy replies).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.draft_log_server import DraftLogServer  # noqa: E402
from tests.support.gguf_copies import rewritten_copy  # noqa: E402
from tests.support.real_models import smollm2_pair  # noqa: E402

CATEGORIES = ("code", "math", "edit", "prose")
DSPINE = ROOT / "assets" / "drafters" / "smollm2-135m-dspine.Q8_0.gguf"


def chatml(messages: list[dict]) -> str:
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return text + "<|im_start|>assistant\n"


def complete(server: DraftLogServer, text: str, tokens: int) -> tuple[int, int, float]:
    """(generated, drafts accepted, seconds) of one greedy reply."""
    body = {"prompt": text, "n_predict": tokens, "temperature": 0, "cache_prompt": False}
    request = urllib.request.Request(
        server.url + "/completion", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=600) as reply:
        done = json.load(reply)
    seconds = time.perf_counter() - started
    timings = done.get("timings", {})
    return int(timings.get("predicted_n", 0)), int(timings.get("draft_n_accepted", 0) or 0), seconds


def held_out_prompts(per_category: int) -> list[tuple[str, str]]:
    """The first `per_category` prompts of each category's held-out family, as the trainer
    renders them (its corpus, seed 0): never trained on, and many more than the bench's."""
    if not per_category:
        return []
    sys.path.insert(0, str(ROOT / "scripts"))
    from train_dspine.corpus import build, chat

    corpus = build()
    chosen: list[tuple[str, str]] = []
    for category in CATEGORIES:
        held = [p for p in corpus if p.held_out and p.category == category][:per_category]
        chosen += [(f"held-out {category}", chat(p.messages)) for p in held]
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--twin", type=Path, help="the DFlash twin's GGUF (left out: no twin setup)")
    parser.add_argument("--previous", type=Path, help="an earlier DSpine drafter (the one replaced)")
    parser.add_argument("--dspine", type=Path, default=DSPINE)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--binary", help="the patched llama-server (default: the tests' cached build)")
    parser.add_argument("--held-out", type=int, default=0, metavar="N", help="N held-out corpus prompts a category")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these setups (and plain)")
    args = parser.parse_args()
    if args.binary:
        binary = Path(args.binary)
    else:
        from tests.support.patched_server import build_folder

        binary = build_folder() / "bin" / "llama-server"
    tmp = Path(tempfile.mkdtemp(prefix="dspine-greedy-"))
    pair = smollm2_pair(Path(tempfile.gettempdir()) / "dspine-smollm2")
    import gguf

    unrefined = rewritten_copy(
        args.dspine, tmp / "no-refinement.gguf", {"dflash.dspine.top_k": (0, gguf.GGUFValueType.UINT32)}
    )
    setups = {
        "plain": (None, None),
        "Q4_1 draft model": (pair["q4"], "draft-simple"),  # without --spec-type it drafts nothing
        "DSpine": (args.dspine, "draft-dspine"),
        "DSpine, no refinement": (unrefined, "draft-dspine"),
    }
    if args.previous:
        setups["previous DSpine"] = (args.previous, "draft-dspine")
    if args.twin:
        setups["DFlash twin"] = (args.twin, "draft-dflash")
    if args.held_out < 0:
        parser.error("--held-out: give 0 or more prompts a category")
    unknown = sorted(set(args.only or []) - set(setups))
    if unknown:
        parser.error(f"--only: no setup named {', '.join(unknown)} (there are: {', '.join(setups)})")
    if args.only:
        setups = {name: setup for name, setup in setups.items() if name == "plain" or name in args.only}
    prompts = [
        (category, chatml(json.loads(line)["messages"]))
        for category in CATEGORIES
        for line in (ROOT / "assets" / "prompts" / f"{category}.jsonl").read_text().splitlines()
        if line.strip()
    ] + held_out_prompts(args.held_out)
    servers = {
        name: DraftLogServer(binary, pair["target"], drafter, tmp / f"{i}.log", n_max=15, spec_type=spec, n_ctx=2048)
        for i, (name, (drafter, spec)) in enumerate(setups.items())
    }
    # (setup, category) -> per prompt: tokens per pass; (setup, category, round) -> tokens and seconds
    per_pass: dict[tuple[str, str], list[float]] = {}
    speed: dict[tuple[str, str, int], list[float]] = {}
    try:
        for round_ in range(args.rounds):
            order = list(servers) if round_ % 2 == 0 else list(reversed(servers))
            for category, text in prompts:
                for name in order:
                    made, kept, seconds = complete(servers[name], text, args.tokens)
                    if round_ == 0:
                        per_pass.setdefault((name, category), []).append(made / max(made - kept, 1))
                    cell = speed.setdefault((name, category, round_), [0.0, 0.0])
                    cell[0] += made
                    cell[1] += seconds
            print(f"after round {round_ + 1} of {args.rounds}:", flush=True)
            report(setups, per_pass, speed, round_ + 1)  # what is measured so far, should the run stop
    finally:
        for server in servers.values():
            server.close()


def report(setups, per_pass, speed, rounds: int) -> None:
    print("| category | setup | tokens per target pass | tok/s vs plain (median, rounds min-max) |")
    print("|---|---|---:|---:|")
    for category in dict.fromkeys(c for _, c in per_pass):
        for name in setups:
            lengths = per_pass[(name, category)]
            spread = f" +- {statistics.pstdev(lengths):.2f}" if len(lengths) > 1 else ""
            ratios = []
            for r in range(rounds):
                mine, plain = speed[(name, category, r)], speed[("plain", category, r)]
                ratios.append((mine[0] / mine[1]) / (plain[0] / plain[1]))
            cells = [category, name, f"{statistics.mean(lengths):.2f}{spread}",
                     f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"]  # fmt: skip
            print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
