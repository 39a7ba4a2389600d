"""`dspine serve` put together: check access, bind the port, start the engine from
the fit plan, run the proxy and the readout until Ctrl-C, then stop everything."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live

from backends.break_even import Speculation
from backends.message_order import MERGE

from ..errors import UsageError
from ..settings import Settings, wants_traceback
from .access import Access, resolve_access
from .board import Board
from .client_config import Endpoint
from .connections import listen, runner
from .figures import RequestFigures
from .proxy import Proxy, ProxyConfig
from .readout import ServeInfo, render, request_line
from .window import slot_context

READOUT_S = 0.25  # readout refresh; GPU figures every fourth


@dataclass
class ServeOptions:
    model: str | None = None
    draft: str | None = None
    ctx: int = 8192
    host: str = "127.0.0.1"
    port: int = 8080
    api_key: str | None = None
    parallel: int = 1
    think: str | None = None  # "on" / "off"; None: on, unless the model has no thinking mode
    n_max: int | None = None
    log: Path | None = None
    engine: str = "server"  # server (llama-server started here) or remote (--url)
    url: str | None = None  # the remote server's OpenAI base
    remote_api_key: str | None = None  # its key: @FILE (None: DSPINE_API_KEY)
    debug: bool = False  # --debug: a request aiohttp could not handle shows its traceback


def model_id(label: str) -> str:
    return label.removesuffix(".gguf")


def endpoint_url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"  # an IPv6 address in a URL (RFC 3986)
    return f"http://{shown}:{port}/v1"


def bind(host: str, port: int) -> socket.socket:
    """Take the port before the model loads, so a busy port fails in a second, not after."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror}", "give another --port, or stop what uses that one"
        ) from exc


def check_options(options: ServeOptions) -> Access:
    from ..run.inputs import check_lengths

    if options.parallel < 1:
        raise UsageError(f"--parallel {options.parallel}: needs at least 1 slot", "give --parallel 1 or more")
    if options.ctx < 256:
        raise UsageError(f"--ctx {options.ctx} is too small", "give --ctx 4096 or more")
    if not 0 <= options.port <= 65535:
        # Before anything starts: a port out of range failed only at the bind, after the engine.
        raise UsageError(
            f"--port {options.port}: not a port", "give a port from 1 to 65535 (0: any free one), e.g. --port 8080"
        )
    check_lengths(n_max=options.n_max)
    return resolve_access(options.host, options.api_key)


def trained_context(target: Path | None) -> int:
    """The model's trained context from its GGUF header (0 when unknown): llama-server
    caps each slot there."""
    from backends.gguf_header import GgufError, read_local

    if target is None:
        return 0
    try:
        header = read_local(target)
    except (GgufError, OSError):
        return 0
    value = header.arch_key("context_length", 0)
    return int(value) if isinstance(value, int) else 0


def layers_said(gpu_layers: int) -> str:
    """Where the model's layers run, as serve's start-up line says it: a machine without a GPU
    runs them all on the CPU, whatever -ngl says (999 read as a figure there)."""
    from ..fit.hardware import detect

    if not detect().gpus:
        return "on the CPU (no GPU found)"
    return "all layers on the GPU" if gpu_layers >= 999 else f"GPU layers {gpu_layers}"


def client_endpoint(options: ServeOptions, settings: Settings, access_has_key: bool) -> Endpoint:
    from ..models.catalog import load_catalog
    from ..run.engines import resolve_files

    files = resolve_files(options.model, options.draft, load_catalog(settings.catalog), settings)
    window = slot_context(options.ctx, options.parallel, trained_context(files.target))
    return Endpoint(endpoint_url(options.host, options.port), model_id(files.label), window, access_has_key)


def serve(options: ServeOptions, settings: Settings, out: Console, err: Console) -> None:
    from ..models.catalog import load_catalog
    from ..run.drafting_choice import drafting_for
    from ..run.engines import resolve_files
    from ..run.think_default import no_thinking_note, starting_think

    access = check_options(options)
    drafting = drafting_for(
        resolve_files(options.model, options.draft, load_catalog(settings.catalog), settings),
        options.draft,
        "server",
        settings,
        per_request=False,  # the proxy sends requests straight to llama-server
    )
    files = drafting.files
    if drafting.note:
        err.print(drafting.note, markup=False)
    think, for_the_model = starting_think(options.think, files.target)
    if for_the_model:
        err.print(no_thinking_note(files.label, "for requests that do not ask for it"), markup=False)
    sock = bind(options.host, options.port)
    port = sock.getsockname()[1]  # --port 0: the one the system chose
    log = None
    engine = None
    try:
        if options.log is not None:
            from .request_log import RequestLog

            log = RequestLog(options.log)
        err.print(f"starting llama-server for {files.label} ...", markup=False)
        engine = _open_served(options, settings, drafting, think)
        info = _serve_info(engine, files, drafting, endpoint_url(options.host, port), think)
        proxy_config = _proxy_config(engine, options, settings, access, files, think)
        if engine.template_choice is not None:
            err.print(f"chat template: {engine.template_choice.summary}", markup=False, highlight=False, soft_wrap=True)
        if engine.draft_length_note:
            err.print(engine.draft_length_note)
        say_window_and_access(err, proxy_config, access)
        out.print(
            f"serving {info.model} on {info.endpoint} (OpenAI) and {info.endpoint}/messages (Anthropic); Ctrl-C stops",
            markup=False,
        )
        live = out.is_terminal
        with contextlib.suppress(KeyboardInterrupt):
            debug = options.debug or wants_traceback()
            stopped = run_until_stopped(proxy_config, sock, info, out, log, live, engine, settings.speculation, debug)
            asyncio.run(stopped)
    finally:
        sock.close()
        if engine is not None:
            engine.close()
        if log is not None:
            log.close()
    err.print("stopped")


