"""The drafter trainer's JAX forward (scripts/train_dspine/) against the authors' reference:
the golden files in tests/engines/golden/dspine/ (SpecForge's `DSpineDraftModel` on tiny
random weights) are reproduced, and breaking one part of DSpine makes the check fail.

JAX is not one of dspine's dependencies (the trainer has its own venv), so this runs the
check with an interpreter that has JAX: this one if it has, else $TRAIN_DSPINE_PYTHON or
/work/train-venv/bin/python; with none of them it skips."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _python_with_jax() -> str | None:
    if importlib.util.find_spec("jax") is not None:
        return sys.executable
    candidate = os.environ.get("TRAIN_DSPINE_PYTHON", "/work/train-venv/bin/python")
    if not Path(candidate).is_file():
        return None
    probe = subprocess.run([candidate, "-c", "import jax, optax"], capture_output=True, timeout=120)
    return candidate if probe.returncode == 0 else None


PYTHON = _python_with_jax()
pytestmark = pytest.mark.skipif(PYTHON is None, reason="no Python with jax and optax (the trainer's own venv)")


def _run(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false", "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [PYTHON, "-c", code], cwd=ROOT / "scripts", capture_output=True, text=True, timeout=600, env=env
    )


def test_the_trainers_forward_reproduces_the_reference_and_a_broken_part_fails():
    done = _run("from train_dspine.check import run_checks\nfor line in run_checks(): print(line)")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    golden = [line for line in lines if line.startswith("golden ")]
    # all four reference cases, each with identical candidates and selections
    assert len(golden) == 4, lines
    assert all("candidates and selections equal" in line for line in golden)
    mutants = [line for line in lines if line.startswith("mutant ")]
    assert {line.split()[1] for line in mutants} == {"scalar-gate", "no-rms-scale", "lattice-ignores-predecessor"}
    assert any(line.startswith("zeroed writes == the DFlash twin") for line in lines)
    # the objective's checks: refinement shared with inference, the schedule, replacement,
    # the twin's loss, gradients reaching the injection
    assert len([line for line in lines if line.startswith("objective: ")]) == 5, lines


def test_a_scalar_gate_is_caught_file_by_file():
    # the golden comparison itself, not only run_checks' summary: a scalar gate changes the
    # base logits of every file beyond the tolerance
    done = _run(
        "from train_dspine.golden import run_golden, passes\n"
        "for name, r in run_golden(mutant_name='scalar-gate'): print(name, passes(r), r['base_logits'])"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split() for line in done.stdout.splitlines()]
    assert len(rows) == 4 and all(row[1] == "False" and float(row[2]) > 1e-2 for row in rows), rows
