"""`dspine bench --depth`: whether a depth's context fits, asked of the fit plan.

A depth needs a context of depth + prompt + reply tokens. Its memory (the target's
KV cache at that length, the drafter's next to it) is what `dspine fit` plans for
that context on this GPU: a depth is run only where the plan keeps the whole
target and every drafter being measured on the GPU, and is otherwise skipped with
the plan's own account of why. Without a GPU the plan is a CPU plan in system RAM.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from backends.gguf_header import read_local

from ..fit.hardware import Hardware, detect
from ..fit.planner import Plan
from ..fit.service import FitRequest, fit
from ..fit.shape import shape_from_header
from ..models.catalog import Catalog
from ..settings import Settings
from ..units import format_bytes


def plan_check(
    target: Path, drafters: list[Path], settings: Settings, hardware: Hardware | None = None, measure: bool = True
) -> Callable[[int], str | None]:
    """why_not(n_ctx): None when the fit plan runs the target, with each drafter, at a
    context of n_ctx tokens as it must be benchmarked; else the reason. `measure`: compute
    buffers from llama.cpp's dry run (cached), as `dspine fit` does."""
    hardware = hardware or detect()
    trained = shape_from_header(read_local(target)).n_ctx_train

    def why_not(n_ctx: int) -> str | None:
        if trained and n_ctx > trained:
            return f"a {n_ctx:,}-token context is beyond the {trained:,} tokens the target was trained for"
        candidates: list[Path | None] = [*drafters] or [None]
        for drafter in candidates:
            draft = str(drafter) if drafter is not None else "none"
            request = FitRequest(str(target), draft=draft, ctx=n_ctx, measure=measure)
            result = fit(request, Catalog(), settings, hardware)
            reason = _shortfall(result.plan, drafter, bool(hardware.gpus))
            if reason:
                return f"at a {n_ctx:,}-token context the fit plan {reason}"
        return None

    return why_not


def _shortfall(plan: Plan, drafter: Path | None, gpu: bool) -> str | None:
    if not gpu:
        if plan.fits:
            return None
        return f"needs {format_bytes(sum(plan.ram.values()))} of system RAM, more than is free"
    shape = plan.target.shape
    whole = plan.gpu_layers >= (shape.n_layer + 1 if shape else 0)
    if plan.fits and whole and (drafter is None or plan.drafter is not None):
        return None
    # The planner's line on what each drafter leaves for context says why, in its words.
    trade = next((r for r in plan.reasons if r.startswith("With ")), "")
    if not whole and shape is not None:
        what = f"puts only {max(plan.gpu_layers - 1, 0)} of the target's {shape.n_layer} blocks on the GPU"
    elif not plan.fits:
        what = f"needs {format_bytes(plan.total)} of GPU memory, {format_bytes(plan.budget)} is free"
    else:
        what = f"has no room for the drafter {drafter.name if drafter else ''} next to the target"
    return f"{what}. {trade}".strip()
