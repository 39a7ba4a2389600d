"""GPU memory, temperature and clocks through NVML, each only where NVML has it
(sustained agent load throttles cards: the readout shows it)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

try:
    import pynvml
except ImportError:
    pynvml = None


@dataclass(frozen=True)
class GpuStatus:
    name: str
    used: int
    total: int
    temperature_c: int | None = None
    sm_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None


class GpuWatch:
    def __init__(self) -> None:
        self.ok = False
        if pynvml is None:
            return
        try:
            pynvml.nvmlInit()
            self.ok = True
        except Exception:  # no driver, no GPU: the readout says "no GPU"
            self.ok = False

    def read(self) -> list[GpuStatus]:
        if not self.ok:
            return []
        found = []
        try:
            for index in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
                name = pynvml.nvmlDeviceGetName(handle)
                temp = clock = top = None
                with contextlib.suppress(Exception):
                    temp = int(pynvml.nvmlDeviceGetTemperature(handle, 0))  # NVML_TEMPERATURE_GPU
                with contextlib.suppress(Exception):
                    clock = int(pynvml.nvmlDeviceGetClockInfo(handle, 1))  # NVML_CLOCK_SM
                with contextlib.suppress(Exception):
                    top = int(pynvml.nvmlDeviceGetMaxClockInfo(handle, 1))
                found.append(
                    GpuStatus(
                        name.decode() if isinstance(name, bytes) else str(name),
                        int(memory.total - memory.free),
                        int(memory.total),
                        temp,
                        clock,
                        top,
                    )
                )
        except Exception:
            return []
        return found

    def close(self) -> None:
        if self.ok:
            with contextlib.suppress(Exception):
                pynvml.nvmlShutdown()
