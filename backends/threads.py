"""How many threads llama.cpp runs on: the cores other programs leave free (issue 68).

llama.cpp's threads meet at a barrier after every operation of a pass: one thread that the
kernel parks behind another program holds all of them up. Measured here (2 cores, SmolLM2,
beside one busy process at nice 0): llama-server at `-t 2` fell from 80.0 to 7.3 tok/s while
`-t 1` kept 54.1. So the count is the physical cores minus those others keep busy, sampled
over a short window; never more than the physical cores (hyper-threads share a core's units).
A niced program (a build at nice 10, an indexer) yields its core to ours only where the kernel
weighs niceness across the machine: with autogroups (Linux's default on desktops, a group for
each terminal session) it ranks a program only against its own session's, and a `nice make` in
another terminal takes its whole share beside the chat (measured here: llama-server at `-t 2`
beside one at nice 19 in another session drafted 0.6 tok/s where it drafted 20 alone). There
it counts as any program does, unless it shares this session's group (`nice make &` in the same
shell), where it still yields. The `threads` setting (0: this rule) fixes the count."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import psutil

# The window an engine's start samples, overlapping its model load or fit plan (between replies
# the time since the last look is the window): ten of the kernel's 100 Hz ticks a core are
# enough to tell a busy core from an idle one, and a start waits for no more than this.
SAMPLE_S = 0.1
# Others' use of a core counts once it passes this share of it: a desktop's background
# (a browser tab, a terminal) stays below; a compiler, a test run or a spinning loop does not.
TAKEN_SHARE = 0.5


# 1 where Linux groups scheduling by session (CONFIG_SCHED_AUTOGROUP, on by default).
AUTOGROUP = Path("/proc/sys/kernel/sched_autogroup_enabled")


# How often the niced programs of this session's group are looked for again (a walk of every
# process: a few milliseconds on a desktop's few hundred).
KIN_REFRESH_S = 2.0
# The kernel counts CPU time in ticks of 10 ms: over a shorter look one tick reads as a whole
# core or more (a tune measured in no time read 77 cores). A look shorter than this says nothing.
MIN_LOOK_S = 0.05


def nice_yields() -> bool:
    """Whether a niced program's time is free for llama.cpp: not where autogroups schedule each
    session apart (a niced program in another terminal competes at full weight there)."""
    try:
        return AUTOGROUP.read_text().strip() != "1"
    except OSError:
        return True  # no autogroups (another kernel, macOS): niceness ranks every program


# What autogroup_of names the group of the programs that never started a session of their own
# (a service started by init, a command run without a terminal): the kernel leaves their file
# empty, and they rank by niceness against each other as any autogroup's programs do.
ROOT_AUTOGROUP = "/"


def proc_text(pid: int | str, name: str) -> str | None:
    """A process's file in /proc (`autogroup`, `cgroup`), or None where it cannot be read."""
    try:
        return Path(f"/proc/{pid}/{name}").read_text()
    except OSError:
        return None


def autogroup_of(pid: int | str) -> str | None:
    """The scheduling group Linux put a process in (`/autogroup-N`, ROOT_AUTOGROUP), or None
    where the kernel has no autogroups or the process is gone. CI runs its tests outside any
    terminal session: reading that empty file as "none" left its niced programs out of kin."""
    text = proc_text(pid, "autogroup")
    if text is None:
        return None
    return text.split()[0] if text.strip() else ROOT_AUTOGROUP


def cgroup_of(pid: int | str) -> str | None:
    """A process's control groups (autogroups only rank programs inside the same one)."""
    return proc_text(pid, "cgroup")


