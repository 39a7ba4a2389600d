"""`dspine serve --engine remote`: the agents' endpoint in front of a remote server (vLLM or
SGLang on a multi-GPU box, or another llama-server), with the same request rules, window
declaration and readout as in front of the local llama-server. The server is asked what it
is first (backends/remote_probe); its window is the one declared to clients, and every
request names the model it serves."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.text import Text

from backends.message_order import MERGE
from backends.remote import RemoteEngine
from backends.remote_probe import root_of

from ..errors import UsageError
from ..run.remote_engine import open_remote
from ..settings import Settings
from ..terminal_text import one_line
from .client_config import Endpoint
from .proxy import ProxyConfig
from .readout import ServeInfo
from .service import ServeOptions, bind, check_options, endpoint_url, model_id, run_until_stopped, say_window_and_access
from .window import slot_context


def connect(options: ServeOptions, settings: Settings, warn: Callable[[str], None] | None = None) -> RemoteEngine:
    if options.draft is not None:
        raise UsageError("--draft with --engine remote: the remote server runs its own drafter", "leave --draft out")
    return open_remote(
        options.url,
        options.remote_api_key,
        options.model,
        None,
        settings.read_timeout_s,
        options.ctx,
        warn=warn,
        option="--remote-api-key",  # serve's own --api-key is the key its clients send
    )


def window_of(engine: RemoteEngine, options: ServeOptions) -> int:
    """One request's window: the server's own where it says it (vLLM's and SGLang's
    max_model_len, llama-server's slot), else --ctx over the slots."""
    if engine.server is not None and engine.server.context:
        return engine.server.context
    return slot_context(options.ctx, options.parallel, 0)


def served_name(model: str) -> str:
    """The name clients see: a llama-server's model id is the path it was started with; the
    file's stem says the same without the other machine's folders."""
    return model_id(model.rsplit("/", 1)[-1]) if model.endswith(".gguf") else model


def remote_endpoint(
    options: ServeOptions, settings: Settings, access_has_key: bool, warn: Callable[[str], None] | None = None
) -> Endpoint:
    engine = connect(options, settings, warn)
    try:
        return Endpoint(
            endpoint_url(options.host, options.port), served_name(engine.model or "remote"),
            window_of(engine, options), access_has_key,
        )  # fmt: skip
    finally:
        engine.close()


def _remote_info(server, window: int, endpoint: str, think: bool, counters) -> ServeInfo:
    """What the live readout names; what the server says of itself is shown as text: one
    visible line, never markup."""
    return ServeInfo(
        model=one_line(served_name(server.model)),
        drafter=one_line(server.speculation or "not said by the server"),
        plan=one_line(
            f"remote {server.kind} at {server.shown_url}, window {window} tokens ({server.context_from}); "
            f"acceptance from {server.acceptance_source}"
        ),
        endpoint=endpoint,
        think=think,
        server_figures=counters.line if counters is not None else None,
    )


def _remote_proxy_config(engine, options: ServeOptions, settings: Settings, access, window: int, think: bool):
    server = engine.server
    return ProxyConfig(
        root_of(server.url),
        engine.api_key,
        served_name(server.model),
        window * options.parallel,
        think,
        options.parallel,
        access.key,
        None,  # a remote server keeps its own draft length
        bind_host=options.host,
        origins=settings.serve_origins,
        system_rule=MERGE,
        window=window,
        upstream_model=server.model,
        upstream_extra=server.request_extra,  # SGLang 0.5.19+: each reply's own figures
        upstream_name="the remote server",  # clients see it: never its URL (it may hold a user:password)
    )


def serve_remote(options: ServeOptions, settings: Settings, out: Console, err: Console) -> None:
    access = check_options(options)

    def warn(warning: str) -> None:
        err.print(Text.assemble(("warning: ", "yellow"), one_line(warning)))

    engine = connect(options, settings, warn)
    server = engine.server
    assert server is not None
    sock = bind(options.host, options.port)
    port = sock.getsockname()[1]
    log = None
    counters = None
    if server.counters and not server.per_reply_counts:
        from .remote_counters import ServerCounters

        counters = ServerCounters(server.url, engine.api_key).start()
    try:
        if options.log is not None:
            from .request_log import RequestLog

            log = RequestLog(Path(options.log))
        think = options.think != "off"
        window = window_of(engine, options)
        info = _remote_info(server, window, endpoint_url(options.host, port), think, counters)
        proxy_config = _remote_proxy_config(engine, options, settings, access, window, think)
        say_window_and_access(err, proxy_config, access)
        out.print(
            Text(
                f"serving {info.model} on {info.endpoint} (OpenAI) and {info.endpoint}/messages (Anthropic), "
                f"from {server.kind} at {one_line(server.shown_url)}; Ctrl-C stops"
            )
        )
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(
                run_until_stopped(proxy_config, sock, info, out, log, out.is_terminal, engine, settings.speculation)
            )
    finally:
        sock.close()
        engine.close()
        if log is not None:
            log.close()
        if counters is not None:
            counters.stop()
            if line := counters.line():
                err.print(line, markup=False, highlight=False)
    err.print("stopped")
