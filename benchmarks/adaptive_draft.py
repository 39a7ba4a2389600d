"""Adaptive draft length against fixed ones, per think mode, in one run: the
in-process engine on the generated pair of benchmarks/engine_speed.py (a
95M-parameter target and its 1-block drafter with noise), each mode with its
sampling preset and a fixed seed.

Prints tok/s for fixed lengths, for the upstream default (3) and DSpine's
(16), and for adaptive after it learned from two warm-up replies; goal:
adaptive within 3% of the best fixed length, and ahead of a wrong default.

    .venv/bin/python benchmarks/adaptive_draft.py [--tokens 192] [--noise 0.15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.adaptive import AdaptiveDraft  # noqa: E402
from backends.events import End  # noqa: E402
from backends.inproc import InprocEngine  # noqa: E402
from backends.sampling import preset  # noqa: E402
from benchmarks.engine_speed import MESSAGES, make_pair  # noqa: E402

FIXED = (1, 2, 3, 4, 6, 8, 12, 16)


def rate(engine: InprocEngine, think: bool, tokens: int, n_max: int | None, runs: int) -> float:
    sampling = preset(think).with_(seed=1, max_tokens=tokens)
    values = []
    for _ in range(runs):
        end = [e for e in engine.stream(MESSAGES, think=think, sampling=sampling, n_max=n_max) if isinstance(e, End)][-1]
        values.append(end.stats.tokens_per_s)
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=192)
    parser.add_argument("--noise", type=float, default=0.15)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    target, drafter = make_pair(Path(tempfile.mkdtemp(prefix="dspine-adaptive-")), args.noise)
    adaptive = AdaptiveDraft(default=4)
    engine = InprocEngine(str(target), draft_path=str(drafter), n_ctx=2048, n_max=16, adaptive=adaptive).load()
    try:
        for think in (False, True):
            mode = "think on" if think else "think off"
            fixed = {k: rate(engine, think, args.tokens, k, args.runs) for k in FIXED}
            for _ in range(2):  # learn: the engine measures acceptance by position and costs
                rate(engine, think, args.tokens, None, 1)
            chosen = adaptive.choose(think)
            learned = rate(engine, think, args.tokens, None, args.runs)
            best_k = max(fixed, key=fixed.get)
            print(f"{mode}: " + ", ".join(f"k={k} {v:.1f}" for k, v in fixed.items()) + " tok/s")
            print(f"  adaptive chose k={chosen}: {learned:.1f} tok/s; vs best fixed (k={best_k}) {learned / fixed[best_k]:.3f}, "
                  f"vs default 3 {learned / fixed[3]:.3f}, vs default 16 {learned / fixed[16]:.3f}")
    finally:
        engine.close()


if __name__ == "__main__":
    main()