class NicedKin:
    """The programs niced below this one in its own autogroup (and control group), and the CPU
    time they have used since this was made: they yield to llama.cpp, so it is not others' load.
    Each is looked at directly while it runs, and through its parent's reaped-children time once
    it has ended (a build's compilers live for less than a refresh), the part seen directly
    credited, so nothing counts twice. Looked for again every KIN_REFRESH_S; one that started
    since this was made counts from its start."""

    def __init__(self, ours: set[int], children_ours: bool = False) -> None:
        """`children_ours`: the children of `ours` are counted as theirs (LoadWatch's
        `children`), so never as kin, which would count them twice."""
        self._group = (autogroup_of("self"), cgroup_of("self"))
        self._ours = ours
        self._children_ours = children_ours
        self._nice = max((_nice_of(pid) for pid in ours), default=0)
        self._since = time.time()
        self._kin: list[psutil.Process] = []
        self._seen: dict[tuple[int, float], tuple[float, float]] = {}  # (own, reaped) at the last look
        self._credit: dict[int, float] = {}  # a parent pid: its ended kin children's time counted already
        self._found_at = 0.0
        self.total = 0.0
        self._find()

    def look(self) -> float:
        """Their CPU seconds since this was made."""
        running = []
        for process in self._kin:
            try:
                if not process.is_running():  # ended, or its pid taken by another program
                    raise psutil.NoSuchProcess(process.pid)
                times, key = process.cpu_times(), (process.pid, process.create_time())
            except psutil.Error:
                last = self._seen.get((process.pid, process.info.get("create_time") or 0.0))
                parent = process.info.get("ppid")
                if last is not None and parent is not None:
                    self._credit[parent] = self._credit.get(parent, 0.0) + sum(last)
                continue
            running.append(process)
            own, reaped = times.user + times.system, times.children_user + times.children_system
            start = (0.0, 0.0) if key[1] >= self._since else (own, reaped)
            was_own, was_reaped = self._seen.get(key, start)
            credit = self._credit.pop(process.pid, 0.0)
            grown = max(0.0, reaped - was_reaped)
            if credit > grown:
                self._credit[process.pid] = credit - grown  # its ended child not reaped yet
            self.total += max(0.0, own - was_own) + max(0.0, grown - credit)
            self._seen[key] = (own, reaped)
        self._kin = running
        if time.monotonic() - self._found_at > KIN_REFRESH_S:
            self._find()  # after the look: an ended kin has credited its parent first
        return self.total

    def _find(self) -> None:
        self._found_at = time.monotonic()
        if self._group[0] is None:
            return
        niced = [p for p in niced_above(self._nice) if p.pid not in self._ours]
        kin = [p for p in niced if not (self._children_ours and p.info.get("ppid") in self._ours)]
        self._kin = [p for p in kin if (autogroup_of(p.pid), cgroup_of(p.pid)) == self._group]
        pids = {p.pid for p in self._kin}
        self._seen = {k: v for k, v in self._seen.items() if k[0] in pids}
        self._credit = {pid: v for pid, v in self._credit.items() if pid in pids}


INFO = ["nice", "ppid", "create_time"]


def niced_above(nice: int) -> list[psutil.Process]:
    """The programs niced below `nice`, each with its `info` (INFO). Not psutil's process_iter:
    it keeps a table of the pids it saw, and a pid that went to another program since its last
    look (pids wrap at 32,768 on many machines: a long session reuses them) it leaves out of that
    look altogether: a niced build on a reused pid was counted as load. The niceness first, by
    one system call a pid: the rest are read for the few left (this runs every KIN_REFRESH_S on
    the chat's load thread)."""
    found = []
    for pid in psutil.pids():
        try:
            if os.getpriority(os.PRIO_PROCESS, pid) <= nice:
                continue
            process = psutil.Process(pid)
            process.info = process.as_dict(INFO)
        except (OSError, psutil.Error):
            continue  # ended since pids() listed it
        if (process.info.get("nice") or 0) > nice:
            found.append(process)
    return found


def _nice_of(pid: int) -> int:
    try:
        return psutil.Process(pid).nice()
    except psutil.Error:
        return 0


@dataclass(frozen=True)
class ThreadChoice:
    threads: int
    physical: int
    busy: float  # cores other programs kept busy in the sample (None-like -1: not sampled)
    why: str


def physical_cores() -> int:
    return psutil.cpu_count(logical=False) or os.cpu_count() or 4


