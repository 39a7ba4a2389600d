"""What a remote OpenAI-compatible server says about itself, pure: which server it is,
the model it serves, the context one request may hold and the speculation it runs, read
from the answers `remote_probe` gathers. Each field names where it comes from:

- `/v1/models` (all): `data[].id`; `owned_by` is "llamacpp", "vllm" or "sglang";
  vLLM and SGLang put the window in `data[].max_model_len`, llama-server its slot's
  in `data[].meta.n_ctx`.
- llama-server `/props`: `default_generation_settings.n_ctx` (one slot's context),
  `default_generation_settings.params["speculative.types"]`, and dspine's patch adds
  `dspine_per_request_draft`.
- llama-server `/slots`: `[].speculative`, whether a slot drafts (`/props` cannot say).
- SGLang `/server_info` (before 0.5.7 only `/get_server_info`): `version`, `context_length`
  (the command line's, usually null), `speculative_algorithm`, `speculative_draft_model_path`,
  `speculative_num_draft_tokens`, `internal_states[].avg_spec_accept_length`.
  From 0.5.19 a request's `return_spec_tokens_details` brings the reply's own figures.
- `/metrics`: `spec_metrics.parse`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from .terminal_text import one_line


def shown_url(url: str) -> str:
    """A URL as messages, logs and screens show it: a password in it (`http://me:pw@host/v1`,
    sent as basic auth) is `***`."""
    try:
        parsed = urlparse(url)
        password = parsed.password
    except ValueError:
        return url
    if not password:
        return url
    user = parsed.username or ""
    host = parsed.netloc.rpartition("@")[2]
    return parsed._replace(netloc=f"{user}:***@{host}").geturl()


KINDS = {"llamacpp": "llama-server", "vllm": "vLLM", "sglang": "SGLang"}
SAID_MAX = 120  # characters of a server's own words kept for a readout


def said(text: str) -> str:
    """A server's words for a readout: one visible line (terminal_text.one_line), bounded."""
    shown = one_line(text)
    return shown if len(shown) <= SAID_MAX else shown[: SAID_MAX - 1] + "\u2026"


GENERIC = "an OpenAI-compatible server"


@dataclass(frozen=True)
class ServedModel:
    id: str
    owner: str  # owned_by, as the server says it
    window: int | None  # max_model_len / meta.n_ctx, where the entry has one


@dataclass(frozen=True)
class RemoteServer:
    url: str  # the OpenAI base, ending in /v1
    kind: str  # llama-server, vLLM, SGLang or GENERIC
    model: str  # the served model requests name
    models: tuple[str, ...]  # every model it serves
    context: int | None  # tokens one request may hold; None: the server does not say
    context_from: str  # where the window was read, for doctor
    speculation: str | None  # what the server says it drafts with; None: it does not say
    per_reply_counts: bool  # llama-server: draft counts in every reply's timings
    counters: bool  # /metrics carries the speculation counters (spec_metrics)
    per_request_draft: bool  # a request's speculative.n_max is honoured (0 turns drafting off)
    # Fields every request carries to have the reply's own figures back (SGLang >= 0.5.19).
    request_extra: tuple[tuple[str, object], ...] = ()
    server_average: bool = False  # only a server-wide running average of acceptance (older SGLang)

    @property
    def shown_url(self) -> str:
        """`url` as messages show it: a password in it as `***`."""
        return shown_url(self.url)

    @property
    def acceptance_source(self) -> str:
        if self.per_reply_counts:
            return "each reply's own figures"
        if self.server_average:
            return "the server's running average (no per-reply figures from this version)"
        if self.counters:
            return "the server's /metrics counters, read before and after each reply"
        return "not reported by this server"


