"""Per-request think mode, pure: from what a client can set (chat_template_kwargs,
reasoning_effort, Anthropic's `thinking`, a `:no-think` model-name suffix) to the
body llama-server gets, with the mode's sampling preset where the request sets
nothing of its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backends.sampling import SamplingPresets, preset

# Model-name suffixes for clients that can only set a model name.
SUFFIXES = {":no-think": False, ":nothink": False, ":think": True}
# OpenAI's reasoning_effort values; Qwen3.8's template takes xhigh, medium, low (others raise there).
EFFORT_OFF = {"none", "minimal"}
EFFORT_TO_TEMPLATE = {"low": "low", "medium": "medium", "high": "xhigh", "xhigh": "xhigh"}
SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "min_p", "presence_penalty")


@dataclass(frozen=True)
class Prepared:
    body: dict[str, Any]
    think: bool | None  # None: a raw completion, no chat template to switch


def split_model_name(name: str | None) -> tuple[str | None, bool | None]:
    """`qwen3.8-27b:no-think` -> (`qwen3.8-27b`, False); no suffix -> (name, None)."""
    if not name:
        return name, None
    for suffix, think in SUFFIXES.items():
        if name.lower().endswith(suffix):
            return name[: -len(suffix)], think
    return name, None


def requested_think(body: dict[str, Any]) -> bool | None:
    """What the request itself asks for, strongest first; None when it says nothing."""
    kwargs = body.get("chat_template_kwargs")
    if isinstance(kwargs, dict) and isinstance(kwargs.get("enable_thinking"), bool):
        return kwargs["enable_thinking"]
    effort = body.get("reasoning_effort")
    if isinstance(effort, str):
        return effort.lower() not in EFFORT_OFF
    thinking = body.get("thinking")  # Anthropic Messages: {"type": "enabled" | "disabled" | "adaptive"}
    if isinstance(thinking, dict) and isinstance(thinking.get("type"), str):
        return thinking["type"] != "disabled"
    return split_model_name(body.get("model"))[1]


def prepare(
    body: dict[str, Any], default_think: bool, chat: bool = True, presets: SamplingPresets | None = None
) -> Prepared:
    """The body to send upstream and its think mode. Never changes what the request
    set itself: the preset fills only the sampling fields it left out."""
    out = dict(body)
    model, _ = split_model_name(out.get("model"))
    if model is not None:
        out["model"] = model
    if not chat:
        return Prepared(out, None)
    asked = requested_think(body)
    think = default_think if asked is None else asked
    kwargs = dict(out.get("chat_template_kwargs") or {})
    kwargs["enable_thinking"] = think
    effort = out.pop("reasoning_effort", None)
    if isinstance(effort, str) and effort.lower() in EFFORT_TO_TEMPLATE and think:
        kwargs.setdefault("reasoning_effort", EFFORT_TO_TEMPLATE[effort.lower()])
    out["chat_template_kwargs"] = kwargs
    sampling = preset(think, presets)
    for name in SAMPLING_FIELDS:
        if out.get(name) is None:
            out[name] = getattr(sampling, name)
    return Prepared(out, think)


def draft_length_for(think: bool | None, learned: dict[bool, int] | None, default_think: bool) -> int | None:
    """The draft length a request in this mode should get: the one learned for its
    think mode when the llama-server honours a per-request length (`learned` is None
    when it does not; None: the server's launch length). A raw completion has no mode:
    it gets the served default mode's length, not the patched server's launch maximum."""
    if learned is None:
        return None
    return learned.get(default_think if think is None else think)


def with_draft_length(body: dict[str, Any], length: int | None) -> dict[str, Any]:
    """The body with `speculative.n_max` set, unless the client set its own."""
    if length is None or "speculative.n_max" in body:
        return body
    return {**body, "speculative.n_max": length}
