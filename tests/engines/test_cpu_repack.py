"""llama.cpp's CPU weight repacking, settled before an engine starts: some VMs advertise AMX
that llama.cpp's AMX kernels crash on (the whole process dies at the first batch), and the
README's try-it path ran straight into it. A probe in a child process finds out once per
CPU and llama.cpp build; the user's own LLAMA_ARG_REPACK always wins."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.run import weight_repacking
from backends import cpu_repack
from backends.inproc import weight_repacking as inproc_repacks

AMX_CPU = "processor\t: 0\nmodel name\t: Intel Xeon Test\nflags\t\t: fpu sse avx512f amx_bf16 amx_tile amx_int8\n"
PLAIN_CPU = "processor\t: 0\nmodel name\t: AMD Test\nflags\t\t: fpu sse avx2\n"


@pytest.fixture
def no_user_choice(monkeypatch):
    monkeypatch.delenv("LLAMA_ARG_REPACK", raising=False)


def test_the_users_own_variable_is_read_as_llama_server_reads_it():
    assert cpu_repack.asked_by_user({}) is None
    assert cpu_repack.asked_by_user({"LLAMA_ARG_REPACK": " "}) is None
    for off in ("0", "false", "OFF", "no", "disabled"):
        assert cpu_repack.asked_by_user({"LLAMA_ARG_REPACK": off}) is False
    assert cpu_repack.asked_by_user({"LLAMA_ARG_REPACK": "1"}) is True


def test_amx_is_read_from_the_flags_line_only():
    assert cpu_repack.advertises_amx(AMX_CPU)
    assert not cpu_repack.advertises_amx(PLAIN_CPU)
    assert not cpu_repack.advertises_amx("model name\t: amx_tile in a name\nflags\t: avx2\n")
    assert cpu_repack.cpu_name(AMX_CPU) == "Intel Xeon Test"


def test_a_crash_turns_repacking_off_for_both_engines_and_is_remembered(tmp_path, no_user_choice, monkeypatch):
    record = tmp_path / "cpu-repack.json"
    probes: list[str] = []
    notes: list[str] = []
    monkeypatch.setattr(cpu_repack, "library_survives_repacking", lambda: probes.append("library") or False)

    assert weight_repacking.settle(record, "inproc", on_progress=notes.append, cpuinfo=AMX_CPU) is False
    assert os.environ["LLAMA_ARG_REPACK"] == "false" and not inproc_repacks()
    assert probes == ["library"] and weight_repacking.OFF_NOTE in notes
    assert list(json.loads(record.read_text()).values()) == [False]

    monkeypatch.delenv("LLAMA_ARG_REPACK")
    monkeypatch.setattr(cpu_repack, "library_survives_repacking", lambda: pytest.fail("probed twice"))
    assert weight_repacking.settle(record, "inproc", cpuinfo=AMX_CPU) is False
    assert os.environ["LLAMA_ARG_REPACK"] == "false"


def test_a_new_server_build_is_probed_again(tmp_path, no_user_choice, monkeypatch):
    record = tmp_path / "cpu-repack.json"
    binary = tmp_path / "llama-server"
    binary.write_bytes(b"one build")
    seen: list[Path] = []
    monkeypatch.setattr(cpu_repack, "server_survives_repacking", lambda b: seen.append(b) or True)
    assert weight_repacking.settle(record, "server", binary, cpuinfo=AMX_CPU) is True
    assert weight_repacking.settle(record, "server", binary, cpuinfo=AMX_CPU) is True
    assert len(seen) == 1 and "LLAMA_ARG_REPACK" not in os.environ
    binary.write_bytes(b"another build, another size")
    weight_repacking.settle(record, "server", binary, cpuinfo=AMX_CPU)
    assert len(seen) == 2


def test_no_answer_is_not_remembered_and_leaves_llama_cpps_default(tmp_path, no_user_choice, monkeypatch):
    record = tmp_path / "cpu-repack.json"
    monkeypatch.setattr(cpu_repack, "library_survives_repacking", lambda: None)
    assert weight_repacking.settle(record, "inproc", cpuinfo=AMX_CPU) is True
    assert not record.exists() and "LLAMA_ARG_REPACK" not in os.environ


def test_no_probe_without_amx_or_when_the_user_said(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_repack, "library_survives_repacking", lambda: pytest.fail("probed"))
    monkeypatch.delenv("LLAMA_ARG_REPACK", raising=False)
    assert weight_repacking.settle(tmp_path / "r.json", "inproc", cpuinfo=PLAIN_CPU) is True
    monkeypatch.setenv("LLAMA_ARG_REPACK", "on")
    assert weight_repacking.settle(tmp_path / "r.json", "inproc", cpuinfo=AMX_CPU) is True
    assert os.environ["LLAMA_ARG_REPACK"] == "on"


def test_the_probe_model_loads_and_runs_with_repacking_off(tmp_path):
    """The probe's model is a real model: with repacking off it runs anywhere, so a probe's
    death is repacking's, not the model's."""
    import subprocess
    import sys

    model = cpu_repack.write_probe_model(tmp_path / "probe.gguf")
    ran = subprocess.run(
        [sys.executable, "-c", _RUN_WITHOUT_REPACKING, str(model)], capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr[-2000:]


_RUN_WITHOUT_REPACKING = """
import sys, llama_cpp as L
L.llama_backend_init()
p = L.llama_model_default_params(); p.use_extra_bufts = False
m = L.llama_model_load_from_file(sys.argv[1].encode(), p)
c = L.llama_context_default_params(); c.n_ctx = c.n_batch = c.n_ubatch = 64
ctx = L.llama_init_from_model(m, c)
toks = (L.llama_token * 8)(*range(1, 9))
sys.exit(L.llama_decode(ctx, L.llama_batch_get_one(toks, 8)))
"""


def test_a_q8_model_answers_in_process_with_llama_cpps_defaults(dspine, tmp_path):
    """What a new user runs: no LLAMA_ARG_REPACK anywhere. On this workplace's VMs (AMX that
    crashes) the run died with SIGSEGV; here it answers, and the second run asks the record,
    not the probe."""
    from tests.support.gguf_models import QTYPE, chat_model, write_model

    shape = chat_model(n_layer=1, n_embd=64)
    shape.weight_type = QTYPE.Q8_0
    model = write_model(tmp_path / "chat-q8.gguf", shape)
    args = ("run", "--model", str(model), "--engine", "inproc", "--draft", "none", "-n", "4", "--think", "off", "hi")
    env = {"LLAMA_ARG_REPACK": ""}
    first = dspine(*args, extra_env=env)
    assert first.returncode == 0, first.stderr[-2000:]
    record = Path(tmp_path / "cache" / "dspine" / "cpu-repack.json")
    if cpu_repack.advertises_amx():
        assert record.exists()
        second = dspine(*args, extra_env=env)
        assert second.returncode == 0, second.stderr[-2000:]
        assert "checking llama.cpp's CPU kernels" in first.stderr
        assert "checking llama.cpp's CPU kernels" not in second.stderr


def test_a_q8_model_answers_through_llama_server_with_llama_cpps_defaults(dspine, tmp_path, patched_server):
    """The same through the engine `auto` picks where a llama-server is found: the probe runs
    that very binary, and the server it starts inherits the answer."""
    from tests.support.gguf_models import QTYPE, chat_model, write_model

    shape = chat_model(n_layer=1, n_embd=64)
    shape.weight_type = QTYPE.Q8_0
    model = write_model(tmp_path / "chat-q8.gguf", shape)
    ran = dspine(
        "run",
        "--model",
        str(model),
        "--engine",
        "server",
        "--draft",
        "none",
        "-n",
        "4",
        "--think",
        "off",
        "hi",
        extra_env={"LLAMA_ARG_REPACK": "", "DSPINE_LLAMA_SERVER": str(patched_server)},
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    if cpu_repack.advertises_amx():
        record = json.loads((tmp_path / "cache" / "dspine" / "cpu-repack.json").read_text())
        assert any(
            key.endswith(str(patched_server.stat().st_size) + f" {patched_server.stat().st_mtime_ns}") for key in record
        )


def test_doctor_says_whether_repacking_runs_here(dspine):
    checked = dspine("doctor", "--json", extra_env={"LLAMA_ARG_REPACK": ""})
    lines = [c for c in json.loads(checked.stdout) if c["name"] == "CPU weight repacking"]
    if not cpu_repack.advertises_amx():
        assert lines == []
        return
    (line,) = lines
    assert line["ok"] and line["detail"].split(":")[0] in ("on", "off")
    said = dspine("doctor", "--json", extra_env={"LLAMA_ARG_REPACK": "0"})
    (pinned,) = [c for c in json.loads(said.stdout) if c["name"] == "CPU weight repacking"]
    assert pinned["detail"] == "off, as LLAMA_ARG_REPACK says"


def test_the_probe_never_imports_what_the_project_carries(tmp_path, monkeypatch):
    """Started in a project, the probe's child must not import the project's `llama_cpp.py`
    or `backends/` (Python puts the current folder first for `-m` and `-c`): it runs before
    any trust question."""
    marker = tmp_path / "project-code-ran"
    project = tmp_path / "project"
    (project / "backends").mkdir(parents=True)
    planted = f"open({str(marker)!r}, 'w').write('x')\n"
    for name in ("llama_cpp.py", "numpy.py", "backends/__init__.py", "backends/cpu_repack.py"):
        (project / name).write_text(planted)
    monkeypatch.chdir(project)
    cpu_repack.library_survives_repacking()
    assert not marker.exists()
