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
from tests.conftest import wait_for

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
            # The engine's last second of load (its daemon looks four times a second) shows it.
            assert engine._recent is not None
            wait_for(lambda: (engine._recent.busy() or 0) > 0.9, timeout=10, what="the spinner in the load")
            reply(engine)
            busy = engine.thread_choice
        finally:
            spinner.kill()
            spinner.wait(timeout=30)
        assert busy is not None and busy.threads == physical - 1 and "other programs kept" in busy.why
        wait_for(lambda: (engine._recent.busy() or 0) < 0.3, timeout=10, what="the load to go")
        reply(engine)
        assert engine.thread_choice.threads == physical
        fixed = InprocEngine(str(models["dense"]["target"]), n_ctx=512, threads=1).load()
        assert fixed.thread_choice is not None and fixed.thread_choice.threads == 1
        fixed.close()
    finally:
        engine.close()
