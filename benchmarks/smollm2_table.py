"""The seeds' table in miniature (issue #37): SmolLM2-135M Q8_0 through `dspine bench` on
dspine's patched llama-server, by category (code, math, agent, prose), think off, in one
run: plain decoding; the model's own Q4_1 file as a classic draft model; a DSpine drafter
trained for it (--dspine); its injection-off twin trained at the same budget (scripts/
train_dspine exports both, dspine's converter makes their GGUFs). Each drafter
at the draft lengths given (default 4 and 15).

    .venv/bin/python benchmarks/smollm2_table.py --dspine PATH.gguf --twin PATH.gguf [--n-max 4,15] [--tokens 96]

Prints, per category and drafter, tok/s, acceptance length (tokens per verify step) and the
speedup over plain; then DSpine's acceptance length over the twin's, per category and length
(the goal: above 1 on code and math)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.real_models import smollm2_pair  # noqa: E402

CATEGORIES = ("code", "math", "agent", "prose")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dspine", type=Path, required=True, help="the DSpine drafter's GGUF")
    parser.add_argument("--twin", type=Path, required=True, help="the injection-off twin's GGUF")
    parser.add_argument("--n-max", default="4,15")
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--binary", help="the patched llama-server (default: the tests' cached build)")
    args = parser.parse_args()
    if args.binary:
        binary = args.binary
    else:
        from tests.support.patched_server import build_folder

        binary = str(build_folder() / "bin" / "llama-server")
    pair = smollm2_pair(Path(tempfile.gettempdir()) / "dspine-smollm2")
    labels = {pair["q4"].name: "Q4_1 draft model", args.twin.name: "injection off", args.dspine.name: "DSpine"}
    command = [
        str(ROOT / ".venv" / "bin" / "dspine"), "bench", "--model", str(pair["target"]),
        "--draft", ",".join(str(p) for p in (pair["q4"], args.twin, args.dspine)), "--n-max", args.n_max,
        "--think", "off", "--no-adaptive", "--max-tokens", str(args.tokens), "--json",
    ]  # fmt: skip
    for category in CATEGORIES:  # --prompts is repeated, one file each
        command += ["--prompts", str(ROOT / "assets" / "prompts" / f"{category}.jsonl")]
    env = {**os.environ, "DSPINE_LLAMA_SERVER": binary, "DSPINE_NGRAM_DRAFTING": "off"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        sys.exit(f"dspine bench failed ({done.returncode}): {done.stderr[-3000:]}")
    rows = json.loads(done.stdout)
    print("| category | drafter | n_max | tok/s | acceptance length | speedup |")
    print("|---|---|---:|---:|---:|---:|")
    length: dict[tuple[str, str, int | None], float] = {}
    for row in rows:
        name = labels.get(row["drafter"], row["drafter"])
        accept = row["acceptance_length"]
        length[row["category"], name, row["n_max"]] = accept or 1.0
        cells = [row["category"], name, str(row["n_max"] or "-"), f"{row['tokens_per_s']['mean']:.1f}",
                 f"{accept:.2f}" if accept else "-", f"{row['speedup']:.2f}x" if row["speedup"] else "-"]  # fmt: skip
        print("| " + " | ".join(cells) + " |")
    for n in sorted({r["n_max"] for r in rows if r["n_max"]}):
        ratios = [
            f"{c} {length[c, 'DSpine', n] / length[c, 'injection off', n]:.3f}"
            for c in CATEGORIES
            if (c, "DSpine", n) in length and (c, "injection off", n) in length
        ]
        print(f"DSpine / injection off, acceptance length, n_max {n}: " + ", ".join(ratios))


if __name__ == "__main__":
    main()
