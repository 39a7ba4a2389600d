"""What DSpine's adjacent causal injection costs a draft step, and whether the server drafts
what the NumPy reference drafts, in one run on dspine's patched llama-server.

Two drafters of the same DFlash weights (tests/support/block_drafters.py, same seed): one
with DSpine's injection after every layer (transfer_dim = n_embd / 5, the proportion of a
27B-class drafter's 1,024 to 5,120, a sigmoid gate and an rms norm), one a causal DFlash
without it. Each drafts 50+ blocks of 16 (n_max 15) on the same greedy requests; the
drafter's pass over the block is timed inside llama-server (DSPINE_LOG_DRAFTS's block_us).
The two servers take turns, round after round, and each is scored by its median step of
its best round (this machine's other tenants only ever add time). Goal: under 5% at block 16.

Then, over the DSpine server's steps: drafted and kept tokens a step, the server's against
the reference's (tests/support/dspine_reference.py) for the same contexts: equal.

    .venv/bin/python benchmarks/dspine_injection.py [--binary PATH] [--rounds 3] [--embd 512]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.block_drafters import BlockDrafter, write_block_drafter  # noqa: E402
from tests.support.draft_log_server import DraftLogServer, Step, by_request  # noqa: E402
from tests.support.dspine_reference import DSpineReference, _read, accepted  # noqa: E402
from tests.support.gguf_models import QTYPE, Shape, write_model  # noqa: E402

BIAS = dict.fromkeys((101, 102, 103), 30.0)


def prompts(n: int) -> list[list[int]]:
    return [[32 + (7 * i + 13 * j) % 95 for j in range(24)] for i in range(n)]


def run(
    binary: Path, target: Path, drafter: Path, log: Path, spec: str, tokens: int
) -> tuple[list[list[int]], list[Step]]:
    with DraftLogServer(binary, target, drafter, log, n_max=15, spec_type=spec) as server:
        sequences = [p + server.complete(p, tokens, logit_bias=[[t, b] for t, b in BIAS.items()]) for p in prompts(4)]
        return sequences, server.steps()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", type=Path, default=None, help="llama-server (default: the tests' patched build)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--embd", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    if args.binary is None:
        from tests.support.patched_server import build_folder

        args.binary = build_folder() / "bin" / "llama-server"
    work = Path(tempfile.mkdtemp(prefix="dspine-injection-"))
    e = args.embd
    # upstream's DFlash reads target features of the drafter's own width (fc: n_taps x n_embd -> n_embd)
    shape = Shape(arch="llama", n_layer=2, n_embd=e, n_head=e // 64, n_head_kv=e // 64, head_dim=64, n_ff=2 * e)
    target = write_model(work / "target.gguf", replace(shape, weight_type=QTYPE.F32), seed=5, scale=0.3)
    # Both slide over DSpine's 8,192 tokens: the same kv cache, so only the injection differs.
    base = BlockDrafter(
        n_embd_target=e,
        favoured=tuple(BIAS),
        n_layer=3,
        n_embd=e,
        n_head=e // 64,
        n_head_kv=max(1, e // 256),
        head_dim=64,
        n_ff=e * 7 // 2,
        sliding_window=8192,
        swa_pattern=(True, True, True),
        causal=True,
    )
    files = {
        "draft-dspine": write_block_drafter(work / "dspine.gguf", replace(base, transfer_dim=e // 5, inj_norm=True), 1),
        "draft-dflash": write_block_drafter(work / "dflash.gguf", base, 1),
    }
    best: dict[str, float] = {}
    dspine_run: tuple[list[list[int]], list[Step]] | None = None
    for r in range(args.rounds):
        for spec, path in files.items():
            sequences, steps = run(args.binary, target, path, work / f"{spec}-{r}.log", spec, args.tokens)
            median = statistics.median(s.block_us for s in steps)
            best[spec] = min(best.get(spec, median), median)
            print(f"round {r + 1} {spec}: {len(steps)} steps, median block pass {median / 1000:.2f} ms", flush=True)
            if spec == "draft-dspine":
                dspine_run = (sequences, steps)
    ratio = best["draft-dspine"] / best["draft-dflash"]
    print(f"draft step with injection / without (block 16, n_embd {e}, transfer {e // 5}): {ratio:.3f}")

    assert dspine_run is not None
    sequences, steps = dspine_run
    ref = DSpineReference(files["draft-dspine"], _read(target)[1]["token_embd.weight"])
    server_drafted = server_kept = ref_drafted = ref_kept = 0
    counted = 0
    for step, seq in ((step, seq) for run, seq in zip(by_request(steps), sequences, strict=True) for step in run):
        if step.accepted is None or step.pos0 + 16 >= len(seq):
            continue  # the reply's tail: the server cuts the draft to what is left
        mine = ref.draft(seq[: step.pos0], step.id_last, 15, bias=BIAS).tokens
        server_drafted += len(step.drafted)
        server_kept += step.accepted
        ref_drafted += len(mine)
        ref_kept += accepted(mine, seq[step.pos0 + 1 :])
        counted += 1
    print(
        f"over {counted} steps: drafted a step, server {server_drafted / counted:.3f} reference "
        f"{ref_drafted / counted:.3f}; kept a step, server {server_kept / counted:.3f} reference "
        f"{ref_kept / counted:.3f}"
    )


if __name__ == "__main__":
    main()
