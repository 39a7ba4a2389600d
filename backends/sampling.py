"""Sampling settings and each model's per-mode presets (its model card's; FACTS)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any


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


# The fields a model's preset may set (a catalog's `sampling` table); seed and length are the request's.
PRESET_FIELDS = ("temperature", "top_p", "top_k", "min_p", "presence_penalty")

# The order the settings apply in, as llama-server's `samplers` names them: the temperature
# before top-p and min-p, as transformers (whose generation configs the model cards' values
# are), vLLM, Ollama and the in-process engine (backends/speculative.distribution) apply it.
# llama-server's own order puts the temperature last, so top-p cut the untempered distribution:
# with SmolLM2's card (temperature 0.2, top-p 0.9) it kept several tokens where the card keeps
# one, and the same settings sampled other texts on each engine (its rewrites of a file strayed
# from the file more often). Every sampler llama-server has is named (those left out would not
# run): the ones dspine never sets do nothing at their defaults.
LLAMA_SERVER_ORDER = ("penalties", "dry", "top_n_sigma", "top_k", "temperature", "typ_p", "top_p", "min_p", "xtc")


@dataclass(frozen=True)
class SamplingPresets:
    """What a model samples with in each think mode when the user set nothing (its model card's
    advice). A model without a thinking mode has one preset for both."""

    thinking: Sampling
    non_thinking: Sampling

    def for_mode(self, think: bool) -> Sampling:
        return self.thinking if think else self.non_thinking


# Qwen3.8's card (FACTS): the presets of every model whose catalog entry gives none of its own.
THINKING = Sampling(temperature=1.0, top_p=0.95, top_k=20, min_p=0.0, presence_penalty=0.0)
NON_THINKING = Sampling(temperature=0.7, top_p=0.8, top_k=20, min_p=0.0, presence_penalty=1.5)
QWEN_CARD = SamplingPresets(THINKING, NON_THINKING)


def presets_identity(presets: SamplingPresets) -> str:
    """The presets in one line: what a tune measured under (a change makes it stale)."""

    def one(s: Sampling) -> str:
        fields = f"temp {s.temperature:g} top_p {s.top_p:g} top_k {s.top_k} min_p {s.min_p:g}"
        return f"{fields} presence {s.presence_penalty:g}"

    return f"thinking: {one(presets.thinking)}; non-thinking: {one(presets.non_thinking)}"


def preset(think: bool, presets: SamplingPresets | None = None) -> Sampling:
    return (presets or QWEN_CARD).for_mode(think)


def presets_from_table(table: Any, where: str) -> SamplingPresets:
    """A catalog's `sampling` table: `non_thinking` and `thinking` tables of PRESET_FIELDS (one of
    them: both modes sample alike). Raises ValueError naming the key that is wrong."""
    if not isinstance(table, dict):
        raise ValueError(f"{where}: sampling must be a table with non_thinking and/or thinking")
    unknown = sorted(set(table) - {"thinking", "non_thinking"})
    if unknown:
        raise ValueError(f"{where}: sampling has {', '.join(unknown)}; it takes non_thinking and thinking")
    modes = {mode: _sampling(table[mode], f"{where}.sampling.{mode}") for mode in table}
    if not modes:
        raise ValueError(f"{where}: sampling names neither non_thinking nor thinking")
    either = modes.get("non_thinking") or modes["thinking"]
    return SamplingPresets(modes.get("thinking", either), modes.get("non_thinking", either))


def _sampling(table: Any, where: str) -> Sampling:
    if not isinstance(table, dict):
        raise ValueError(f"{where} must be a table of {', '.join(PRESET_FIELDS)}")
    unknown = sorted(set(table) - set(PRESET_FIELDS))
    if unknown:
        raise ValueError(f"{where}: unknown {', '.join(unknown)} (it takes {', '.join(PRESET_FIELDS)})")
    values: dict[str, Any] = {}
    for name, value in table.items():
        integral = name == "top_k"
        if isinstance(value, bool) or not isinstance(value, int if integral else (int, float)):
            raise ValueError(f"{where}.{name} must be {'a whole number' if integral else 'a number'}, not {value!r}")
        if not math.isfinite(value) or value < 0 or (name in ("top_p", "min_p") and value > 1):
            raise ValueError(f"{where}.{name} = {value} is out of range")
        values[name] = value
    # A field the card leaves out is neutral: temperature 1, no top-k, top-p or min-p cut, no
    # penalty (write top_k = 50 where a card means transformers' default, as SmolLM2's does).
    return Sampling(**{"temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "presence_penalty": 0.0, **values})
