"""What quantization does to a DSpine drafter's drafts (issue 67): the shipped SmolLM2 DSpine
drafter (a trained one: assets/drafters/smollm2-135m-dspine.Q8_0.gguf) quantized by
llama-quantize the ways a pull could, each against the file itself, on dspine's patched
llama-server, greedy, on `dspine bench`'s prompts (never trained on) by category.

Setups (from the Q8_0 file dequantized to F32; Q8_0 of that is the file again, bit for bit):
- Q8_0: the reference.
- Q4_K_M as `dspine pull` makes it: the code table kept at Q8_0 (app/hub/convert_run.py).
- Q4_K_M, codes too: the code table cut like every other weight.
- Q4_K_M, injection kept: the code table and the tensors that carry the target's features in
  (fc, dspine_*) at Q8_0.

Printed per category and setup: draft agreement with Q8_0 where both drafted from the same
context (same reply, same position; greedy replies are the target's, so equal), as the share of
drafted positions with the same id and the mean leading run of equal ids (of 15), and tokens per
target pass (1 + what a verify kept, from the server's own counts).

Caveat the numbers carry: SmolLM2's hidden size is 576, not a multiple of 256, so llama-quantize
cuts its 576-wide rows to Q5_0 (and Q6_K's to Q8_0) rather than Q4_K; only the code table's and
ffn_down's rows (256, 1536) take true k-quants. The authors' drafters (hidden 5120) take Q4_K
everywhere: their loss is bounded below by this, not measured by it.

    .venv/bin/python benchmarks/dspine_quant_drafts.py [--tokens 64]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.draft_log_server import DraftLogServer, Step, by_request  # noqa: E402
from tests.support.real_models import quantize_binary, smollm2_pair  # noqa: E402

CATEGORIES = ("code", "math", "edit", "prose")
SHIPPED = ROOT / "assets" / "drafters" / "smollm2-135m-dspine.Q8_0.gguf"
INJECTION = ("fc\\.weight=q8_0", "dspine_=q8_0")  # fc and every dspine_* tensor (the codes among them)
SETUPS: dict[str, tuple[str, tuple[str, ...]]] = {
    "Q4_K_M (pull's)": ("Q4_K_M", ("dspine_codes=q8_0",)),
    "Q4_K_M, codes too": ("Q4_K_M", ()),
    "Q4_K_M, injection kept": ("Q4_K_M", INJECTION),
}


def chatml(messages: list[dict]) -> str:
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return text + "<|im_start|>assistant\n"


def tokenize(server: DraftLogServer, text: str) -> list[int]:
    body = json.dumps({"content": text, "add_special": True, "parse_special": True}).encode()
    request = urllib.request.Request(server.url + "/tokenize", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        return list(json.load(reply)["tokens"])


def quantized(source: Path, out: Path, quant: str, kept: tuple[str, ...]) -> Path:
    args = [str(quantize_binary()), "--allow-requantize"]
    args += [arg for kept_type in kept for arg in ("--tensor-type", kept_type)]
    done = subprocess.run([*args, str(source), str(out), quant], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"llama-quantize failed on {out.name}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return out


def agreement(reference: list[Step], other: list[Step]) -> tuple[int, int, list[int]]:
    """(equal ids, compared ids, leading equal run per compared step) where both drafted at one position."""
    theirs = {step.pos0: step.drafted for step in other}
    equal = compared = 0
    runs: list[int] = []
    for step in reference:
        drafted = theirs.get(step.pos0)
        if drafted is None:
            continue
        pairs = list(zip(step.drafted, drafted, strict=False))
        equal += sum(a == b for a, b in pairs)
        compared += len(pairs)
        runs.append(next((i for i, (a, b) in enumerate(pairs) if a != b), len(pairs)))
    return equal, compared, runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--binary", help="the patched llama-server (default: the tests' cached build)")
    args = parser.parse_args()
    if args.binary:
        binary = Path(args.binary)
    else:
        from tests.support.patched_server import build_folder

        binary = build_folder() / "bin" / "llama-server"
    tmp = Path(tempfile.mkdtemp(prefix="dspine-quant-"))
    pair = smollm2_pair(Path(tempfile.gettempdir()) / "dspine-smollm2")
    exact = quantized(SHIPPED, tmp / "exact.F32.gguf", "F32", ())
    drafters = {"Q8_0": SHIPPED}
    for i, (name, (quant, kept)) in enumerate(SETUPS.items()):
        drafters[name] = quantized(exact, tmp / f"{i}.{quant}.gguf", quant, kept)
    for name, path in drafters.items():
        print(f"{name}: {path.stat().st_size / 2**20:.1f} MiB", flush=True)
    prompts = [
        (category, chatml(json.loads(line)["messages"]))
        for category in CATEGORIES
        for line in (ROOT / "assets" / "prompts" / f"{category}.jsonl").read_text().splitlines()
        if line.strip()
    ]
    steps: dict[str, dict[int, list[Step]]] = {}  # setup -> prompt number -> its draft steps
    per_pass: dict[tuple[str, str], list[float]] = {}
    replies: dict[int, list[int]] = {}
    for name, drafter in drafters.items():
        with DraftLogServer(binary, pair["target"], drafter, tmp / f"{name}.log", n_ctx=2048) as server:
            for number, (_, text) in enumerate(prompts):
                made = server.complete(tokenize(server, text), args.tokens)
                if replies.setdefault(number, made) != made:
                    raise SystemExit(f"{name}: prompt {number}'s greedy reply differs from Q8_0's (not plain)")
            runs = by_request(server.steps())
        steps[name] = dict(enumerate(runs))
        for number, (category, _) in enumerate(prompts):
            run = steps[name].get(number, [])
            generated = len(replies[number])
            kept = sum(step.accepted or 0 for step in run)
            per_pass.setdefault((name, category), []).append(generated / max(generated - kept, 1))
        print(f"measured {name}", flush=True)
    report(drafters, prompts, steps, per_pass)


def report(drafters, prompts, steps, per_pass) -> None:
    print("| category | setup | ids equal to Q8_0's | leading equal run (of 15) | tokens per target pass |")
    print("|---|---|---:|---:|---:|")
    for category in CATEGORIES:
        for name in drafters:
            equal = compared = 0
            runs: list[int] = []
            for number, (of, _) in enumerate(prompts):
                if of != category:
                    continue
                e, c, r = agreement(steps["Q8_0"].get(number, []), steps[name].get(number, []))
                equal, compared, runs = equal + e, compared + c, runs + r
            lengths = per_pass[(name, category)]
            cells = [
                category,
                name,
                f"{equal / max(compared, 1):.1%} of {compared}",
                f"{statistics.mean(runs):.1f}" if runs else "-",
                f"{statistics.mean(lengths):.2f} +- {statistics.pstdev(lengths):.2f}",
            ]
            print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