def served_models(listing: Any) -> list[ServedModel]:
    """The `data` of a `/v1/models` answer; ValueError when it is not that shape."""
    if not isinstance(listing, dict) or not isinstance(listing.get("data"), list):
        raise ValueError("its /v1/models answer has no `data` list")
    found = []
    for entry in listing["data"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not entry["id"]:
            raise ValueError("its /v1/models lists an entry without an `id`")
        meta = entry.get("meta")
        window = _count(entry.get("max_model_len")) or (_count(meta.get("n_ctx")) if isinstance(meta, dict) else None)
        found.append(ServedModel(entry["id"], str(entry.get("owned_by") or ""), window))
    return found


def kind_of(models: list[ServedModel]) -> str:
    for model in models:
        if model.owner.lower() in KINDS:
            return KINDS[model.owner.lower()]
    return GENERIC


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value


def props_context(props: Any) -> int | None:
    """llama-server's `/props`: one slot's context (what one request may hold)."""
    settings = props.get("default_generation_settings") if isinstance(props, dict) else None
    return _count(settings.get("n_ctx")) if isinstance(settings, dict) else None


def props_speculation(props: Any) -> str | None:
    settings = props.get("default_generation_settings") if isinstance(props, dict) else None
    params = settings.get("params") if isinstance(settings, dict) else None
    types = params.get("speculative.types") if isinstance(params, dict) else None
    if not isinstance(types, str) or types in ("", "none"):
        return None  # llama-server shows "none" here even with a drafter loaded: it says nothing
    return said(types)


def props_per_request_draft(props: Any) -> bool:
    return isinstance(props, dict) and props.get("dspine_per_request_draft") is True


def sglang_context(info: Any) -> int | None:
    return _count(info.get("context_length")) if isinstance(info, dict) else None


def sglang_speculation(info: Any) -> str | None:
    if not isinstance(info, dict):
        return None
    algorithm = info.get("speculative_algorithm")
    if not isinstance(algorithm, str) or not algorithm or algorithm.upper() == "NONE":
        return None
    drafter = info.get("speculative_draft_model_path")
    named = (
        f"{algorithm} ({drafter.rstrip('/').rsplit('/', 1)[-1]})" if isinstance(drafter, str) and drafter else algorithm
    )
    tokens = _count(info.get("speculative_num_draft_tokens"))
    return said(f"{named}, {tokens} draft tokens" if tokens else named)


def sglang_version(info: Any) -> tuple[int, ...]:
    """`version` as numbers ("0.5.19" -> (0, 5, 19)); () when it does not say."""
    raw = info.get("version") if isinstance(info, dict) else None
    numbers = []
    for part in raw.split(".") if isinstance(raw, str) else []:
        digits = "".join(ch for ch in part if ch.isdigit()) if part[:1].isdigit() else ""
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers)


# The first SGLang whose OpenAI endpoints return a reply's speculation figures when asked.
SGLANG_SPEC_DETAILS = (0, 5, 19)


def slots_speculative(slots: Any) -> bool:
    """llama-server's `/slots`: whether its slots draft."""
    return isinstance(slots, list) and any(isinstance(s, dict) and s.get("speculative") is True for s in slots)


def sglang_accept_length(info: Any) -> float | None:
    """SGLang's running average of tokens per verify step, server-wide."""
    states = info.get("internal_states") if isinstance(info, dict) else None
    for state in states if isinstance(states, list) else []:
        value = state.get("avg_spec_accept_length") if isinstance(state, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None


def choose_model(models: list[ServedModel], asked: str | None) -> ServedModel | str:
    """The served model a request names, or why none can be chosen."""
    ids = [m.id for m in models]
    if asked is not None:
        for model in models:
            if model.id == asked:
                return model
        return f"it does not serve {said(asked)!r}; it serves: {_some(ids) or 'nothing'}"
    if len(models) == 1:
        return models[0]
    if not models:
        return "it serves no model"
    return f"it serves {len(models)} models ({_some(ids)}): say which"


def _some(ids: list[str], shown: int = 8) -> str:
    listed = ", ".join(said(i) for i in ids[:shown])
    return listed + (f" and {len(ids) - shown} more" if len(ids) > shown else "")
