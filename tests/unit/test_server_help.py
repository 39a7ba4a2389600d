"""llama-server's --help, read for its flags: one that refuses to start says why, in its own
words, instead of reading as a build with no flags (which blamed the API key), and an empty
LLAMA_ARG_REPACK, which llama-server refuses, reads as not set for dspine and for it."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from backends.cpu_repack import REPACK_VARIABLE, asked_by_user, forget_empty
from backends.errors import EngineError
from backends.llama_server import probe


def test_a_server_that_refuses_to_start_says_why(tmp_path):
    binary = tmp_path / "llama-server"
    binary.write_text(
        "#!/bin/sh\necho 'Error while handling environment variable \"LLAMA_ARG_REPACK\": invalid boolean value' >&2\n"
        "exit 1\n"
    )
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(EngineError, match="invalid boolean value") as raised:
        probe(binary)
    assert "LLAMA_ARG_" in raised.value.fix


def test_an_empty_repack_variable_is_not_set_for_anyone():
    environ = {REPACK_VARIABLE: " ", "OTHER": ""}
    assert asked_by_user(environ) is None
    forget_empty(environ)
    assert environ == {"OTHER": ""}
    kept = {REPACK_VARIABLE: "0"}
    forget_empty(kept)
    assert kept == {REPACK_VARIABLE: "0"}


def test_the_cli_drops_it_before_anything_runs(tmp_path):
    code = "import os, sys; from app.cli import run; run(['--version']); print(os.environ.get('LLAMA_ARG_REPACK'))"
    env = {**os.environ, REPACK_VARIABLE: "", "HOME": str(tmp_path)}
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert ran.stdout.strip().splitlines()[-1] == "None", ran.stdout + ran.stderr


def test_doctor_names_a_server_that_does_not_start_and_goes_on(dspine, tmp_path):
    import json

    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\necho 'error while loading shared libraries: libcuda.so.1' >&2\nexit 127\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    ran = dspine("doctor", "--json", extra_env={"DSPINE_LLAMA_SERVER": str(binary)})
    checks = json.loads(ran.stdout)
    (server,) = [c for c in checks if c["name"] == "llama-server (setting llama_server)"]
    assert not server["ok"] and "libcuda.so.1" in server["detail"], server
    assert len(checks) > 3  # the other checks ran
