"""`dspine serve`: the same engine for the agents people already use."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ..choices import (
    Think,
)
from ..errors import UsageError
from ..settings import load_settings
from .base import (
    MODEL_HELP,
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


@app.command()
def serve(
    model: str | None = typer.Argument(None, help=MODEL_HELP),
    model_option: ModelOption = None,
    draft: DraftOption = None,
    ctx: int = typer.Option(8192, "--ctx", help="Context length, shared by the slots."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; anything but loopback needs a key."),
    port: int = typer.Option(8080, "--port", help="Port to listen on."),
    api_key: str | None = typer.Option(
        None,
        "--api-key",
        help="Key clients must send: @FILE reads it from a file, generate makes one; "
        "default DSPINE_SERVE_API_KEY (a key typed here shows in ps).",
    ),
    parallel: int = typer.Option(1, "--parallel", help="Requests served at once; more wait their turn."),
    think: Think | None = typer.Option(
        None,
        "--think",
        help="The think mode of requests that do not say. Default: on, or off for a model whose chat template "
        "has none.",
    ),
    n_max: int | None = typer.Option(None, "--n-max", help="Draft length (default: the fit plan's)."),
    log: Path | None = typer.Option(None, "--log", help="Append one line per request (bench format + figures)."),
    engine: str | None = typer.Option(
        None,
        "--engine",
        help="server (llama-server started here, the default) or remote (the server at --url: vLLM, SGLang or "
        "another llama-server, its window and drafter asked of it).",
    ),
    url: UrlOption = None,
    remote_api_key: str | None = typer.Option(
        None,
        "--remote-api-key",
        help="The remote server's key, as @FILE (a file only you can read). Default: DSPINE_API_KEY.",
    ),
    print_config: str | None = typer.Option(
        None,
        "--print-config",
        help="Print how to point a tool here (its window and compaction point too) and exit: "
        "aider, opencode, continue, codex, claude-code, qwen-code, llm, zed, curl.",
    ),
) -> None:
    """Serve the fitted engine to coding agents and editors (OpenAI and Anthropic APIs), with a live readout."""
    # One piece: Typer's option list; the body is under 60 lines.
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
