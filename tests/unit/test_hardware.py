"""GPU detection with NVML faked at its call boundary, nvidia-smi as a PATH shim."""

import os
import stat

import app.fit.hardware as hardware
from tests.support.nvml import GiB, fake_pynvml


def test_nvml_lists_every_gpu(monkeypatch):
    fake_pynvml(
        monkeypatch,
        [
            {"name": "NVIDIA GeForce RTX 3090", "total": 24 * GiB, "free": 22 * GiB},
            {"name": "NVIDIA GeForce RTX 4060 Ti", "total": 16 * GiB, "free": 15 * GiB},
        ],
    )
    found = hardware.detect()
    assert found.source == "nvml" and found.driver == "580.95.05"
    assert [(g.index, g.name, g.total, g.free) for g in found.gpus] == [
        (0, "NVIDIA GeForce RTX 3090", 24 * GiB, 22 * GiB),
        (1, "NVIDIA GeForce RTX 4060 Ti", 16 * GiB, 15 * GiB),
    ]
    assert found.ram_total > 0


def test_nvidia_smi_when_nvml_fails(monkeypatch, tmp_path):
    fake_pynvml(monkeypatch, None)  # "NVML Shared Library Not Found"
    shim = tmp_path / "nvidia-smi"
    shim.write_text("#!/bin/sh\necho '0, NVIDIA GeForce RTX 5090, 32607, 31000, 580.95.05'\n")
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    found = hardware.detect()
    assert found.source == "nvidia-smi"
    assert found.gpus[0].name == "NVIDIA GeForce RTX 5090" and found.gpus[0].total == 32607 * 2**20
    assert any("NVML" in note for note in found.notes)


def test_no_gpu_at_all(monkeypatch, tmp_path):
    fake_pynvml(monkeypatch, None)
    monkeypatch.setenv("PATH", str(tmp_path))
    found = hardware.detect()
    assert found.gpus == [] and found.source == "none"
