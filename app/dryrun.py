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
import os
import re
import subprocess
import sys
from pathlib import Path

from .memory import ComputeCurve

_BUFFER = re.compile(r"(\S+) compute buffer size =\s+([\d.]+) MiB")


def parse_compute_lines(log: str) -> dict[str, int]:
    """'CUDA0 compute buffer size = 512.00 MiB' -> {'CUDA0': bytes}; the last of each device wins."""
    sizes = {}
    for device, mib in _BUFFER.findall(log):
        sizes[device] = int(float(mib) * 1024 * 1024)
    return sizes


def device_compute(sizes: dict[str, int]) -> int:
    """The buffer on the accelerator if there is one, else the CPU's."""
    gpu = [v for k, v in sizes.items() if not k.startswith("CPU") and "Host" not in k]
    return max(gpu) if gpu else sum(sizes.values())


def measure(
    path: Path, contexts: list[int], n_ubatch: int = 512, flash_attn: bool = True, timeout: float = 180
) -> ComputeCurve | None:
    command = [sys.executable, "-m", "app.dryrun", str(path), str(n_ubatch), "1" if flash_attn else "0"]
    command += [str(c) for c in sorted(set(contexts))]
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env={**os.environ, "LLAMA_LOG_COLORS": "0"}
        )
    except (subprocess.TimeoutExpired, OSError):
        return None
    points = []
    for line in result.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("compute"):
                points.append((record["n_ctx"], record["compute"]))
    if not points:
        return None
    return ComputeCurve(tuple(sorted(points)), n_ubatch, flash_attn)


def _worker(argv: list[str]) -> int:
    """In the child: load with no_alloc, one context per n_ctx, print one JSON line each."""
    import ctypes

    import llama_cpp

    path, n_ubatch, flash_attn = argv[0], int(argv[1]), argv[2] == "1"
    log: list[str] = []

    @ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
    def on_log(level, text, user_data):  # kept referenced below: a collected callback segfaults
        log.append(text.decode("utf-8", errors="replace"))

    llama_cpp.llama_log_set(on_log, ctypes.c_void_p())
    llama_cpp.llama_backend_init()
    model_params = llama_cpp.llama_model_default_params()
    model_params.no_alloc = True
    model_params.load_mode = 0  # no mmap: nothing of the weights is touched
    model_params.n_gpu_layers = 999
    model = llama_cpp.llama_model_load_from_file(path.encode(), model_params)
    if not model:
        print(json.dumps({"error": "load failed", "log": "".join(log)[-2000:]}), flush=True)
        return 1
    for n_ctx in (int(x) for x in argv[3:]):
        log.clear()
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = max(n_ubatch, 512)
        params.n_ubatch = n_ubatch
        params.n_seq_max = 1
        params.flash_attn_type = 1 if flash_attn else 0
        ctx = llama_cpp.llama_init_from_model(model, params)
        sizes = parse_compute_lines("".join(log))
        print(json.dumps({"n_ctx": n_ctx, "compute": device_compute(sizes), "devices": sizes}), flush=True)
        if ctx:
            llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)
    del on_log
    return 0


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1:]))
