"""What a DSpine draft step costs on dspine's patched llama-server, in ratios measured in one run.

Drafters of one backbone (tests/support/block_drafters.py, same seed, so every DFlash weight is
shared) next to a generated f32 target of the same hidden size, each drafter behind its own
llama-server (launch `--spec-draft-n-max 15`, one thread), all three up for the whole run.
A draft step is the drafter's pass over its block, timed inside llama-server (DSPINE_LOG_DRAFTS's
block_us); a request's step time is the median over its steps. Every round sends each setup
one request, in an order that alternates from round to round (so neither gains from the
other's warm caches or a lull); each round gives a ratio, and the median ratio is printed with
its spread (min-max over the rounds).

a. Block sizing: the DSpine server (top_k 16) asked for 1, 3, 7 and 15 drafts a request
   (`speculative.n_max`); each against 15. Goal: time follows the block (3 drafts under 40%).
b. Injection and refinement: DSpine top_k 16 and DSpine top_k 0 (no last-write refinement)
   each against a causal DFlash of the same backbone (`--spec-type draft-dflash`; the same
   file without the DSpine tensors), all at a block of 16 (15 drafts).
c. The code table in host memory against on the device (`--device CUDA0`: every server's
   layers on that GPU, and a fourth DSpine server whose table is moved there with
   `--override-tensor-draft`, as the code_table_device setting does); without --device the
   arm is skipped, as on a machine with no GPU.

    .venv/bin/python benchmarks/dspine_block.py [--binary PATH] [--rounds 5] [--embd 576]
        [--vocab 49152] [--layers 3] [--tokens 12] [--device CUDA0]
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
from tests.support.draft_log_server import DraftLogServer  # noqa: E402
from tests.support.gguf_models import QTYPE, Shape, write_model  # noqa: E402

BIAS = [[t, 30.0] for t in (101, 102, 103)]  # keeps the random target off its end-of-text token
BLOCKS = (1, 3, 7, 15)  # drafts a request asks for (a block is one more: the anchor)


def prompt(i: int) -> list[int]:
    return [32 + (7 * i + 13 * j) % 95 for j in range(24)]


def step_time(server: DraftLogServer, request: int, n_max: int, tokens: int) -> float:
    """The median block pass (microseconds) over one request's draft steps."""
    seen = len(server.steps())
    # n_max + 1 more tokens than the steps wanted: near the reply's end the server asks for no more
    # drafts than tokens are left (a DSpine block shrinks with that), and those steps are not counted
    server.complete(prompt(request), tokens + n_max + 1, logit_bias=BIAS, **{"speculative.n_max": n_max})
    steps = server.steps()[seen:]
    if any(len(s.drafted) > n_max for s in steps):
        raise RuntimeError(f"asked for {n_max} drafts, got {sorted({len(s.drafted) for s in steps})}")
    full = [s.block_us for s in steps if len(s.drafted) == n_max]
    if not full:
        raise RuntimeError(f"no draft step of {n_max} drafts logged")
    return statistics.median(full)


