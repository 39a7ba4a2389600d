"""Connections that cannot hold the server forever. aiohttp closes a keep-alive
connection idle between requests (its keepalive_timeout) and dspine's body reader
cuts off a client that stops sending its body; two waits remain, and this wraps
aiohttp's protocol to bound them:

- a new connection must finish its first request's headers within HEADER_S
  (aiohttp waits for them without limit: one byte a minute keeps a socket);
- a client that stops reading a reply (the write buffer stays full) for
  WRITE_STALL_S is cut off, so that it does not hold a slot (the handler would
  wait for the buffer to drain without end).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from collections.abc import Callable

from aiohttp import web

from ..terminal_text import one_line

HEADER_S = 10.0
IDLE_S = 30.0  # keep-alive connections idle this long between requests are closed
WRITE_STALL_S = 60.0
LINGER_S = 2.0  # after answering early (408, 413), how long the rest of a body is read and dropped
END_OF_HEADERS = b"\r\n\r\n"


class Deadlines(asyncio.Protocol):
    """aiohttp's RequestHandler, passed every call, with two timers."""

    def __init__(self, inner: asyncio.Protocol, header_s: float, write_stall_s: float) -> None:
        self.inner = inner
        self.header_s = header_s
        self.write_stall_s = write_stall_s
        self.transport: asyncio.Transport | None = None
        self._tail = b""  # the last bytes seen, for a header end split across reads
        self._headers_timer: asyncio.TimerHandle | None = None
        self._stall_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._headers_timer = asyncio.get_running_loop().call_later(self.header_s, self._cut)
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._headers_timer is not None:
            seen = self._tail + data
            if END_OF_HEADERS in seen or b"\n\n" in seen:  # (a lenient client's bare newlines)
                self._headers_timer.cancel()
                self._headers_timer = None
            self._tail = seen[-3:]
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        if self._stall_timer is None:
            self._stall_timer = asyncio.get_running_loop().call_later(self.write_stall_s, self._cut)
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._headers_timer, self._stall_timer):
            if timer is not None:
                timer.cancel()
        self.inner.connection_lost(exc)

    def _cut(self) -> None:
        if self.transport is not None:
            self.transport.abort()  # connection_lost follows: aiohttp cancels the handler


class OneLine(logging.Formatter):
    """aiohttp's "Error handling request" (a malformed request line or header, a client gone
    mid-reply) as one line with the reason, not a traceback in the readout's terminal."""

    def format(self, record: logging.LogRecord) -> str:
        reason = record.exc_info[1] if record.exc_info else None
        said = record.getMessage()
        if reason is not None:  # aiohttp's reasons run over lines, with a caret under the bad byte
            said += ": " + " ".join(part.strip() for part in str(reason).splitlines() if part.strip(" ^"))
        return one_line(f"serve: {said}")


class _ToStderr(logging.Handler):
    """Standard error as it is when a record comes (not as it was when the handler was made)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass  # a closed terminal loses the line, never the server


def request_errors_logger(debug: bool = False) -> logging.Logger:
    """The logger aiohttp reports a request it could not handle to: one line on standard error
    (the traceback with --debug)."""
    logger = logging.getLogger("dspine.serve.requests")
    if not logger.handlers:
        logger.addHandler(_ToStderr())
        logger.propagate = False
    for handler in logger.handlers:
        handler.setFormatter(logging.Formatter() if debug else OneLine())
    return logger


def runner(app: web.Application, idle_s: float = IDLE_S, shutdown_s: float = 3.0, debug: bool = False) -> web.AppRunner:
    """aiohttp's runner as serve uses it: a handler is cancelled when its client hangs
    up (which frees the llama-server slot), idle keep-alive connections close, a body
    refused before it was read is not drained for long, and the last wait at shutdown
    is short (serve ends its requests itself before that)."""
    return web.AppRunner(
        app,
        access_log=None,
        handler_cancellation=True,
        keepalive_timeout=idle_s,
        shutdown_timeout=shutdown_s,
        lingering_time=LINGER_S,
        logger=request_errors_logger(debug),
    )


async def listen(
    app_runner: web.AppRunner,
    sock: socket.socket,
    header_s: float = HEADER_S,
    write_stall_s: float = WRITE_STALL_S,
) -> asyncio.AbstractServer:
    """Serve `app_runner` (set up) on `sock`; close the returned server before the
    runner's cleanup."""
    server = app_runner.server
    assert server is not None, "set the runner up first"
    factory: Callable[[], asyncio.Protocol] = lambda: Deadlines(server(), header_s, write_stall_s)  # noqa: E731
    return await asyncio.get_running_loop().create_server(factory, sock=sock)
