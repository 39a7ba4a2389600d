"""Ask a remote OpenAI-compatible server what it is before the first request: reachable,
the key accepted, OpenAI-compatible, serving the model asked for; then its window and
speculation (remote_info) and whether its /metrics counts drafts (spec_metrics). Each
way this fails is an EngineError that says what happened and what to do."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from .errors import RemoteBadUrl, RemoteModelUnknown, RemoteNotOpenAI, RemoteRefused, RemoteUnreachable
from .remote_info import (
    SGLANG_SPEC_DETAILS,
    RemoteServer,
    choose_model,
    kind_of,
    props_context,
    props_per_request_draft,
    props_speculation,
    served_models,
    sglang_context,
    sglang_speculation,
    sglang_version,
    shown_url,
    slots_speculative,
)
from .spec_metrics import Counters, parse

PROBE_TIMEOUT_S = 10.0
_BASES = "vLLM http://HOST:8000/v1, SGLang http://HOST:30000/v1, llama-server http://HOST:8080/v1"


def root_of(url: str) -> str:
    """The server's root, where llama-server's /props and everyone's /metrics live:
    the OpenAI base less its /v1."""
    base = url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def check_url(url: str) -> None:
    """An http(s) URL with a host, or RemoteBadUrl (exit 2) saying what is wrong with it."""
    try:
        parsed = urlparse(url)
        host = parsed.hostname
        parsed.port  # noqa: B018 - a port that is not a number raises here, not mid-request
    except ValueError as exc:
        raise RemoteBadUrl(
            f"{shown_url(url)!r} is not a URL ({exc})", "give the server's base URL, e.g. http://host:8000/v1"
        ) from None
    if parsed.scheme not in ("http", "https") or not host:
        raise RemoteBadUrl(
            f"{shown_url(url)!r} is not an http(s) URL", "give the server's base URL, e.g. http://host:8000/v1"
        )


def plain_http_warning(url: str) -> str | None:
    """http to another machine: every prompt, file and reply crosses the network readable."""
    parsed = urlparse(url)
    host = (parsed.hostname or "").lower()
    if parsed.scheme != "http" or host in ("localhost", "127.0.0.1", "::1") or host.startswith("127."):
        return None
    return (
        f"{host} is reached over plain http: prompts, project files and replies travel unencrypted; "
        f"use https, or a tunnel (ssh -N -L 8000:localhost:8000 {host}, then --url http://127.0.0.1:8000/v1)"
    )


# What one answer of a server may hold, and take: a listing or a /metrics page is kilobytes;
# a server that sends without end, or one byte a second, must not hold dspine (or its memory).
MAX_ANSWER_BYTES = 8 * 2**20
KEY_FIX = "check the key: DSPINE_API_KEY, or the file given as {option} @FILE"
NO_KEY_FIX = "set DSPINE_API_KEY, or put the key in a file only you can read and give {option} @FILE"


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    location: str | None  # a redirect's target


class TooSlow(Exception):
    """The answer did not finish within the deadline."""


class TooLarge(Exception):
    """The answer ran past MAX_ANSWER_BYTES."""


class Prober:
    def __init__(
        self, url: str, api_key: str | None, timeout_s: float = PROBE_TIMEOUT_S, key_option: str = "--api-key"
    ) -> None:
        import httpx2

        self.url = url.rstrip("/")
        self.shown = shown_url(self.url)
        self.root = root_of(url)
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.key_option = key_option
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx2.Client(timeout=httpx2.Timeout(timeout_s), headers=headers)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Prober:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def fetch(self, url: str) -> Answer:
        """One GET, whole within `timeout_s` and MAX_ANSWER_BYTES (the client's own timeout
        is per read: a server trickling a byte at a time would never reach it)."""
        deadline = time.monotonic() + self.timeout_s
        with self.client.stream("GET", url) as reply:
            parts: list[bytes] = []
            size = 0
            for part in reply.iter_bytes():
                size += len(part)
                if size > MAX_ANSWER_BYTES:
                    raise TooLarge()
                if time.monotonic() > deadline:
                    raise TooSlow()
                parts.append(part)
            return Answer(reply.status_code, b"".join(parts), reply.headers.get("location"))

    def get_json(self, path: str, base: str | None = None) -> Any:
        """The answer's JSON, or None where the endpoint is not there (an optional one)."""
        import httpx2

        try:
            answer = self.fetch((base or self.root) + path)
        except (httpx2.HTTPError, TooSlow, TooLarge):
            return None
        if answer.status != 200:
            return None
        try:
            return json.loads(answer.body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None

    def models(self) -> Any:
        """GET /v1/models, the one endpoint every OpenAI-compatible server has: the check
        that the URL, the key and the protocol are right."""
        where = f"{self.shown}/models"
        answer = self._fetch_models(where)
        self._check_models_status(answer, where)
        try:
            return json.loads(answer.body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RemoteNotOpenAI(
                f"{self.shown} is not an OpenAI-compatible server: GET {where} did not answer JSON",
                f"give the server's OpenAI base URL, which ends in /v1 ({_BASES})",
            ) from exc

    def _fetch_models(self, where: str) -> Answer:
        """The answer to GET `where`, or the EngineError that says why none came."""
        import httpx2

        try:
            return self.fetch(where)
        except httpx2.ConnectError as exc:
            if "CERTIFICATE_VERIFY_FAILED" in str(exc):
                raise RemoteUnreachable(
                    f"{self.shown}: its TLS certificate is not one this machine trusts ({_reason(exc)})",
                    "give its certificate authority with SSL_CERT_FILE=ca.pem, or reach it through a tunnel",
                ) from exc
            raise RemoteUnreachable(
                f"nothing answers at {self.shown} ({_reason(exc)})",
                "check that the server runs, and the host and port of --url",
            ) from exc
        except (httpx2.TimeoutException, TooSlow) as exc:
            raise RemoteUnreachable(
                f"{self.shown} did not answer within {self.timeout_s:g} s",
                "check that the server is up and not overloaded, and that a firewall lets the port through",
            ) from exc
        except TooLarge as exc:
            raise RemoteNotOpenAI(
                f"{self.shown} is not an OpenAI-compatible server: GET {where} sent more than "
                f"{MAX_ANSWER_BYTES // 2**20} MB",
                f"give the server's OpenAI base URL, which ends in /v1 ({_BASES})",
            ) from exc
        except httpx2.InvalidURL as exc:
            raise RemoteBadUrl(f"{self.url!r} is not a URL httpx can use ({exc})", "check --url") from exc
        except httpx2.HTTPError as exc:
            raise RemoteUnreachable(
                f"cannot talk to {self.shown}: {_reason(exc)}",
                "check the URL: its scheme (http or https), host and port",
            ) from exc

    def _check_models_status(self, answer: Answer, where: str) -> None:
        """A 200, or the EngineError that says what the status means: a key refused or
        missing, a redirect not followed, or not an OpenAI endpoint."""
        if answer.status in (401, 403):
            if self.api_key:
                raise RemoteRefused(
                    f"{self.shown} refused the API key ({answer.status})", KEY_FIX.format(option=self.key_option)
                )
            raise RemoteRefused(
                f"{self.shown} needs an API key ({answer.status})", NO_KEY_FIX.format(option=self.key_option)
            )
        if answer.status in (301, 302, 303, 307, 308):
            raise RemoteNotOpenAI(
                f"{self.shown}: GET {where} redirects to {answer.location or 'somewhere it does not say'}",
                "give the URL it redirects to, if you trust it (dspine does not follow redirects with your key)",
            )
        if answer.status != 200:
            raise RemoteNotOpenAI(
                f"{self.shown} is not an OpenAI-compatible server: GET {where} answered {answer.status}",
                f"give the server's OpenAI base URL, which ends in /v1 ({_BASES})",
            )

    def counters(self) -> Counters | None:
        """The speculation counters on /metrics now; None when it has none (or no /metrics)."""
        import httpx2

        try:
            answer = self.fetch(self.root + "/metrics")
        except (httpx2.HTTPError, TooSlow, TooLarge):
            return None
        if answer.status != 200:
            return None
        return parse(answer.body.decode("utf-8", errors="replace"))


def probe(
    url: str,
    api_key: str | None,
    model: str | None,
    timeout_s: float = PROBE_TIMEOUT_S,
    key_option: str = "--api-key",
) -> RemoteServer:
    with Prober(url, api_key, timeout_s, key_option) as prober:
        try:
            models = served_models(prober.models())
        except ValueError as exc:
            raise RemoteNotOpenAI(
                f"{shown_url(url)} is not an OpenAI-compatible server: {exc}",
                f"give the server's OpenAI base URL, which ends in /v1 ({_BASES})",
            ) from exc
        kind = kind_of(models)
        chosen = choose_model(models, model)
        if isinstance(chosen, str):
            if kind == "llama-server" and model is not None:
                chosen = models[0]  # llama-server answers whatever model a request names
            else:
                raise RemoteModelUnknown(f"{shown_url(url)}: {chosen}", "give --model one of the models it serves")
        context, context_from = chosen.window, "/v1/models"
        speculation = None
        per_reply = per_request = average = False
        extra: tuple[tuple[str, object], ...] = ()
        if kind == "llama-server":
            props = prober.get_json("/props")
            context = props_context(props) or context
            context_from = "/props" if props_context(props) else context_from
            speculation = props_speculation(props)
            if speculation is None and slots_speculative(prober.get_json("/slots")):
                speculation = "its drafter"
            per_reply = True  # its timings carry draft_n / draft_n_accepted whenever it drafts
            per_request = props_per_request_draft(props)
        elif kind == "SGLang":
            info = prober.get_json("/server_info") or prober.get_json("/get_server_info")
            if context is None and sglang_context(info):
                context, context_from = sglang_context(info), "/server_info"
            speculation = sglang_speculation(info)
            if speculation is not None and sglang_version(info) >= SGLANG_SPEC_DETAILS:
                per_reply, extra = True, (("return_spec_tokens_details", True),)
            average = speculation is not None and not per_reply
        counted = prober.counters()
        if counted is not None and speculation is None and (counted.drafts or counted.draft_tokens):
            speculation = "speculative decoding (its /metrics counts drafts)"
        return RemoteServer(
            url=url,
            kind=kind,
            model=chosen.id,
            models=tuple(m.id for m in models),
            context=context,
            context_from=context_from if context else "not said",
            speculation=speculation,
            per_reply_counts=per_reply,
            counters=counted is not None,
            per_request_draft=per_request,
            request_extra=extra,
            server_average=average,
        )


def _reason(exc: Exception) -> str:
    text = str(exc).strip()
    if "refused" in text.lower():
        return "connection refused"
    return text or type(exc).__name__