def report(label: str, ratios: list[float]) -> None:
    print(
        f"{label}: median {statistics.median(ratios):.3f} (spread {min(ratios):.3f}-{max(ratios):.3f} over "
        f"{len(ratios)} rounds)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--binary", type=Path, default=None, help="the patched llama-server (default: the tests' build)"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--embd", type=int, default=576, help="hidden size, target and drafter (>= 272 for top_k 16)")
    parser.add_argument("--vocab", type=int, default=49152)
    parser.add_argument("--layers", type=int, default=3, help="drafter layers")
    parser.add_argument("--tokens", type=int, default=12, help="draft steps a request (about; each keeps a token)")
    parser.add_argument("--device", help="a llama.cpp GPU (CUDA0): layers there, and arm c (the code table's place)")
    args = parser.parse_args()
    if args.embd < 16 * 17:
        parser.error("--embd must be at least 272: the refinement's lattice of 16 x 17 fits in a hidden row")
    if args.binary is None:
        from tests.support.patched_server import build_folder

        args.binary = build_folder() / "bin" / "llama-server"

    work = Path(tempfile.mkdtemp(prefix="dspine-block-"))
    e, heads = args.embd, args.embd // 64
    # grouped-query attention needs a head count the KV heads divide (16 heads: 4, not 16 // 3)
    kv_heads = next(d for d in range(max(1, heads // 3), 0, -1) if heads % d == 0)
    shape = Shape(arch="llama", n_layer=2, n_embd=e, n_head=heads, n_head_kv=heads, head_dim=64, n_ff=2 * e)
    target = write_model(
        work / "target.gguf", replace(shape, n_vocab=args.vocab, weight_type=QTYPE.F32), seed=5, scale=0.3
    )
    dspine = BlockDrafter(
        n_vocab=args.vocab,
        n_embd_target=e,  # upstream's fc reads target features of the drafter's own width
        favoured=(101, 102, 103),
        n_layer=args.layers,
        n_embd=e,
        n_head=heads,
        n_head_kv=kv_heads,
        head_dim=64,
        n_ff=e * 7 // 2,
        causal=True,
        transfer_rank=min(256, e // 2),
        message_size=min(64, e // 8),
        top_k=16,
        sample_from_anchor=False,  # in place, as DSpine must: position 0 is the anchor, 15 drafts
    )
    files = {
        "dflash": (write_block_drafter(work / "dflash.gguf", replace(dspine, transfer_rank=0), 1), "draft-dflash"),
        "dspine-k16": (write_block_drafter(work / "dspine-k16.gguf", dspine, 1), "draft-dspine"),
        "dspine-k0": (write_block_drafter(work / "dspine-k0.gguf", replace(dspine, top_k=0), 1), "draft-dspine"),
    }
    on_gpu: tuple[str, ...] = ("-ngl", "99", "-ngld", "99") if args.device else ()
    extra = dict.fromkeys(files, on_gpu)
    if args.device:
        files["codes-on-device"] = files["dspine-k16"]
        extra["codes-on-device"] = on_gpu + ("--override-tensor-draft", rf"dspine_codes\.weight={args.device}")
    print(
        f"target: 2 layers, hidden {e}, vocab {args.vocab}; drafter: {args.layers} layers, transfer rank "
        f"{dspine.transfer_rank}, message {dspine.message_size}; about {args.tokens} steps a request",
        flush=True,
    )

    servers: dict[str, DraftLogServer] = {}
    try:
        for name, (path, spec) in files.items():
            servers[name] = DraftLogServer(
                args.binary, target, path, work / f"{name}.log", n_max=15, spec_type=spec, extra=extra[name]
            )
            step_time(servers[name], 999, 15, 2)  # a first request warms the server; not counted
        sizing: dict[int, list[float]] = {n: [] for n in BLOCKS[:-1]}
        kinds: dict[str, list[float]] = {"dspine-k16": [], "dspine-k0": []}
        on_device: list[float] = []
        request = 0
        for r in range(args.rounds):
            # a. one request a block length on the DSpine server, the order reversed every other round
            times: dict[int, float] = {}
            for n in BLOCKS if r % 2 == 0 else BLOCKS[::-1]:
                times[n] = step_time(servers["dspine-k16"], request, n, args.tokens)
                request += 1
            for n in sizing:
                sizing[n].append(times[n] / times[15])
            # b. one request a setup at 15 drafts, the order rotated every round
            names = list(files)
            names = names[r % len(names) :] + names[: r % len(names)]
            block: dict[str, float] = {}
            for name in names:
                block[name] = step_time(servers[name], request, 15, args.tokens)
                request += 1
            for name in kinds:
                kinds[name].append(block[name] / block["dflash"])
            if "codes-on-device" in block:
                on_device.append(block["dspine-k16"] / block["codes-on-device"])
            print(
                f"round {r + 1}: DSpine block pass at "
                + ", ".join(f"{n} drafts {times[n] / 1000:.2f} ms" for n in BLOCKS)
                + "; at 15: "
                + ", ".join(f"{name} {block[name] / 1000:.2f} ms" for name in files),
                flush=True,
            )
    finally:
        for server in servers.values():
            server.close()

    print("a. DSpine draft step at a requested block, against 15 drafts (goal: 3 drafts under 0.40)")
    for n, ratios in sizing.items():
        report(f"   {n} drafts / 15", ratios)
    print("b. draft step at 15 drafts (block 16), against a causal DFlash of the same backbone")
    report("   DSpine top_k 16 (injection + refinement) / DFlash", kinds["dspine-k16"])
    report("   DSpine top_k 0 (injection only) / DFlash", kinds["dspine-k0"])
    if on_device:
        print(f"c. code table in host memory / on {args.device}, DSpine top_k 16 at 15 drafts")
        report("   host / device", on_device)
    else:
        print("c. code table in host memory / on the device: skipped (needs a GPU: --device CUDA0)")


if __name__ == "__main__":
    main()
