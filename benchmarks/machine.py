"""What a benchmark that starts an engine itself does first, as dspine's own engines do:
weight repacking off where llama.cpp's AMX kernels crash on this CPU (probed once,
remembered; app/run/weight_repacking.py). Without it such a benchmark dies with SIGSEGV
at its first token on those machines."""

from __future__ import annotations

import sys


def settle_repacking() -> None:
    from app.run.engines import settle_repacking as settle
    from app.settings import load_settings

    settings = load_settings()
    for engine in ("inproc", "server"):
        settle(settings, engine, lambda line: print(line, file=sys.stderr))
