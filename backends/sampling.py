"""Sampling settings and the per-mode presets of the Qwen3.8 model card (FACTS)."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.7
    top_p: float = 0.8
    top_k: int = 20
    min_p: float = 0.0
    presence_penalty: float = 0.0
    seed: int | None = None
    max_tokens: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0

    def with_(self, **changes) -> Sampling:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


THINKING = Sampling(temperature=1.0, top_p=0.95, top_k=20, min_p=0.0, presence_penalty=0.0)
NON_THINKING = Sampling(temperature=0.7, top_p=0.8, top_k=20, min_p=0.0, presence_penalty=1.5)


def preset(think: bool) -> Sampling:
    return THINKING if think else NON_THINKING
