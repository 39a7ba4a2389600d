"""llama-server's own account of its buffers: start it on a model at -v, wait until it
listens, stop it, and read the lines (tests and benchmarks/fit_accuracy.py)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from backends.llama_server import free_port


def server_log(binary: Path, model: Path, n_ctx: int, kv: str, log: Path, extra: tuple[str, ...] = ()) -> str:
    command = [
        str(binary),
        "-m",
        str(model),
        "-c",
        str(n_ctx),
        "-ctk",
        kv,
        "-ctv",
        kv,
        "-fa",
        "on",
        "-np",
        "1",
        "-ngl",
        "0",
        "--fit",
        "off",
        "--no-warmup",
        "--no-repack",
        "-v",
        "--host",
        "127.0.0.1",
        "--port",
        str(free_port()),
        *extra,
    ]
    with log.open("w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "listening on" not in log.read_text(errors="replace"):
            if process.poll() is not None:
                raise RuntimeError(log.read_text(errors="replace")[-2000:])
            if time.monotonic() > deadline:
                raise TimeoutError("llama-server did not start")
            time.sleep(0.05)
    finally:
        process.terminate()
        process.wait(timeout=30)
    return log.read_text(errors="replace")


_RS_LINE = re.compile(r"(\S+) RS buffer size =\s*([\d.]+) MiB")


def target_rs_bytes(log: str) -> int:
    """The target's recurrent-state buffer: the first RS line (--fit off: no dry run before it;
    a draft model's own context logs its line after the target's)."""
    found = _RS_LINE.search(log)
    assert found, log[-2000:]
    return int(float(found.group(2)) * 2**20)


_MODEL_LOAD = "llama_model_loader: loaded meta data"


def drafter_part(log: str) -> str:
    """The log from the second model's load on: the drafter's (the target loads first)."""
    loads = [m.start() for m in re.finditer(re.escape(_MODEL_LOAD), log)]
    assert len(loads) == 2, f"expected the target's load, then the drafter's; found {len(loads)}"
    return log[loads[1] :]
