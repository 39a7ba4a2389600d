"""What this machine has: GPUs through NVML (nvidia-ml-py), `nvidia-smi` when
NVML is missing, RAM through psutil. No GPU is a normal answer, not an error."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field

import psutil

try:
    import pynvml
except ImportError:  # nvidia-ml-py is a dependency, but a broken install should still plan for the CPU
    pynvml = None


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    total: int
    free: int


@dataclass
class Hardware:
    gpus: list[Gpu]
    ram_total: int
    ram_available: int
    source: str  # "nvml", "nvidia-smi" or "none"
    driver: str = ""
    notes: list[str] = field(default_factory=list)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _from_nvml() -> tuple[list[Gpu], str]:
    pynvml.nvmlInit()
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            gpus.append(Gpu(index, _text(pynvml.nvmlDeviceGetName(handle)), int(memory.total), int(memory.free)))
        return gpus, driver
    finally:
        pynvml.nvmlShutdown()


def _from_nvidia_smi() -> tuple[list[Gpu], str]:
    query = "index,name,memory.total,memory.free,driver_version"
    output = subprocess.run(
        ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
    ).stdout
    gpus, driver = [], ""
    for line in output.strip().splitlines():
        index, name, total, free, driver = (part.strip() for part in line.split(","))
        gpus.append(Gpu(int(index), name, int(total) * 2**20, int(free) * 2**20))
    return gpus, driver


def detect() -> Hardware:
    memory = psutil.virtual_memory()
    hardware = Hardware([], int(memory.total), int(memory.available), "none")
    if pynvml is not None:
        try:
            hardware.gpus, hardware.driver = _from_nvml()
            hardware.source = "nvml"
            return hardware
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            hardware.notes.append(f"NVML: {exc}")
    if shutil.which("nvidia-smi"):
        try:
            hardware.gpus, hardware.driver = _from_nvidia_smi()
            hardware.source = "nvidia-smi"
        except (subprocess.SubprocessError, ValueError, OSError) as exc:
            hardware.notes.append(f"nvidia-smi: {exc}")
    return hardware