def pick(physical: int, busy: float, setting: int = 0) -> ThreadChoice:
    """Pure: the count for `physical` cores of which others keep `busy` busy."""
    if setting > 0:
        return ThreadChoice(setting, physical, busy, "the threads setting")
    taken = min(physical - 1, int(busy + 1 - TAKEN_SHARE)) if busy >= 0 else 0
    threads = max(1, physical - taken)
    if taken <= 0:
        return ThreadChoice(threads, physical, busy, f"every physical core ({physical}): the others are idle")
    return ThreadChoice(
        threads,
        physical,
        busy,
        f"{threads} of {physical} physical cores: other programs kept {busy:.1f} busy "
        "(a thread parked behind them would hold every other one up)",
    )


class LoadWatch:
    """Others' load since the last look: the whole machine's busy time less this process's own
    (its llama.cpp threads), over the wall time between. Non-blocking after the first."""

    def __init__(self, also_ours: tuple[int, ...] = (), children: bool = False) -> None:
        """`also_ours`: other processes whose use counts as this one's (the llama-server it
        runs); a command the chat runs is load like any other program's. `children`: the
        ended children's use counts as this one's too (a tune's llama-servers, each closed
        before the next look)."""
        self._children = children
        self._nice_yields = nice_yields()
        self._mine = [psutil.Process()]
        for pid in also_ours:
            with contextlib.suppress(psutil.Error):  # gone already: nothing of it to count
                self._mine.append(psutil.Process(pid))
        # Where niced time counts as busy, that of this session's own niced programs does not.
        self._kin = None if self._nice_yields else NicedKin({p.pid for p in self._mine}, children)
        self._mark = self._now()

    def _now(self) -> tuple[float, float, float]:
        times = psutil.cpu_times()
        idle = times.idle + getattr(times, "iowait", 0.0) + (getattr(times, "nice", 0.0) if self._nice_yields else 0.0)
        busy = sum(times) - idle - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)
        used = 0.0
        for process in self._mine:
            try:
                own = process.cpu_times()
                if self._nice_yields and process.nice() > 0:
                    continue  # run niced (`nice dspine chat`): its time is in `nice`, not in `busy`
            except psutil.Error:
                continue  # gone (a server that stopped)
            used += own.user + own.system
            if self._children:
                used += own.children_user + own.children_system
        if self._kin is not None:
            used += self._kin.look()
        return time.monotonic(), busy, used

    def settle(self, window_s: float) -> None:
        """Wait out what is left of a `window_s` sample since the last look."""
        left = window_s - (time.monotonic() - self._mark[0])
        if left > 0:
            time.sleep(left)

    def busy(self) -> float:
        """Cores others kept busy since the last call (or since this watch was made)."""
        then, busy_then, own_then = self._mark
        now = self._now()
        wall = now[0] - then
        if wall < MIN_LOOK_S:
            return 0.0  # too short to tell: the next look spans from the last one that could
        self._mark = now
        return max(0.0, (now[1] - busy_then) - (now[2] - own_then)) / wall


def choose(setting: int = 0, sample_s: float = SAMPLE_S) -> ThreadChoice:
    """The count to start an engine with: sampled over `sample_s` (no sample where the setting fixes it)."""
    physical = physical_cores()
    if setting > 0:
        return pick(physical, -1.0, setting)
    watch = LoadWatch()
    watch.settle(sample_s)
    return pick(physical, watch.busy())


class RecentLoad:
    """Others' load over about the last second, kept by a daemon thread that looks every
    `every_s`: what an engine asks before a reply, fresh (a build that just started or ended,
    not an average since the last reply, which a long tool call would skew) and without waiting."""

    def __init__(self, every_s: float = 0.25, kept: int = 4) -> None:
        self._watch = LoadWatch()
        self._samples: deque[float] = deque(maxlen=kept)
        self._every = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dspine-load", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self._samples.append(self._watch.busy())

    def busy(self) -> float | None:
        """The mean of the last looks (None before the first)."""
        samples = list(self._samples)
        return sum(samples) / len(samples) if samples else None

    def close(self) -> None:
        self._stop.set()


def disturbed(busy_before: float, busy_during: float) -> bool:
    """Whether a load came while a reply ran that was not there when its thread count was
    chosen (a build that started mid-reply): its speed says nothing about drafting."""
    return busy_during - busy_before >= TAKEN_SHARE