def _open_served(options: ServeOptions, settings: Settings, drafting, think: bool):
    """llama-server for the served model, named as clients will ask for it."""
    from backends.llama_server import LlamaServerEngine

    from ..run.drafting_choice import with_drafting
    from ..run.engines import EngineOptions, open_engine

    files = drafting.files
    asked = EngineOptions(
        engine="server",
        ctx=options.ctx,
        n_max=options.n_max,
        parallel=options.parallel,
        think=think,
        served_name=model_id(files.label),
    )
    engine = open_engine(files, with_drafting(asked, drafting), settings)
    assert isinstance(engine, LlamaServerEngine) and engine.base_url and engine.api_key
    return engine


def _serve_info(engine, files, drafting, endpoint: str, think: bool) -> ServeInfo:
    """What the live readout names: the model, its drafter, the plan it runs with."""
    config = engine.config
    return ServeInfo(
        model=model_id(files.label),
        drafter=(f"{files.drafter.name} ({files.drafter_kind})" if files.drafter else (drafting.label or "none")),
        plan=(
            f"context {config.n_ctx} ({config.n_ctx // config.n_parallel} a slot, {config.n_parallel} slots), "
            f"{layers_said(config.gpu_layers)}, KV {config.kv}, draft length "
            f"{config.n_max or 'server default'}"
        ),
        endpoint=endpoint,
        think=think,
    )


def _proxy_config(engine, options: ServeOptions, settings: Settings, access: Access, files, think: bool) -> ProxyConfig:
    from ..run.think_default import model_has_thinking

    config = engine.config
    learned = engine.adaptive if engine.per_request_draft else None
    lengths = {True: learned.choose(True), False: learned.choose(False)} if learned else None
    if engine.ngram_chained and engine.per_request_draft and engine.config.ngram is not None:
        # Agents' requests are mostly edits: every one asks for the n-gram drafter's long copies
        # (one per-request length caps both drafters; the model drafter keeps its launch length).
        copies = engine.config.ngram.n_max
        lengths = {mode: max(copies, (lengths or {}).get(mode, 0)) for mode in (True, False)}
    return ProxyConfig(
        engine.base_url,
        engine.api_key,
        model_id(files.label),
        config.n_ctx,
        think,
        options.parallel,
        access.key,
        lengths,
        bind_host=options.host,
        origins=settings.serve_origins,
        system_rule=engine.template_choice.rule if engine.template_choice else MERGE,
        window=slot_context(config.n_ctx, config.n_parallel, trained_context(files.target)),
        sampling=files.sampling,
        thinks=files.target is None or model_has_thinking(files.target),
        upstream_extra=engine.request_extra,
    )


def say_window_and_access(err: Console, config: ProxyConfig, access: Access) -> None:
    """What every serve says at start: one request's window and reply limit, the access rule."""
    err.print(
        f"window {config.slot_window} tokens a request; a reply whose request sets no limit "
        f"stops at {config.reply_limit}"
    )
    if access.warning:
        err.print(f"[yellow]warning:[/] {access.warning}")
    if access.generated:
        err.print(f"API key (shown once, keep it): [bold]{access.key}[/]")


async def run_until_stopped(
    config: ProxyConfig,
    sock: socket.socket,
    info: ServeInfo,
    out: Console,
    log,
    live: bool,
    engine,
    speculation: Speculation = "auto",
    debug: bool = False,
) -> None:
    from .gpu_status import GpuWatch

    board = Board()

    def done(figures: RequestFigures, body: dict[str, Any]) -> None:
        if log is not None:
            log.write(figures, body)
        if not live:
            print(request_line(figures), flush=True)

    def note(line: str) -> None:
        # serve's log: what changed about drafting, between the request lines
        print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)

    from backends.break_even import BreakEven

    proxy = Proxy(config, board, on_done=done, break_even=BreakEven(setting=speculation), on_note=note)
    app_runner = runner(proxy.app(), debug=debug)
    await app_runner.setup()
    server = await listen(app_runner, sock)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Ctrl-C too: a stop in order (streams told, then llama-server), not a KeyboardInterrupt
    # wherever the loop happens to be.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
    gpu = GpuWatch()
    try:
        if live:
            await _readout(info, board, gpu, out, stop, lambda: engine.alive)
        else:
            await _watch(stop, lambda: engine.alive)
    finally:
        gpu.close()
        server.close()  # no new connections
        await proxy.stop()  # requests in flight end now, streams with a last event
        await app_runner.cleanup()


async def _watch(stop: asyncio.Event, alive: Callable[[], bool]) -> None:
    while not stop.is_set():
        if not alive():
            print("llama-server stopped; see its log", file=sys.stderr, flush=True)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)


async def _readout(info: ServeInfo, board: Board, gpu, out: Console, stop: asyncio.Event, alive) -> None:
    gpus = gpu.read()
    tick = 0
    with Live(render(info, board, gpus), console=out, auto_refresh=False, transient=False) as view:
        while not stop.is_set():
            if not alive():
                out.print("[red]llama-server stopped; see its log[/]")
                return
            tick += 1
            if tick % 4 == 0:
                gpus = gpu.read()
            view.update(render(info, board, gpus), refresh=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), READOUT_S)
