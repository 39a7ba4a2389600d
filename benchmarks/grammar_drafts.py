"""Drafting under a grammar, measured in one run: do drafts that follow the request's
grammar pay, or should drafting stop where the grammar takes over? Through dspine's
patched llama-server (whose drafter draws through a clone of the request's sampler,
grammar included), on the generated pair of benchmarks/engine_speed.py (a 95M target,
its 1-block drafter with noise: a drafter that pays), greedy.

A JSON schema holds the whole reply to a tool call from its first token, so "stop where
the grammar takes over" is that reply without drafts (`speculative.n_max` 0) and
"follow the grammar" is the same reply drafted at length k. The free reply (no grammar)
is the reference: what drafting pays where no grammar runs. Requests take turns round
after round; each is scored by its best round (the median too), and each row prints the
accepted share and drafted/plain.

    .venv/bin/python benchmarks/grammar_drafts.py [--tokens 96] [--rounds 3] [--k 4] [--binary PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.llama_server import LlamaServerEngine, ServerConfig  # noqa: E402
from benchmarks.engine_speed import make_pair  # noqa: E402

PROMPT = "<|im_start|>user\nRead the file README.md and tell me what it says.<|im_end|>\n<|im_start|>assistant\n"
CALL = {
    "type": "object",
    "properties": {
        "tool": {"const": "read_file"},
        "arguments": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    "required": ["tool", "arguments"],
}


def request(engine: LlamaServerEngine, grammar: bool, n_max: int, tokens: int) -> tuple[float, int, int, int]:
    assert engine._running is not None
    body = {"prompt": PROMPT, "temperature": 0, "n_predict": tokens, "speculative.n_max": n_max}
    if grammar:
        body["json_schema"] = CALL
    else:
        body["ignore_eos"] = True
    timings = engine._running.client.post("/completion", json=body, timeout=600).json()["timings"]
    return (
        timings["predicted_per_second"],
        timings["predicted_n"],
        timings.get("draft_n_accepted", 0),
        timings.get("draft_n", 0),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--binary", help="the patched llama-server (default: the tests' cached build)")
    args = parser.parse_args()
    from benchmarks.machine import settle_repacking

    settle_repacking()  # as dspine's engines do: no AMX crash on such a CPU
    if args.binary:
        binary = args.binary
    else:
        from tests.support.patched_server import build_folder

        binary = str(build_folder() / "bin" / "llama-server")
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    folder = Path(tempfile.mkdtemp(prefix="dspine-grammar-drafts-"))
    target, drafter = make_pair(folder, 0.15)
    config = ServerConfig(
        model=str(target),
        draft_model=str(drafter),
        drafter_kind="draft",
        n_ctx=2048,
        gpu_layers=0,
        draft_gpu_layers=0,
        n_max=args.k,
        extra_args=("--poll", "0", "--poll-draft", "0"),
        draft_p_min=0.0,  # the generated drafter's near-flat logits never pass the draft kind's floor
    )
    engine = LlamaServerEngine(config, binary=binary, log_dir=folder).start()
    rows = {
        ("tool call (JSON schema)", "drafts follow the grammar"): (True, args.k),
        ("tool call (JSON schema)", "drafting stops at the grammar"): (True, 0),
        ("free reply (no grammar)", f"drafted at {args.k}"): (False, args.k),
        ("free reply (no grammar)", "plain"): (False, 0),
    }
    found: dict[tuple[str, str], list[tuple[float, int, int, int]]] = {row: [] for row in rows}
    try:
        for grammar, n_max in rows.values():  # warm the caches
            request(engine, grammar, n_max, 16)
        for _ in range(args.rounds):
            for row, (grammar, n_max) in rows.items():
                found[row].append(request(engine, grammar, n_max, args.tokens))
    finally:
        engine.close()
    best = {row: max(rate for rate, *_ in runs) for row, runs in found.items()}
    print(f"generated pair on the patched llama-server, greedy, up to {args.tokens} tokens, k={args.k}")
    for row, runs in found.items():
        kept = sum(run[2] for run in runs)
        drafted = sum(run[3] for run in runs)
        share = f"{kept}/{drafted} kept ({kept / drafted:.2f})" if drafted else "no drafts"
        median = statistics.median(rate for rate, *_ in runs)
        print(f"  {row[0]:<24} {row[1]:<31} {best[row]:7.1f} tok/s ({median:.1f}), {runs[-1][1]} tokens, {share}")
    for kind, drafted_row, plain_row in (
        ("tool call", "drafts follow the grammar", "drafting stops at the grammar"),
        ("free reply", f"drafted at {args.k}", "plain"),
    ):
        label = "tool call (JSON schema)" if kind == "tool call" else "free reply (no grammar)"
        print(f"  {kind}: drafted/plain {best[(label, drafted_row)] / best[(label, plain_row)]:.3f} (best rounds)")


if __name__ == "__main__":
    main()
