"""dspine's memory estimate next to the buffers llama.cpp itself reports, per
component, as a ratio (goal: within 3% on every component).

Small generated models (dense, GQA, qwen35 hybrid) are loaded for real through
llama-cpp-python; the shapes of Qwen3.8-27B and Qwen3-8B are written as
headers, made sparse to full size and measured with llama.cpp's no-alloc dry
run (weights, KV and recurrent state are not allocated there, so for them
only the compute buffer is compared). Then a generated qwen35 hybrid with an MTP
head under dspine's patched llama-server, drafting with each kind at several
draft lengths: the recurrent state fit counts (1 + n_max copies for the kinds
llama-server snapshots for, one for draft-simple) against its `RS buffer size`.

    .venv/bin/python benchmarks/fit_accuracy.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.fit.dryrun import device_compute, load_report, measure  # noqa: E402
from app.fit.memory import Runtime, compute_estimate, footprint  # noqa: E402
from app.fit.planner import Option, Wishes, assess  # noqa: E402
from app.fit.shape import shape_from_header  # noqa: E402
from backends.drafters import KINDS  # noqa: E402
from backends.gguf_header import read_local  # noqa: E402
from tests.support.gguf_models import QTYPE, Shape, qwen3_8b, qwen38_27b, write_header_only, write_model  # noqa: E402
from tests.support.patched_server import build_folder  # noqa: E402
from tests.support.safetensors_drafters import FAMILY_OF_KIND, converted_drafter  # noqa: E402
from tests.support.server_buffers import server_log, target_rs_bytes  # noqa: E402

SMALL = {
    "dense": Shape(arch="llama", n_layer=4, n_embd=256, n_head=8, n_head_kv=8, head_dim=32, n_ff=512, n_vocab=1000),
    "gqa": Shape(arch="llama", n_layer=4, n_embd=256, n_head=8, n_head_kv=2, head_dim=32, n_ff=512, n_vocab=1000),
    "hybrid": Shape(
        arch="qwen35",
        n_layer=4,
        n_embd=256,
        n_head=4,
        n_head_kv=2,
        head_dim=64,
        n_ff=512,
        n_vocab=1000,
        full_attention_interval=2,
        ssm_state_size=64,
        ssm_group_count=4,
        ssm_time_step_rank=16,
    ),
}


def ratio(ours: int, theirs: int) -> str:
    return "n/a" if theirs == 0 else f"{ours / theirs:.3f}"


def row(*cells) -> None:
    print("  ".join(f"{c:>12}" if i else f"{c:<28}" for i, c in enumerate(cells)))


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="dspine-fit-accuracy-"))
    worst: dict[str, float] = {}
    row("model / ctx / kv", "component", "dspine MiB", "llama.cpp", "ratio")
    for name, shape_spec in SMALL.items():
        path = write_model(folder / f"{name}.gguf", shape_spec)
        shape = shape_from_header(read_local(path))
        for kv in ("f16", "q8_0", "q4_0"):
            for n_ctx in (2048, 8192):
                report = load_report(path, n_ctx, kv, kv)
                ours = footprint(shape, Runtime(n_ctx=n_ctx, type_k=kv, type_v=kv))
                dry = measure(path, [n_ctx]) if kv == "f16" else None
                pairs = {
                    "weights": (ours.weights.gpu + ours.weights.cpu, sum(report["model"].values())),
                    "kv": (ours.kv.gpu + ours.kv.cpu, sum(report["kv"].values())),
                    "recurrent": (ours.recurrent.gpu + ours.recurrent.cpu, sum(report["rs"].values())),
                }
                if dry is not None:
                    pairs["compute (dry run)"] = (dry.at(n_ctx), device_compute(report["compute"]))
                for component, (mine, theirs) in pairs.items():
                    if theirs or mine:
                        row(
                            f"{name} {n_ctx} {kv}",
                            component,
                            f"{mine / 2**20:.2f}",
                            f"{theirs / 2**20:.2f}",
                            ratio(mine, theirs),
                        )
                        if theirs:
                            worst[component] = max(worst.get(component, 0), abs(mine / theirs - 1))
    for name, spec in {"qwen3.8-27b": qwen38_27b(QTYPE.Q4_K), "qwen3-8b": qwen3_8b(QTYPE.Q4_K)}.items():
        path = write_header_only(folder / f"{name}.gguf", spec)
        shape = shape_from_header(read_local(path))
        os.truncate(path, shape.total_weight_bytes + 64 * 2**20)
        contexts = [4096, 32768, 131072, 262144]
        curve = measure(path, contexts)
        for n_ctx, theirs in curve.points if curve else []:
            mine = compute_estimate(shape, Runtime(n_ctx=n_ctx))
            row(
                f"{name} {n_ctx} f16",
                "compute (estimate)",
                f"{mine / 2**20:.2f}",
                f"{theirs / 2**20:.2f}",
                ratio(mine, theirs),
            )
            worst["compute (estimate)"] = max(worst.get("compute (estimate)", 0), abs(mine / theirs - 1))
    hybrid_with_drafters(folder, worst)
    print()
    for component, error in worst.items():
        print(f"worst |ratio - 1| for {component}: {error:.1%}")
    print("compute (dry run) is what `dspine fit` uses when llama.cpp can load the model (measured before any")
    print("weights are read); compute (estimate) is its fallback for architectures this llama.cpp lacks (DSpine).")


def hybrid_with_drafters(folder: Path, worst: dict[str, float]) -> None:
    """The target's recurrent state under llama-server, by drafter kind and draft length. DFlash
    and DSpark drafters come from the converter (tests/support/safetensors_drafters.py); DSpine
    joins there once dspine's DSpine patch lets the pinned server run it."""
    binary = build_folder() / "bin" / "llama-server"
    spec = Shape(**{**vars(SMALL["hybrid"]), "nextn_layers": 1})
    target = write_model(folder / "hybrid-mtp.gguf", spec)
    shape = shape_from_header(read_local(target))
    flags = {"mtp": ("--spec-type", "draft-mtp"), "draft": ("--spec-type", "draft-simple", "-md", str(target))}
    files: dict[str, Path | None] = {"mtp": None, "draft": target}
    for kind in FAMILY_OF_KIND:
        files[kind] = converted_drafter(kind, target, folder)
        flags[kind] = ("--spec-type", KINDS[kind].spec_types[0], "-md", str(files[kind]))
    for kind, kind_flags in flags.items():
        file = files[kind]
        drafter = Option("d", str(file or target), shape_from_header(read_local(file)) if file else None, kind=kind)
        for n_max in (2, 7, 16):
            log = server_log(
                binary, target, 4096, "f16", folder / "server.log", (*kind_flags, "--spec-draft-n-max", str(n_max))
            )
            theirs = target_rs_bytes(log)
            plan = assess(Option("t", str(target), shape), drafter, 4096, "f16", Wishes(budget=2**40, n_max=n_max))
            mine = plan.memory["recurrent_state"]
            row(
                f"hybrid+{kind} n_max {n_max}",
                f"rs x{plan.state_copies}",
                f"{mine / 2**20:.2f}",
                f"{theirs / 2**20:.2f}",
                ratio(mine, theirs),
            )
            worst["recurrent (drafting)"] = max(worst.get("recurrent (drafting)", 0), abs(mine / theirs - 1))


if __name__ == "__main__":
    main()
