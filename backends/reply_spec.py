"""A reply's own speculation figures, where a server other than llama-server puts them
(llama-server's are its `timings`, read in openai_stream.apply_timings):

- vLLM, started with `--per-request-spec-decode-metrics`: the last chunk's (or the whole
  reply's) `metrics.speculative_decoding` with `num_draft_tokens`,
  `num_accepted_draft_tokens`, `num_spec_steps`, `num_spec_tokens` and
  `acceptance_histogram` (steps by how many of their drafts were kept), and in its
  detailed form `per_step_drafted` / `per_step_accepted`.
- SGLang >= 0.5.19, asked with `return_spec_tokens_details`: a trailing chunk's (or the
  reply's) `sglext.spec_tokens_details` with `spec_num_proposed_drafts`,
  `spec_num_correct_drafts`, `spec_verify_ct` and `spec_correct_drafts_histogram`.
"""

from __future__ import annotations

import math
from typing import Any

from .stats import Stats, count_positions

# A reply's figures are a server's words: counts past these are not a reply's, and would
# only make the per-position loops below run without end.
MAX_STEPS = 65536  # verify steps in one reply
MAX_LENGTH = 1024  # tokens one step drafts


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return int(value)


def _counts(values: Any) -> list[int] | None:
    if not isinstance(values, list) or len(values) > MAX_STEPS:
        return None
    counted = [_count(v) for v in values]
    return None if any(c is None for c in counted) else [c for c in counted if c is not None]


def apply_vllm(stats: Stats, metrics: Any) -> bool:
    """vLLM's per-request figures into the reply's statistics; False when the chunk has none."""
    spec = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    if not isinstance(spec, dict):
        return False
    drafted, accepted = _count(spec.get("num_draft_tokens")), _count(spec.get("num_accepted_draft_tokens"))
    if drafted is None or accepted is None:
        return False
    stats.drafted, stats.accepted = drafted, min(accepted, drafted)
    steps = _count(spec.get("num_spec_steps"))
    if stats.generated_tokens:
        stats.verify_steps = max(stats.generated_tokens - stats.accepted, 1)
    elif steps:
        stats.verify_steps = steps
    stats.position_tested, stats.position_kept = [], []
    step_drafted, step_accepted = _counts(spec.get("per_step_drafted")), _counts(spec.get("per_step_accepted"))
    histogram = _counts(spec.get("acceptance_histogram"))
    length = _count(spec.get("num_spec_tokens"))
    if (
        step_drafted is not None
        and step_accepted is not None
        and len(step_drafted) == len(step_accepted)
        and max(step_drafted, default=0) <= MAX_LENGTH
    ):
        for step, kept in zip(step_drafted, step_accepted, strict=True):
            count_positions(stats, step, min(kept, step))
    elif histogram is not None and length:
        _positions_from_histogram(stats, histogram, length)
    return True


def _positions_from_histogram(stats: Stats, histogram: list[int], length: int) -> None:
    """Steps counted by how many of their `length` drafts were kept."""
    if length > MAX_LENGTH or sum(histogram) > MAX_STEPS:
        return
    for kept, steps_with in enumerate(histogram):
        for _ in range(steps_with):
            count_positions(stats, length, min(kept, length))


def apply_sglang(stats: Stats, sglext: Any) -> bool:
    """SGLang's per-request figures into the reply's statistics; False when it has none."""
    details = sglext.get("spec_tokens_details") if isinstance(sglext, dict) else None
    if isinstance(details, list):  # n > 1 gives one per choice; dspine asks for one
        details = details[0] if details else None
    if not isinstance(details, dict):
        return False
    drafted, accepted = _count(details.get("spec_num_proposed_drafts")), _count(details.get("spec_num_correct_drafts"))
    steps = _count(details.get("spec_verify_ct"))
    if drafted is None or accepted is None:
        return False
    stats.drafted, stats.accepted = drafted, min(accepted, drafted)
    if stats.generated_tokens:
        stats.verify_steps = max(stats.generated_tokens - stats.accepted, 1)
    elif steps:
        stats.verify_steps = steps
    stats.position_tested, stats.position_kept = [], []
    histogram = _counts(details.get("spec_correct_drafts_histogram"))
    # A chain drafts the same number every step; the histogram counts steps by drafts kept.
    length = drafted // steps if steps and drafted % steps == 0 else None
    if histogram is not None and length:
        _positions_from_histogram(stats, histogram, length)
    return True
