"""`dspine doctor --url`: what a remote engine is and what it reports, as checks: reachable
with the key, OpenAI-compatible, the model, its window, its speculation, where acceptance
comes from (and the server flag that would give more), and plain http to another host."""

from __future__ import annotations

from backends.errors import EngineError
from backends.remote_info import RemoteServer
from backends.remote_probe import check_url, plain_http_warning, probe

from .doctor import Check
from .errors import DspineError
from .run.remote_engine import KEY_ENV, remote_key

# What each server needs started with for a reply's own acceptance (docs/remote.md).
MORE_FIGURES = {
    "vLLM": "start vLLM 0.29+ with --per-request-spec-decode-metrics summary for each reply's figures",
    "SGLang": "SGLang 0.5.19+ returns each reply's figures; --enable-metrics adds /metrics",
    "llama-server": "start llama-server with --metrics for its counters",
}


def remote_checks(url: str, api_key: str | None, model: str | None) -> list[Check]:
    checks: list[Check] = []
    try:
        check_url(url)
    except EngineError as exc:
        return [Check("remote URL", False, exc.cause, exc.fix, required=True)]
    try:
        key = remote_key(api_key)
    except DspineError as exc:
        return [Check("remote key", False, exc.cause, exc.fix, required=True)]
    if key.key is None:
        checks.append(Check("remote key", True, f"none given (neither --api-key @FILE nor {KEY_ENV})"))
    else:
        source = "the file given" if api_key else KEY_ENV
        checks.append(Check("remote key", key.warning is None, f"from {source}", key.warning or ""))
    if warning := plain_http_warning(url):
        checks.append(Check("remote connection", False, "plain http to another machine", warning))
    try:
        server = probe(url, key.key, model)
    except EngineError as exc:
        return [*checks, Check("remote server", False, exc.cause, exc.fix, required=True)]
    return [*checks, *_described(server)]


def _described(server: RemoteServer) -> list[Check]:
    served = f"{server.kind} at {server.shown_url}, serving {server.model}"
    if len(server.models) > 1:
        served += f" (of {len(server.models)}: {', '.join(server.models[:6])})"
    window = (
        Check("remote window", True, f"{server.context:,} tokens a request (from {server.context_from})")
        if server.context
        else Check("remote window", False, "the server does not say its window", "give --ctx with its context length")
    )
    speculation = (
        Check("remote speculation", True, server.speculation)
        if server.speculation
        else Check(
            "remote speculation",
            False,
            "the server does not say it drafts",
            "if it runs speculative decoding, its acceptance shows once it reports it (see below)",
        )
    )
    reported = server.per_reply_counts or server.counters
    acceptance = Check(
        "remote acceptance",
        reported and not server.server_average,
        f"from {server.acceptance_source}",
        "" if server.per_reply_counts else MORE_FIGURES.get(server.kind, ""),
    )
    plain = Check(
        "remote plain rows",
        server.per_request_draft,
        "bench can turn drafting off per request"
        if server.per_request_draft
        else "bench shows the server's figures as they are (no per-request switch off)",
    )
    return [Check("remote server", True, served), window, speculation, acceptance, plain]
