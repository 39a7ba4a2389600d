"""A stand-in for nvidia-ml-py's `pynvml` at its call boundary, for machines
without an NVIDIA GPU. Put this folder first on PYTHONPATH and describe the
GPUs in FAKE_NVML as JSON: [{"name": "NVIDIA GeForce RTX 3090", "total": bytes, "free": bytes}].
An empty list or no FAKE_NVML behaves like a machine without the driver."""

import json
import os
from types import SimpleNamespace


class NVMLError(Exception):
    pass


def _gpus():
    raw = os.environ.get("FAKE_NVML")
    if not raw:
        raise NVMLError("NVML Shared Library Not Found")
    return json.loads(raw)


def nvmlInit():
    _gpus()


def nvmlShutdown():
    pass


def nvmlSystemGetDriverVersion():
    return "580.95.05"


def nvmlDeviceGetCount():
    return len(_gpus())


def nvmlDeviceGetHandleByIndex(index):
    return _gpus()[index]


def nvmlDeviceGetName(handle):
    return handle["name"]


def nvmlDeviceGetMemoryInfo(handle):
    return SimpleNamespace(total=handle["total"], free=handle["free"], used=handle["total"] - handle["free"])
