"""`dspine serve`: the same engine for the agents people already use."""

from __future__ import annotations

import sys

from ..errors import UsageError
from ..settings import load_settings
from .base import (
    DraftOption,
    ModelOption,
    UrlOption,
    _debug,
    _one_model,
    _say_warning,
    app,
    err,
    out,
)
from .serve_options import (
    ApiKeyOption,
    CtxOption,
    EngineOption,
    HostOption,
    LogOption,
    ModelArgument,
    NMaxOption,
    ParallelOption,
    PortOption,
    PrintConfigOption,
    RemoteApiKeyOption,
    ThinkOption,
)


@app.command()
def serve(
    model: ModelArgument = None,
    model_option: ModelOption = None,
    draft: DraftOption = None,
    ctx: CtxOption = 8192,
    host: HostOption = "127.0.0.1",
    port: PortOption = 8080,
    api_key: ApiKeyOption = None,
    parallel: ParallelOption = 1,
    think: ThinkOption = None,
    n_max: NMaxOption = None,
    log: LogOption = None,
    engine: EngineOption = None,
    url: UrlOption = None,
    remote_api_key: RemoteApiKeyOption = None,
    print_config: PrintConfigOption = None,
) -> None:
    """Serve the fitted engine to coding agents and editors (OpenAI and Anthropic APIs), with a live readout."""
    from ..serve.client_config import TOOLS, snippet
    from ..serve.service import ServeOptions, check_options, client_endpoint
    from ..serve.service import serve as run_server

    model = _one_model(model, model_option)
    if engine is None:
        engine = "remote" if url else "server"
    if engine not in ("server", "remote"):
        raise UsageError(f"--engine {engine}: serve runs server or remote", "give --engine server or --engine remote")
    if remote_api_key is not None and engine != "remote":
        raise UsageError("--remote-api-key is for --engine remote", "leave it out, or give --url")
    options = ServeOptions(
        model, draft, ctx, host, port, api_key, parallel, think, n_max, log, engine, url, remote_api_key,
        debug=_debug["on"],
    )  # fmt: skip
    settings = load_settings()
    if print_config is not None:
        if print_config.lower() not in (*TOOLS, "plain"):
            raise UsageError(f"--print-config {print_config}: no such tool", f"use one of: {', '.join(TOOLS)}")
        access = check_options(options)
        if engine == "remote":
            from ..serve.remote_upstream import remote_endpoint

            endpoint = remote_endpoint(options, settings, access.key is not None, _say_warning)
        else:
            endpoint = client_endpoint(options, settings, access.key is not None)
        sys.stdout.write(snippet(print_config, endpoint) or "")
        return
    if engine == "remote":
        from ..serve.remote_upstream import serve_remote

        serve_remote(options, settings, out, err)
        return
    run_server(options, settings, out, err)
