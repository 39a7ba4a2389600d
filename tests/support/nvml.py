"""NVML faked at its call boundary (there is no NVIDIA GPU here): the stand-in `pynvml` in
fake_nvml/ reads the GPUs to report from FAKE_NVML (JSON), in a dspine subprocess through
PYTHONPATH or in this process through a monkeypatched `app.fit.hardware.pynvml`."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

GiB = 2**30
RTX_3090 = [{"name": "NVIDIA GeForce RTX 3090", "total": 24 * GiB, "free": 23 * GiB}]
FAKE_NVML = Path(__file__).resolve().parent / "fake_nvml"


def nvml_env(gpus: list[dict]) -> dict[str, str]:
    """Environment for a dspine subprocess that finds the stand-in `pynvml` reporting `gpus`."""
    path = str(FAKE_NVML) + os.pathsep + os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": path, "FAKE_NVML": json.dumps(gpus)}


def fake_pynvml(monkeypatch: pytest.MonkeyPatch, gpus: list[dict] | None) -> None:
    """This process's hardware detection sees `gpus` (None: NVML's library is not found)."""
    import app.fit.hardware as hardware

    spec = importlib.util.spec_from_file_location("pynvml_fake", FAKE_NVML / "pynvml.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if gpus is None:
        monkeypatch.delenv("FAKE_NVML", raising=False)
    else:
        monkeypatch.setenv("FAKE_NVML", json.dumps(gpus))
    monkeypatch.setattr(hardware, "pynvml", module)
