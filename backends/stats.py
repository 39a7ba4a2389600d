"""Generation statistics, kept in one place for every engine.

Engines fill in counts and times; everything a user reads (tok/s,
acceptance rate, acceptance length) is derived here, so the chat, `run` and
`bench` show the same figures whichever engine produced them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Stats:
    prompt_tokens: int = 0  # processed for this reply
    prompt_cached: int = 0  # reused from the previous turn's cache
    prompt_s: float = 0.0
    generated_tokens: int = 0
    decode_s: float = 0.0
    ttft_s: float | None = None
    drafted: int = 0
    accepted: int = 0
    verify_steps: int = 0  # target passes that produced tokens (1 per token without a drafter)
    draft_s: float = 0.0  # time in the drafter (engines that can see it: in-process)
    verify_s: float = 0.0  # time in the target's verify passes (in-process)
    # Per draft position: how often it was tested (all before it kept) and kept (in-process:
    # exact; llama-server: from the draft counts in its per-token timings, step by step).
    position_tested: list[int] = field(default_factory=list)
    position_kept: list[int] = field(default_factory=list)
    # Per draft position: how many drafts held a token there (llama-server patched; a draft the
    # probability floor ends early reaches fewer positions than asked). Empty: not reported.
    position_reached: list[int] = field(default_factory=list)
    # What changed about drafting (backends/break_even.py), or its state while off or pinned.
    draft_note: str | None = None
    # The engine asked a drafter to draft for this reply (whatever it drafted: a block drafter at
    # its probability floor may draft nothing and still cost its passes). Break-even counts such
    # a reply as drafting, and the readout says "drafted nothing" rather than "no drafter".
    draft_asked: bool = False
    # Copies were looked up in the context for drafts (n-gram drafting on), found or not: a reply
    # with none found says so rather than "no drafter".
    copies_asked: bool = False
    # This kind of turn decodes plainly by choice (a tune's pick, or the no-GPU default: copies
    # on edits only): "new text" or "an edit". The readout says so rather than "no drafter".
    plain_turn: str | None = None
    # Of the counts above, the share of the n-gram drafter chained before the model drafter
    # (drafts looked up in the context); the model drafter's is the rest. Per position too,
    # counted over the steps the n-gram drafter drafted.
    ngram_drafted: int = 0
    ngram_accepted: int = 0
    ngram_steps: int = 0  # verify steps whose draft came from the n-gram drafter
    ngram_verify_s: float = 0.0  # of verify_s, those steps' (in-process)
    ngram_position_tested: list[int] = field(default_factory=list)
    ngram_position_kept: list[int] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float | None:
        return self.generated_tokens / self.decode_s if self.decode_s > 0 else None

    @property
    def prompt_tokens_per_s(self) -> float | None:
        return self.prompt_tokens / self.prompt_s if self.prompt_s > 0 else None

    @property
    def speculative(self) -> bool:
        return self.drafted > 0

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted / drafted: the share of drafted tokens the target kept."""
        return self.accepted / self.drafted if self.drafted else None

    @property
    def acceptance_length(self) -> float | None:
        """Generated tokens per verify step, the figure DSpine's tables quote."""
        return self.generated_tokens / self.verify_steps if self.verify_steps else None

    def copy(self) -> Stats:
        return Stats(**asdict(self))

    def to_json(self) -> dict:
        return {
            **asdict(self),
            "tokens_per_s": self.tokens_per_s,
            "prompt_tokens_per_s": self.prompt_tokens_per_s,
            "acceptance_rate": self.acceptance_rate,
            "acceptance_length": self.acceptance_length,
        }

    def summary(self) -> str:
        parts = [f"{self.generated_tokens} tokens"]
        if self.tokens_per_s:
            parts.append(f"{self.tokens_per_s:.1f} tok/s")
        if self.ttft_s is not None:
            parts.append(f"first token {self.ttft_s:.2f} s")
        if self.prompt_tokens_per_s:
            parts.append(f"prompt {self.prompt_tokens} at {self.prompt_tokens_per_s:.0f} tok/s")
        if self.speculative:
            parts.append(
                f"accepted {self.accepted}/{self.drafted} ({self.acceptance_rate:.0%}), "
                f"{self.acceptance_length:.2f} tokens per step"
            )
            if self.ngram_drafted:
                parts.append(f"n-gram kept {self.ngram_accepted}/{self.ngram_drafted} in {self.ngram_steps} steps")
        elif self.draft_asked:
            parts.append("the drafter drafted nothing")
        elif self.copies_asked:
            parts.append("no copies found to draft")
        elif self.plain_turn:
            parts.append(f"no drafting on {self.plain_turn} here")
        elif not self.draft_note:
            parts.append("no drafter")
        if self.draft_note and not self.speculative:
            parts.append(self.draft_note)  # e.g. a remote server that reports no acceptance
        return ", ".join(parts)


def count_positions(stats: Stats, drafted: int, accepted: int) -> None:
    """One verify step of `drafted` tokens with the first `accepted` kept: position i was
    tested when every draft token before it was kept."""
    _count(stats.position_tested, stats.position_kept, drafted, accepted)


def count_ngram_step(stats: Stats, drafted: int, accepted: int) -> None:
    """The same step counted once more as the n-gram drafter's (the totals hold it already)."""
    stats.ngram_drafted += drafted
    stats.ngram_accepted += accepted
    stats.ngram_steps += 1
    _count(stats.ngram_position_tested, stats.ngram_position_kept, drafted, accepted)


def _count(tested: list[int], kept: list[int], drafted: int, accepted: int) -> None:
    while len(tested) < drafted:
        tested.append(0)
        kept.append(0)
    for i in range(min(accepted + 1, drafted)):
        tested[i] += 1
    for i in range(min(accepted, drafted)):
        kept[i] += 1
