"""run_command in a sandbox (issue 51, build 6): inside it a command writes only in the
project and a temporary folder and reaches no network, not even a server on 127.0.0.1
outside it; the consent question says where the command runs; a call the model asks to
run outside is asked by name and never covered by "always"; with no sandbox the question
says so. On this machine the sandbox is bubblewrap (.ci/run installs it)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from app.agent.commands import run_command
from app.agent.project import open_project, system_prompt
from app.agent.sandbox import Sandbox, find, seatbelt_profile
from app.agent.session import Session
from app.agent.toolbox import Toolbox
from tests.support.scripted_engine import ScriptedEngine
from tests.support.scripted_engine import tool_call as call
from tests.support.session_recorder import Recorder

BOX = find()
needs_sandbox = pytest.mark.skipif(
    not BOX.available and not os.environ.get("CI"), reason=f"no sandbox here: {BOX.problem}"
)


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def listener():
    """A server on 127.0.0.1 outside the sandbox: it counts the connections it gets."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    got: list[int] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            got.append(1)
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1], got
    server.close()


def reach(port: int) -> str:
    return f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('reached')\""


@needs_sandbox
def test_the_sandbox_exists_here():
    assert BOX.available, BOX.problem  # CI installs bubblewrap: a missing one is a failure there


@needs_sandbox
def test_inside_writes_stay_in_the_project_and_the_network_is_out_of_reach(repo, tmp_path, listener):
    port, got = listener
    outside = tmp_path / "outside.txt"
    wrap = BOX.wrap(repo)
    elsewhere = Path.home() / f".dspine-sandbox-test-{os.getpid()}"  # not under a temporary folder
    ran = run_command(repo, f"echo ok > made.txt && echo bad > {outside}; echo bad > {elsewhere}; echo $?", wrap=wrap)
    assert (repo / "made.txt").read_text() == "ok\n"
    # Beside the project (here under /tmp) it landed in the sandbox's own /tmp, gone with it;
    # anywhere else the write failed.
    assert not outside.exists() and not elsewhere.exists() and ran.output.strip().splitlines()[-1] != "0"
    tmp = run_command(repo, "echo t > /tmp/x && cat /tmp/x", wrap=wrap)
    assert tmp.exit_code == 0 and tmp.output.strip() == "t"  # a temporary folder of its own
    git = run_command(repo, "echo x > .git/hooks/pre-commit", wrap=wrap)
    assert git.exit_code != 0 and not (repo / ".git/hooks/pre-commit").exists()
    net = run_command(repo, reach(port), wrap=wrap)
    assert net.exit_code != 0 and "reached" not in net.output and not got
    # The same commands outside it do what they say: the sandbox is what stopped them.
    plain = run_command(repo, f"echo bad > {outside} && {reach(port)}")
    assert plain.exit_code == 0 and outside.exists() and "reached" in plain.output and got


@needs_sandbox
def test_nothing_a_sandboxed_command_starts_outlives_it(repo):
    marker = f"sleep {300 + os.getpid() % 1000}.25"  # a command line no other process has
    ran = run_command(repo, f"{marker} & echo started", wrap=BOX.wrap(repo), timeout_s=10)
    assert ran.exit_code == 0
    # The kernel ends the sandbox's processes when its first one ends; reaping takes a moment.
    deadline = time.monotonic() + 10
    while subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, f"{marker} outlived the sandbox"
        time.sleep(0.05)


def session_in(repo: Path, recorder: Recorder, box: Sandbox | None, enabled: bool = True) -> Session:
    toolbox = Toolbox(repo, sandbox_enabled=enabled, sandbox=box)
    return Session(
        ScriptedEngine(), toolbox, recorder.ask, recorder.emit, system=system_prompt(open_project(repo), True)
    )


@needs_sandbox
def test_the_question_says_where_a_command_runs_and_outside_is_asked_by_name(repo, tmp_path):
    recorder = Recorder()
    recorder.answer = "always"
    session = session_in(repo, recorder, BOX)
    outside = tmp_path / "written-outside.txt"

    async def go():
        await session._run_tool(call("run_command", command="echo hi"))
        await session._run_tool(call("run_command", command="echo hi"))  # covered by always
        await session._run_tool(call("run_command", "2", command=f"touch {outside}", outside_sandbox=True))
        await session._run_tool(call("run_command", "3", command=f"touch {outside}", outside_sandbox=True))

    asyncio.run(go())
    first, out, again = recorder.questions
    assert "Runs in a sandbox (bubblewrap)" in first.body and first.always_label
    assert "OUTSIDE the sandbox" in out.title and "OUTSIDE the sandbox, as the model asked" in out.body
    assert out.always_label is None and again.title == out.title  # asked every time, by name
    assert outside.exists()  # the user said yes to it: it ran as them


def test_with_no_sandbox_the_question_says_so(repo):
    recorder = Recorder()
    session = session_in(repo, recorder, Sandbox("none", problem="bubblewrap (bwrap) is not installed"))
    asyncio.run(session._run_tool(call("run_command", command="echo hi > f")))
    (question,) = recorder.questions
    assert "OUTSIDE any sandbox: this system has none (bubblewrap (bwrap) is not installed)" in question.body
    assert (repo / "f").read_text() == "hi\n"


def test_the_setting_off_says_so(repo):
    recorder = Recorder()
    session = session_in(repo, recorder, Sandbox("bubblewrap", "/usr/bin/bwrap"), enabled=False)
    asyncio.run(session._run_tool(call("run_command", command="echo hi")))
    assert "sandbox = false in your settings" in recorder.questions[0].body


def test_a_missing_bwrap_is_named_with_its_fix(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    box = find("linux")
    assert not box.available and "apt install bubblewrap" in box.problem


def test_the_seatbelt_profile_denies_the_network_and_writes_outside(tmp_path):
    (tmp_path / ".git").mkdir()
    profile = seatbelt_profile(tmp_path)
    assert "(deny network*)" in profile and "(deny file-write*)" in profile
    assert f'(subpath "{tmp_path.resolve()}")' in profile
    assert f'(deny file-write* (subpath "{tmp_path / ".git"}"))' in profile


@needs_sandbox
def test_root_cannot_remount_its_way_out_and_services_sockets_are_hidden(repo, tmp_path, monkeypatch):
    """Review of issue 51: as root, bubblewrap kept its capabilities and `mount -o remount,rw /`
    made the whole system writable; the session bus and the ssh agent were reachable."""
    monkeypatch.setenv("SSH_AUTH_SOCK", "/run/user/0/ssh.sock")
    outside = Path.home() / f".dspine-remount-test-{os.getpid()}"
    ran = run_command(
        repo,
        f"mount -o remount,bind,rw / ; touch {outside} ; echo agent=$SSH_AUTH_SOCK ; ls -A /run | wc -l",
        wrap=BOX.wrap(repo),
    )
    assert not outside.exists(), ran.output
    assert "agent=\n" in ran.output + "\n"
