"""The in-process engine's thread count follows a load that comes and goes between replies
(issue 68): a spinning process beside it (bounded, killed by its PID) takes a core; when it
is gone the engine runs on every core again."""

from __future__ import annotations

import subprocess
import sys

import pytest

from backends.events import End
from backends.inproc import InprocEngine
from backends.sampling import Sampling
from backends.threads import physical_cores

pytestmark = pytest.mark.skipif(physical_cores() < 2, reason="one core: nothing to leave free")


def reply(engine: InprocEngine) -> None:
    sampling = Sampling(temperature=0.0, max_tokens=4)
    events = list(engine.stream([{"role": "user", "content": "hi"}], think=False, sampling=sampling))
    assert isinstance(events[-1], End)


def test_the_engine_gives_a_core_up_beside_a_busy_program_and_takes_it_back(models):
    engine = InprocEngine(str(models["dense"]["target"]), n_ctx=512).load()
    try:
        physical = physical_cores()
        assert engine.thread_choice is not None
        if engine.thread_choice.threads < physical:  # a test run is not always alone on its machine
            pytest.skip(f"other programs keep {engine.thread_choice.busy:.1f} cores busy before the test")
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        try:
            reply(engine)  # what ran since the load: the spinner's start, partly
            assert engine._load is not None
            engine._load.settle(0.5)
            reply(engine)
            busy = engine.thread_choice
        finally:
            spinner.kill()
            spinner.wait(timeout=30)
        assert busy is not None and busy.threads == physical - 1 and "other programs kept" in busy.why
        engine._load.busy()  # the look that covered the spinner's last moments
        engine._load.settle(0.5)
        reply(engine)
        assert engine.thread_choice.threads == physical
        fixed = InprocEngine(str(models["dense"]["target"]), n_ctx=512, threads=1).load()
        assert fixed.thread_choice is not None and fixed.thread_choice.threads == 1
        fixed.close()
    finally:
        engine.close()
