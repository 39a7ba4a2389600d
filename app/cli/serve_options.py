"""`dspine serve`'s own options (those it shares with other commands are in base.py), each an
annotated type, so the command's signature lists what it takes and not how each is helped."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..choices import Think
from .base import MODEL_HELP

ModelArgument = Annotated[str | None, typer.Argument(help=MODEL_HELP)]
CtxOption = Annotated[int, typer.Option("--ctx", help="Context length, shared by the slots.")]
HostOption = Annotated[str, typer.Option("--host", help="Address to listen on; anything but loopback needs a key.")]
PortOption = Annotated[int, typer.Option("--port", help="Port to listen on.")]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        help="Key clients must send: @FILE reads it from a file, generate makes one; "
        "default DSPINE_SERVE_API_KEY (a key typed here shows in ps).",
    ),
]
ParallelOption = Annotated[int, typer.Option("--parallel", help="Requests served at once; more wait their turn.")]
ThinkOption = Annotated[
    Think | None,
    typer.Option(
        "--think",
        help="The think mode of requests that do not say. Default: on, or off for a model whose chat template "
        "has none.",
    ),
]
NMaxOption = Annotated[int | None, typer.Option("--n-max", help="Draft length (default: the fit plan's).")]
LogOption = Annotated[Path | None, typer.Option("--log", help="Append one line per request (bench format + figures).")]
EngineOption = Annotated[
    str | None,
    typer.Option(
        "--engine",
        help="server (llama-server started here, the default) or remote (the server at --url: vLLM, SGLang or "
        "another llama-server, its window and drafter asked of it).",
    ),
]
RemoteApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--remote-api-key",
        help="The remote server's key, as @FILE (a file only you can read). Default: DSPINE_API_KEY.",
    ),
]
PrintConfigOption = Annotated[
    str | None,
    typer.Option(
        "--print-config",
        help="Print how to point a tool here (its window and compaction point too) and exit: "
        "aider, opencode, continue, codex, claude-code, qwen-code, llm, zed, curl.",
    ),
]
