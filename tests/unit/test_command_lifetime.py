"""run_command ends every process the command started (issue 22, item 5): background children
the shell left behind, `setsid` grandchildren and double-forked daemons, when the command ends,
times out or is stopped, and when the chat itself dies. Checked by pid, in /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from app.agent.commands import run_command

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the reaper is Linux's")

ROOT = Path(__file__).resolve().parents[2]  # tests/<layer>/ -> the repository

# Forks, leaves the session, forks again (a daemon), and prints the grandchild's pid only once
# it is in its own session and orphaned, so the test never races the escape it checks.
DAEMON = textwrap.dedent(
    """
    import os, sys, time
    r, w = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, str(os.getpid()).encode())
            os.close(w)
            time.sleep(95)
            os._exit(0)
        os._exit(0)
    os.waitpid(middle, 0)
    os.close(w)
    print(os.read(r, 32).decode(), flush=True)
    """
)


def alive(pid: int) -> bool:
    """Running, or stopped: anything but gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except FileNotFoundError:
        return False
    return data[data.rindex(b")") + 2 :].split()[0] != b"Z"


def pids(output: str) -> list[int]:
    found = [int(word) for word in output.split() if word.isdigit()]
    assert found, f"the command printed no pid: {output!r}"
    return found


@pytest.fixture
def daemon_script(tmp_path: Path) -> Path:
    script = tmp_path / "daemon.py"
    script.write_text(DAEMON)
    return script


def test_a_background_child_ends_with_the_command(tmp_path):
    started = time.monotonic()
    result = run_command(tmp_path, "sleep 95 & echo $!")
    assert result.exit_code == 0
    [pid] = pids(result.output)
    assert not alive(pid)
    assert time.monotonic() - started < 5  # no wait for the child's open pipe


def test_a_background_child_that_closed_the_pipe_ends_too(tmp_path):
    result = run_command(tmp_path, "sleep 95 >/dev/null 2>&1 & echo $!")
    [pid] = pids(result.output)
    assert not alive(pid)


def test_a_double_forked_daemon_in_its_own_session_ends_with_the_command(tmp_path, daemon_script):
    result = run_command(tmp_path, f"{sys.executable} {daemon_script}")
    assert result.exit_code == 0
    [pid] = pids(result.output)
    assert not alive(pid)


def test_a_timeout_ends_a_setsid_grandchild(tmp_path):
    result = run_command(tmp_path, "setsid sh -c 'echo $$; exec sleep 95'", timeout_s=1)
    assert result.timed_out and result.exit_code is None
    [pid] = pids(result.output)
    assert not alive(pid)


def test_a_stop_ends_everything_the_command_started(tmp_path, daemon_script):
    stop = threading.Event()
    seen: list[str] = []

    def on_output(chunk: str) -> None:
        # Output arrives in chunks (several lines may come in one).
        seen.append(chunk)
        if "".join(seen).count("\n") >= 4:
            stop.set()  # the user presses Esc once every pid is printed

    command = (
        "sleep 95 & echo $!; "
        "setsid sh -c 'echo $$; exec sleep 96' & "
        f"{sys.executable} {daemon_script}; "
        "sh -c \"trap '' TERM HUP INT; echo \\$\\$; exec sleep 97\""
    )
    started = time.monotonic()
    result = run_command(tmp_path, command, timeout_s=60, on_output=on_output, stop=stop)
    assert result.stopped and time.monotonic() - started < 10
    found = pids(result.output)
    assert len(found) == 4, result.output
    assert [pid for pid in found if alive(pid)] == []


def test_exit_code_and_output_are_the_commands(tmp_path):
    result = run_command(tmp_path, "echo out; echo err >&2; exit 7")
    assert result.exit_code == 7 and result.output == "out\nerr\n"
    assert run_command(tmp_path, "kill -9 $$").exit_code == -9  # as Popen reports a signal


def test_the_command_ends_when_the_chat_dies(tmp_path):
    """The chat killed outright (no clean-up of its own runs): the command still ends."""
    pid_file = tmp_path / "pid"
    chat = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from app.agent.commands import run_command; "
            "run_command(Path(sys.argv[1]), \"setsid sh -c 'echo $$ > pid; exec sleep 95'\", timeout_s=60)",
            str(tmp_path),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + 20
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert time.monotonic() < deadline, "the command did not start"
            time.sleep(0.02)
        pid = int(pid_file.read_text())
        assert alive(pid)
        chat.send_signal(signal.SIGKILL)
        chat.wait()
        deadline = time.monotonic() + 5
        while alive(pid):
            assert time.monotonic() < deadline, f"pid {pid} outlived the chat"
            time.sleep(0.02)
    finally:
        chat.kill()
        chat.wait()


def test_a_shell_killed_by_a_signal_reports_it_and_the_reaper_dumps_no_core(tmp_path):
    """The reaper ends itself with the shell's signal (so the code is Popen's -11), and must not
    leave a core file of its own in the project. The shell's own core is switched off."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    if hard == 0:
        pytest.skip("core files are off for this user: nothing to show")
    resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))  # what the reaper inherits
    try:
        result = run_command(tmp_path, "ulimit -c 0; kill -SEGV $$")
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))
    assert result.exit_code == -signal.SIGSEGV
    assert sorted(p.name for p in tmp_path.iterdir()) == []
