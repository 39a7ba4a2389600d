"""Any OpenAI-compatible server (SGLang or vLLM running DSpine on a bigger
machine): a URL and an API key, statistics from whatever the server returns."""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator
from urllib.parse import urlparse

from .base import EngineError
from .events import End, Error, Event
from .openai_stream import StreamBroken, chat_body, interrupt as _interrupt, stream_chat
from .sampling import Sampling, preset
from .stats import Stats


@dataclass
class RemoteEngine:
    url: str  # e.g. http://gpu-box:30000/v1
    api_key: str | None = None
    model: str | None = None
    drafter: str | None = None
    name: str = "remote"
    timeout: float = 600.0
    _cancel: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _connection_in_use: http.client.HTTPConnection | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        parsed = urlparse(self.url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise EngineError(f"{self.url!r} is not an http(s) URL", "give the server's base URL, e.g. http://host:30000/v1")
        self._parsed = parsed

    def _connection(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._parsed.scheme == "https" else http.client.HTTPConnection
        return cls(self._parsed.hostname, self._parsed.port, timeout=self.timeout)

    def cancel(self) -> None:
        self._cancel.set()
        _interrupt(self._connection_in_use)

    def close(self) -> None:
        self.cancel()

    def stream(
        self,
        messages: list[dict[str, Any]],
        think: bool = True,
        sampling: Sampling | None = None,
        n_max: int | None = None,
    ) -> Iterator[Event]:
        self._cancel.clear()
        extra: dict[str, Any] = {"model": self.model} if self.model else {}
        body = chat_body(messages, think, sampling or preset(think), extra)
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        path = self._parsed.path.rstrip("/") + "/chat/completions"
        connection = self._connection()
        started = time.monotonic()
        try:
            self._connection_in_use = connection
            connection.request("POST", path, body=json.dumps(body), headers=headers)
            response = connection.getresponse()
            if response.status != 200:
                detail = response.read().decode(errors="replace")[:500]
                fix = "check the API key" if response.status in (401, 403) else "check the URL and the server's log"
                yield Error(f"{self.url} answered {response.status}: {detail}", fix)
                return
            yield from stream_chat(response, self._cancel, started)
        except StreamBroken:
            yield Error(f"{self.url} closed the stream mid-reply", "the conversation is kept; try again")
        except (OSError, http.client.HTTPException, ValueError, AttributeError) as exc:
            if self._cancel.is_set():
                yield End("cancelled", Stats())
            else:
                yield Error(f"cannot talk to {self.url}: {exc}", "check that the server runs and the URL is right")
        finally:
            self._connection_in_use = None
            connection.close()
