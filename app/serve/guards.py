"""What a web page must not be able to do with `dspine serve`, pure: the rules for
the `Host` header (DNS rebinding), the `Origin` header (cross-site requests) and
the body's media type (a page's `text/plain` POST needs no CORS preflight).

A page on evil.example can make the browser send requests to 127.0.0.1, but it
cannot choose the Host header (it is the page's own name, even after its DNS
answer is rebound to 127.0.0.1), cannot leave out Origin on a cross-site POST,
and can only send a JSON Content-Type after a preflight that this server
answers for allowed origins only."""

from __future__ import annotations

import fnmatch
import ipaddress
import socket
from dataclasses import dataclass

LOOPBACK_NAMES = ("localhost", "localhost.localdomain")
WILDCARD_HOSTS = ("0.0.0.0", "::", "")
JSON = "application/json"
ORIGINS_SETTING = "serve_origins"
ORIGINS_ENV = "DSPINE_SERVE_ORIGINS"
# What an allowed page may send in a CORS request (the SDKs' own headers included).
ALLOWED_METHODS = "GET, POST, OPTIONS"
ALLOWED_HEADERS = "Authorization, Content-Type, x-api-key, anthropic-version, anthropic-beta, openai-beta"


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str


def host_name(header: str) -> str:
    """`[::1]:8080` -> `::1`, `LocalHost.:80` -> `localhost`."""
    text = header.strip().lower()
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else text[1:]
    if text.count(":") == 1:
        text = text.split(":", 1)[0]
    return text.rstrip(".")


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return None


def is_loopback(name: str) -> bool:
    """A name or address that can only mean this machine: localhost, *.localhost
    (RFC 6761), 127.0.0.0/8, ::1 (and ::ffff:127.x)."""
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    address = _ip(name)
    if address is None:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def _own_names() -> set[str]:
    names = {socket.gethostname().lower()}
    names |= {f"{name}.local" for name in names}
    return names


def host_allowed(header: str | None, bind_host: str) -> bool:
    """Loopback names and addresses always; when the user chose a non-loopback --host
    (which needs a key), also that host, any IP address and this machine's own name
    (the names other machines reach it by). An IP address in Host cannot come from DNS rebinding, which
    needs a name the attacker's DNS answers for. No Host at all (HTTP/1.0) is no browser."""
    if header is None:
        return True
    name = host_name(header)
    if is_loopback(name):
        return True
    bound = bind_host if bind_host in WILDCARD_HOSTS else host_name(bind_host)
    if bound not in WILDCARD_HOSTS and is_loopback(bound):
        return False
    return name == bound or _ip(name) is not None or name in _own_names()


def origin_allowed(origin: str, allowed: tuple[str, ...]) -> bool:
    """`allowed` holds origins (`http://localhost:3000`) or patterns with `*`
    (`http://localhost:*`, `*`), compared without case."""
    origin = origin.strip().lower().rstrip("/")
    return any(fnmatch.fnmatchcase(origin, pattern.strip().lower().rstrip("/")) for pattern in allowed if pattern)


def check(
    *,
    method: str,
    host: str | None,
    origin: str | None,
    content_type: str | None,
    bind_host: str,
    origins: tuple[str, ...],
) -> Refusal | None:
    """Why a request is refused, or None. `content_type` is the bare media type."""
    if not host_allowed(host, bind_host):
        return Refusal(
            403,
            f"Host {host!r} is not this server's: dspine serve answers only requests addressed to "
            "localhost or 127.0.0.1 (or to the --host it was started with)",
        )
    if origin is not None and not origin_allowed(origin, origins):
        return Refusal(
            403,
            f"requests from web pages are refused (Origin {origin!r} is not allowed); to let a page "
            f"use this server, add its origin to the {ORIGINS_SETTING} setting or {ORIGINS_ENV}",
        )
    if method == "POST" and (content_type or "").lower() != JSON:
        shown = content_type or "none"
        return Refusal(415, f"the request body must be JSON sent as Content-Type: {JSON} (got {shown})")
    return None


def cors_headers(origin: str, requested_headers: str | None = None) -> dict[str, str]:
    """For an allowed origin's requests and preflights. The headers its preflight asks
    for are allowed as asked (SDKs add their own, such as openai's x-stainless-*): the
    origin is trusted, and which headers it sends changes nothing here."""
    return {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Allow-Methods": ALLOWED_METHODS,
        "Access-Control-Allow-Headers": requested_headers or ALLOWED_HEADERS,
        "Access-Control-Max-Age": "600",
        "Vary": "Origin",
    }
