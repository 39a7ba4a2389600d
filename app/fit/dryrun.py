"""Ask llama.cpp itself how big its compute buffer will be, without weights.

llama.cpp can load a model with `no_alloc` (only metadata, simulated
allocations) and create contexts on it; it then logs the compute buffer its
graph allocator reserved, per device, exactly as a real load would. The
weights are never read, so a header-only file made sparse to its full size
works too (that is how `dspine fit` measures a model before pulling it). It
runs in a child process: an architecture this llama.cpp does not know (the
DSpine drafter on upstream) aborts the child, not dspine, and the planner
falls back to its own estimate.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from .memory import ComputeCurve

_BUFFER = re.compile(r"(\S+) (model|KV|RS|compute) buffer size =\s+([\d.]+) MiB")
_KINDS = {"model": "model", "KV": "kv", "RS": "rs", "compute": "compute"}


def parse_buffer_lines(log: str) -> dict[str, dict[str, int]]:
    """llama.cpp's buffer lines -> {"model"|"kv"|"rs"|"compute": {device: bytes}}.
    A device's model buffers add up (CPU_Mapped, CPU_REPACK, ...); for the others
    the last line wins (a reservation can be logged more than once)."""
    found: dict[str, dict[str, int]] = {"model": {}, "kv": {}, "rs": {}, "compute": {}}
    for device, kind, mib in _BUFFER.findall(log):
        size = int(float(mib) * 1024 * 1024)
        bucket = found[_KINDS[kind]]
        bucket[device] = bucket.get(device, 0) + size if kind == "model" else size
    return found


def device_compute(sizes: dict[str, int]) -> int:
    """The buffer on the accelerator if there is one, else the CPU's."""
    gpu = [v for k, v in sizes.items() if not k.startswith("CPU") and "Host" not in k]
    return max(gpu) if gpu else sum(sizes.values())


def _run_worker(args: list[str], timeout: float) -> list[dict]:
    command = [sys.executable, "-m", "app.fit.dryrun", *args]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except (subprocess.TimeoutExpired, OSError):
        return []
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def measure(
    path: Path,
    contexts: list[int],
    n_ubatch: int = 512,
    flash_attn: bool = True,
    n_outputs: int | None = None,
    timeout: float = 180,
) -> ComputeCurve | None:
    """Compute buffer sizes at each context, from a dry run (no weights read).
    `n_outputs`: logits rows reserved (llama-server: 1 + draft length); None = the ubatch."""
    outputs = min(n_outputs or n_ubatch, n_ubatch)
    args = [str(path), str(n_ubatch), "1" if flash_attn else "0", "f16", "f16", "dry", str(outputs)]
    records = _run_worker(args + [str(c) for c in sorted(set(contexts))], timeout)
    points = [(r["n_ctx"], device_compute(r["buffers"]["compute"])) for r in records if "buffers" in r]
    points = [p for p in points if p[1]]
    return ComputeCurve(tuple(sorted(points)), n_ubatch, flash_attn, outputs) if points else None


def load_report(
    path: Path,
    n_ctx: int,
    type_k: str = "f16",
    type_v: str = "f16",
    flash_attn: bool = True,
    n_ubatch: int = 512,
    timeout: float = 300,
) -> dict[str, dict[str, int]] | None:
    """Every buffer llama.cpp allocates for a real load (weights read), per kind and device."""
    args = [str(path), str(n_ubatch), "1" if flash_attn else "0", type_k, type_v, "load", str(n_ubatch), str(n_ctx)]
    records = [r for r in _run_worker(args, timeout) if "buffers" in r]
    return records[0]["buffers"] if records else None


def _worker(argv: list[str]) -> int:
    """In the child: load (with no_alloc for a dry run), one context per n_ctx,
    print one JSON line each with every buffer llama.cpp logged."""
    import ctypes

    import llama_cpp

    path, n_ubatch, flash_attn, type_k, type_v, mode = argv[0], int(argv[1]), argv[2] == "1", argv[3], argv[4], argv[5]
    n_outputs = int(argv[6])
    ggml_types = {"f16": 1, "q4_0": 2, "q8_0": 8}
    log: list[str] = []

    @ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
    def on_log(level, text, user_data):  # kept referenced below: a collected callback segfaults
        log.append(text.decode("utf-8", errors="replace"))

    llama_cpp.llama_log_set(on_log, ctypes.c_void_p())
    llama_cpp.llama_backend_init()
    model_params = llama_cpp.llama_model_default_params()
    model_params.no_alloc = mode == "dry"
    if mode == "dry":
        model_params.load_mode = 0  # no mmap: nothing of the weights is touched
    model_params.n_gpu_layers = 999
    # No repacked copies of CPU weights (AMX, CPU_REPACK): they would count the weights twice.
    model_params.use_extra_bufts = False
    model = llama_cpp.llama_model_load_from_file(path.encode(), model_params)
    if not model:
        print(json.dumps({"error": "load failed", "log": "".join(log)[-2000:]}), flush=True)
        return 1
    model_log = "".join(log)
    for n_ctx in (int(x) for x in argv[7:]):
        log.clear()
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = max(n_ubatch, 512)
        params.n_ubatch = n_ubatch
        params.n_seq_max = 1
        params.n_outputs_max = n_outputs
        params.flash_attn_type = 1 if flash_attn else 0
        params.type_k = ggml_types[type_k]
        params.type_v = ggml_types[type_v]
        ctx = llama_cpp.llama_init_from_model(model, params)
        buffers = parse_buffer_lines(model_log + "".join(log))
        print(json.dumps({"n_ctx": n_ctx, "ok": bool(ctx), "buffers": buffers}), flush=True)
        if ctx:
            llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)
    del on_log
    return 0


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1:]))
