"""Threads that follow the machine (issue 68): the physical cores others leave free, the
`threads` setting over it, llama-server launched with the count, the in-process engine
looking again before each reply, doctor saying what it picked."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time

import psutil
import pytest

from backends.llama_server import ServerConfig, server_args
from backends.threads import LoadWatch, pick
from tests.conftest import wait_for


@pytest.mark.parametrize(
    ("physical", "busy", "threads"),
    [(2, 0.0, 2), (2, 0.3, 2), (2, 0.6, 1), (2, 1.0, 1), (2, 2.0, 1), (8, 0.2, 8), (8, 1.0, 7), (8, 2.7, 5)],
)
def test_the_count_is_the_cores_others_leave_free(physical, busy, threads):
    chosen = pick(physical, busy)
    assert chosen.threads == threads
    assert ("idle" in chosen.why) == (threads == physical)


def test_the_setting_fixes_the_count_whatever_the_load():
    assert pick(2, 1.9, setting=4).threads == 4 and pick(2, 1.9, setting=4).why == "the threads setting"


def test_llama_server_is_launched_with_the_count():
    args = server_args(ServerConfig("m.gguf", threads=1))
    assert args[args.index("-t") + 1] == "1"
    assert "-t" not in server_args(ServerConfig("m.gguf"))  # None: llama-server's own


def test_the_watch_sees_another_program_and_not_this_one():
    """A spinning process beside us counts; our own spinning does not (bounded, killed by PID).
    Measured against what the machine was doing just before (a test run may not be alone)."""
    from backends.threads import physical_cores

    watch = LoadWatch()
    watch.settle(0.3)
    before = watch.busy()
    deadline = time.monotonic() + 0.4
    while time.monotonic() < deadline:
        pass  # this process busy: not counted
    assert watch.busy() < before + 0.5
    if before > physical_cores() - 1.2:
        pytest.skip(f"other programs keep {before:.1f} cores busy: no core left to see a spinner on")
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
    try:
        watch.busy()
        watch.settle(0.3)  # the spinner's start (Python loading) is not the load measured
        watch.busy()
        watch.settle(0.6)
        seen = watch.busy()
    finally:
        spinner.kill()
        spinner.wait(timeout=30)
    assert seen > before + 0.6


def test_a_reply_a_load_came_into_is_not_judged_and_drafting_stays_on():
    """Issue 68: break-even switched drafting off on replies that ran beside a load spike."""
    from backends.break_even import BreakEven, reply_note
    from backends.threads import disturbed

    assert disturbed(0.0, 1.0) and disturbed(0.2, 0.9) and not disturbed(1.0, 1.1) and not disturbed(0.0, 0.3)
    judge = BreakEven()
    for _ in range(4):  # plain replies at 100 tok/s, as the judge asks for them
        judge.observed(False, False, 100, 1.0)
    for _ in range(6):  # drafting replies at a tenth of that, each with a build beside it
        note = reply_note(judge, None, False, 100, 10.0, drafter_asked=True, copies_used=None, disturbed=True)
        assert note == "a load came while this reply ran: not counted for drafting"
    assert judge.drafting(False)
    for _ in range(3):  # the same replies undisturbed: drafting is slower here, and stops
        reply_note(judge, None, False, 100, 10.0, drafter_asked=True, copies_used=None)
    assert not judge.drafting(False)


def test_a_tunes_ended_children_count_as_its_own_load_only_where_asked():
    """`dspine tune` on llama-server runs one server after another, each closed before its next
    look: their time is the tune's own, or every server tune would read as disturbed."""
    spin = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"
    plain, counting = LoadWatch(), LoadWatch(children=True)
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", spin], check=True)  # a child that ran and was waited for
    wall = time.monotonic() - started
    others, own = plain.busy() * wall, counting.busy() * wall
    assert others >= 0.3, f"the child's {others:.2f} core-seconds read as others' load"
    assert own < others - 0.25, f"counted as ours: {own:.2f} core-seconds left of {others:.2f}"


