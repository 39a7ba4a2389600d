"""Speculation counters from a server's Prometheus `/metrics`, pure: one parser for the
schema llama-server and vLLM share (llama.cpp took vLLM's names, #26389):

    <prefix>:spec_decode_num_drafts_total              verify steps that carried a draft
    <prefix>:spec_decode_num_draft_tokens_total        tokens drafted
    <prefix>:spec_decode_num_accepted_tokens_total     drafted tokens the target kept
    <prefix>:spec_decode_num_accepted_tokens_per_pos_total{position="i"}   kept at draft position i

with prefix `llamacpp` or `vllm` (vLLM's series carry labels such as model_name and
engine; several engines' series are summed). The counters are the whole server's: read
before and after a reply, their difference is that reply's only while nothing else runs
on the server, which `Counters.delta` cannot know and the caller must say.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .stats import Stats

PREFIXES = ("llamacpp", "vllm")
_NAMES = {
    "spec_decode_num_drafts": "drafts",
    "spec_decode_num_draft_tokens": "draft_tokens",
    "spec_decode_num_accepted_tokens": "accepted",
    "spec_decode_num_accepted_tokens_per_pos": "per_position",
}
# name{labels} value [timestamp]
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)(?:\s+\S+)?\s*$")
_POSITION = re.compile(r'position="(\d+)"')


@dataclass(frozen=True)
class Counters:
    drafts: int = 0  # verify steps that carried a draft
    draft_tokens: int = 0
    accepted: int = 0
    per_position: tuple[int, ...] = ()  # kept at draft position 0, 1, ...

    def delta(self, before: Counters) -> Counters:
        """What happened between two reads. A counter that fell means the server restarted
        between them: the later read alone is what happened since."""
        pairs = [
            (self.drafts, before.drafts),
            (self.draft_tokens, before.draft_tokens),
            (self.accepted, before.accepted),
        ]
        pairs += list(zip(self.per_position, before.per_position, strict=False))
        if any(after < earlier for after, earlier in pairs):
            return self
        positions = tuple(
            after - (before.per_position[i] if i < len(before.per_position) else 0)
            for i, after in enumerate(self.per_position)
        )
        while positions and positions[-1] == 0:
            positions = positions[:-1]
        drafts, tokens, accepted = (after - earlier for after, earlier in pairs[:3])
        return Counters(drafts, tokens, accepted, positions)


def _base_name(name: str) -> str | None:
    """`vllm:spec_decode_num_drafts_total` -> `drafts`; None for every other series
    (`_created` timestamps that prometheus_client adds to counters included)."""
    prefix, _, rest = name.partition(":")
    if prefix not in PREFIXES or not rest:
        return None
    rest = rest.removesuffix("_total")
    return _NAMES.get(rest)


def parse(text: str) -> Counters | None:
    """The speculation counters in a `/metrics` page; None when it has none (a server
    that does not speculate, or one that does not count it)."""
    totals: dict[str, float] = {}
    positions: dict[int, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line.strip())
        if match is None:
            continue
        name, labels, raw = match.groups()
        field = _base_name(name)
        if field is None:
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        if not math.isfinite(value) or value < 0:
            continue
        if field == "per_position":
            found = _POSITION.search(labels or "")
            if found is not None:
                index = int(found.group(1))
                if index < 1024:  # a draft is never this long: a label that is not a position
                    positions[index] = positions.get(index, 0.0) + value
        else:
            totals[field] = totals.get(field, 0.0) + value
    if not totals and not positions:
        return None
    per_position = tuple(int(positions.get(i, 0.0)) for i in range(max(positions) + 1)) if positions else ()
    return Counters(
        int(totals.get("drafts", 0)), int(totals.get("draft_tokens", 0)), int(totals.get("accepted", 0)), per_position
    )


def apply(stats: Stats, counted: Counters) -> None:
    """A reply's counters into its statistics. Every verify step yields its kept drafts
    plus one token of the target's own, so the steps are the tokens less the kept drafts.
    By position: the first is tested at every draft; a later one when every draft token
    before it was kept (an upper bound where a draft can end early, as llama-server's
    probability floor ends one)."""
    stats.drafted = counted.draft_tokens
    stats.accepted = min(counted.accepted, counted.draft_tokens)
    if stats.generated_tokens:
        stats.verify_steps = max(stats.generated_tokens - stats.accepted, 1)
    if counted.per_position and counted.drafts:
        kept = list(counted.per_position)
        stats.position_tested = [counted.drafts, *kept[:-1]]
        stats.position_kept = kept


def fits_one_reply(counted: Counters, generated: int) -> bool:
    """Whether counters read around one reply can be that reply's alone: each verify step
    that carried a draft yields at least one token, and every kept draft is a token."""
    return counted.accepted <= generated and counted.drafts <= generated
