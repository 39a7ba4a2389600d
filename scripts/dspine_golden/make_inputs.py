#!/usr/bin/env python3
"""The inputs of the server's DSpine golden drafts: for each seed, the tiny target's embedding
and head, a prompt, its taps and the target's greedy next token (tests/support/
dspine_golden_target.py), into tests/engines/golden/dspine/server/inputs-sSEED.npz.

Runs in dspine's own venv (numpy, gguf), from the repository root:
    .venv/bin/python scripts/dspine_golden/make_inputs.py
make_all.sh then runs the reference on each (make_golden.py --inputs)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np

from tests.support.dspine_golden_target import GOLDEN, SEEDS, inputs, prompt, write_target


def main() -> None:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        target = write_target(Path(folder) / "target.gguf")
        for seed in SEEDS:
            data = inputs(target, prompt(seed))
            margin = float(data["anchor_margin"])
            if margin < 0.05:
                raise SystemExit(
                    f"seed {seed}: the target's next token wins by {margin:.4f} only; choose another prompt"
                )
            out = GOLDEN / f"inputs-s{seed}.npz"
            np.savez(out, **data)
            print(
                f"seed {seed}: prompt {data['prompt'].tolist()} anchor {int(data['anchor'])}",
                f"margin {margin:.3f} -> {out}",
            )


if __name__ == "__main__":
    main()