def niced_counted(tmp_path, monkeypatch, spinner_session: str) -> float:
    """How many more cores a watch sees busy where the kernel schedules each session apart
    (autogroups) than one where it does not, over one window (the kernel's setting read from a
    file each), beside a program spinning at nice 19 started in this session (`same`), a shell
    there running one short program after another (`same, short-lived`: a build), one in a
    session of its own (`other`: as from another terminal) or none. Bounded, killed by its PID
    (a shell's child then ends by itself)."""
    import backends.threads as threads

    def watch_with(setting: str) -> LoadWatch:
        flag = tmp_path / f"autogroup-{setting}"
        flag.write_text(setting + "\n")
        monkeypatch.setattr(threads, "AUTOGROUP", flag)
        return LoadWatch()

    command = ["nice", "-n", "19", sys.executable, "-c", "while True: pass"]
    if spinner_session == "same, short-lived":  # a build: a shell starting one short program after another
        burst = "import time\nend = time.process_time() + 0.2\nwhile time.process_time() < end: pass"
        command = [
            "nice",
            "-n",
            "19",
            "sh",
            "-c",
            f"while :; do {shlex.quote(sys.executable)} -c {shlex.quote(burst)}; done",
        ]
    spinner = None
    if spinner_session == "same, on a reused pid":
        spinner = spinner_on_a_reused_pid(command)
    elif spinner_session != "none":
        spinner = subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=spinner_session == "other")
    try:
        if spinner is not None:
            wait_for(lambda: psutil.Process(spinner.pid).nice() == 19, timeout=10, what="the spinner at nice 19")
        apart, together = watch_with("1"), watch_with("0")  # they find this session's niced programs
        together.settle(1.5)
        return apart.busy() - together.busy()
    finally:
        if spinner is not None:
            spinner.kill()  # a shell's running child ends by itself, within its 0.2 s
            spinner.wait(timeout=30)


NS_LAST_PID = "/proc/sys/kernel/ns_last_pid"


def spinner_on_a_reused_pid(command: list[str]) -> subprocess.Popen:
    """`command` started on the pid of a program that ended after psutil's process table last
    looked (pids wrap at 32,768 here: a long test run or chat session reuses them), through the
    kernel's next-pid file; other programs may take the pid first, so a few tries."""
    for _ in range(20):
        gone = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL)
        list(psutil.process_iter(["nice"]))  # psutil's table now holds `gone`
        gone.kill()
        gone.wait(timeout=30)
        with open(NS_LAST_PID, "w") as next_pid:
            next_pid.write(str(gone.pid - 1))
        spinner = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        if spinner.pid == gone.pid:
            return spinner
        spinner.kill()
        spinner.wait(timeout=30)
    pytest.fail("no spinner on a reused pid in 20 tries")


@pytest.mark.skipif(not os.path.exists("/proc/self/autogroup"), reason="no autogroups in this kernel")
@pytest.mark.skipif(not os.access(NS_LAST_PID, os.W_OK), reason="the next pid is not ours to set (not root)")
def test_a_niced_program_on_a_reused_pid_is_still_this_sessions(tmp_path, monkeypatch):
    """psutil's process_iter leaves a pid out of its look once it went to another program since
    the last one, and a `nice make` from this session, started on a reused pid, was counted as
    load for as long as that stayed so (a chat that runs commands for hours reuses pids)."""
    if os.getpriority(os.PRIO_PROCESS, 0) >= 19:
        pytest.skip("this run is niced to 19: nothing it starts is niced below it")
    before = niced_counted(tmp_path, monkeypatch, "none")
    reused = niced_counted(tmp_path, monkeypatch, "same, on a reused pid")
    assert reused < before + 0.3, (before, reused)


@pytest.mark.skipif(not os.path.exists("/proc/self/autogroup"), reason="no autogroups in this kernel")
def test_a_niced_program_counts_where_autogroups_keep_its_session_apart(tmp_path, monkeypatch):
    """A `nice make` in another terminal took a core from llama-server at `-t 2` (0.6 tok/s where
    it drafted 20) and auto did not count it: with autogroups a niced program yields only to its
    own session's. One started from this session still yields, and is not counted. (Against
    what the machine's other niced programs add without a spinner: a test run may not be alone.)"""
    before = niced_counted(tmp_path, monkeypatch, "none")
    other = niced_counted(tmp_path, monkeypatch, "other")
    same = niced_counted(tmp_path, monkeypatch, "same")
    assert other > before + 0.5, (before, other)
    if os.getpriority(os.PRIO_PROCESS, 0) >= 19:
        # This run is niced as far as it goes (`nice -n 19 pytest`): the spinner's nice 19 is
        # ours, it does not yield to us, and it is load like any other program's.
        assert same > before + 0.5, (before, same)
        return
    builds = niced_counted(tmp_path, monkeypatch, "same, short-lived")
    assert same < before + 0.3, (before, same)
    assert builds < before + 0.3, (before, builds)  # counted when reaped, each once


def test_a_program_that_never_started_a_session_is_in_the_root_autogroup():
    """The kernel leaves the autogroup file empty for the programs of no session (its own
    threads, a service, CI's test run): they are one group, not "no autogroups"."""
    from backends.threads import ROOT_AUTOGROUP, autogroup_of

    if not os.path.exists("/proc/2/autogroup"):
        pytest.skip("no autogroups in this kernel")
    assert autogroup_of(2) == ROOT_AUTOGROUP  # kthreadd: started by the kernel, in no session
    assert autogroup_of(2**22 + 1) is None  # beyond any pid: gone
    session = subprocess.run(
        [sys.executable, "-c", "from backends.threads import autogroup_of; print(autogroup_of('self'))"],
        start_new_session=True,
        capture_output=True,
        text=True,
        check=True,
    )
    assert session.stdout.startswith("/autogroup-"), session.stdout


@pytest.mark.skipif(not os.path.exists("/proc/self/autogroup"), reason="no autogroups in this kernel")
def test_a_niced_program_is_kin_where_this_run_is_in_no_session(tmp_path, monkeypatch):
    """CI runs the tests outside any terminal session (no standard input), where the kernel
    leaves every autogroup file of theirs empty: that was read as "no autogroups", no niced
    program was kin, and one started from the run counted as load (CI failed there three
    times). Here the run is in a session of its own, so its programs' files read as CI's do."""
    import backends.threads as threads

    if os.getpriority(os.PRIO_PROCESS, 0) >= 19:
        pytest.skip("this run is niced to 19: nothing it starts is niced below it")
    read, ours = threads.proc_text, threads.proc_text("self", "autogroup")

    def as_in_no_session(pid, name):
        text = read(pid, name)
        return "" if name == "autogroup" and text == ours else text

    monkeypatch.setattr(threads, "proc_text", as_in_no_session)
    before = niced_counted(tmp_path, monkeypatch, "none")
    other = niced_counted(tmp_path, monkeypatch, "other")
    same = niced_counted(tmp_path, monkeypatch, "same")
    assert other > before + 0.5, (before, other)
    assert same < before + 0.3, (before, same)


def test_without_autogroups_niceness_ranks_every_program(tmp_path, monkeypatch):
    import backends.threads as threads

    monkeypatch.setattr(threads, "AUTOGROUP", tmp_path / "absent")  # macOS, another kernel
    assert threads.nice_yields()
    (tmp_path / "off").write_text("0\n")
    monkeypatch.setattr(threads, "AUTOGROUP", tmp_path / "off")
    assert threads.nice_yields()


def test_a_look_too_short_for_the_kernels_ticks_says_no_load(monkeypatch):
    """CPU time comes in ticks of 10 ms: one tick over a look of microseconds read as 77 cores
    busy (a tune whose measuring took no time refused to save). Such a look says nothing, and
    the next one spans from the last look that could tell."""
    from collections import namedtuple

    import backends.threads as threads

    ticks = iter([100.0, 100.01, 100.01])  # the machine's busy seconds at each read
    times = namedtuple("times", "user idle")

    def cpu_times():
        return times(next(ticks), 0.0)

    watch = LoadWatch()
    monkeypatch.setattr(threads.psutil, "cpu_times", cpu_times)
    watch._mark = watch._now()  # the first read, then at once a second, a tick later
    assert watch.busy() == 0.0
    watch._mark = (watch._mark[0] - 1.0, *watch._mark[1:])  # a second later: now it can tell
    assert watch.busy() == pytest.approx(0.01, abs=0.005)
