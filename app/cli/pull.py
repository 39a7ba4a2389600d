"""`dspine pull` and `dspine convert`: models onto this machine."""

from __future__ import annotations

from pathlib import Path

import typer

from ..cli_views import RichPullProgress, render_pull_result, shown
from ..errors import Interrupted
from ..hub.store import Manifest, file_state
from ..models.catalog import NO_DRAFTER, load_catalog
from ..settings import load_settings
from ..units import format_bytes
from .base import (
    _open_manifest,
    app,
    err,
    out,
)


@app.command()
def pull(
    name: str = typer.Argument(..., help="A catalog name (qwen3.8-27b) or a hub repository ORG/REPO[:QUANT]."),
    quant: str | None = typer.Option(None, "--quant", "-q", help="Target quant, e.g. Q4_K_M, Q8_0."),
    drafter: str | None = typer.Option(
        None,
        "--draft",
        "--drafter",
        "-d",
        help=f"Drafter variant from the catalog, or {NO_DRAFTER} (default: the one the llama-server here runs).",
    ),
    keep_safetensors: bool = typer.Option(
        False,
        "--keep-safetensors",
        help="Keep a drafter's safetensors checkpoint after converting it to GGUF (deleted by default).",
    ),
) -> None:
    """Download a model and its drafter: resumable, sha256-verified (a safetensors drafter is converted here)."""
    from ..hub.drafter_choice import pull_request
    from ..hub.pull import pull as pull_model

    settings = load_settings()
    request, _ = pull_request(name, load_catalog(settings.catalog), quant, drafter, settings, keep_safetensors)
    _open_manifest(settings)
    err.print(f"pulling [bold]{shown(request.name)}[/] into {shown(settings.models_dir)}")
    try:
        result = pull_model(request, settings, RichPullProgress(err))
    except KeyboardInterrupt:
        record = Manifest(settings.manifest_path).records.get(request.name)
        saved = sum(file_state(f).on_disk for f in record.files) if record else 0
        total = sum(f.size for f in record.files) if record else 0
        raise Interrupted(
            f"pull of {request.name} interrupted with {format_bytes(saved)} of {format_bytes(total)} on disk",
            f"run `dspine pull {name}` again: it fetches only the rest",
        ) from None
    render_pull_result(out, result)


@app.command()
def convert(
    folder: Path = typer.Argument(..., help="A safetensors block drafter: config.json and its .safetensors files."),
    target: Path = typer.Option(..., "--target", "-t", help="The target's GGUF (the tokenizer comes from it)."),
    output: Path | None = typer.Option(None, "--output", "-o", help="The GGUF to write (default: FOLDER.gguf)."),
    quant: str = typer.Option(
        "BF16",
        "--quant",
        "-q",
        help="BF16, F16 or F32: not quantized (BF16/F16: the checkpoint's half type); or Q8_0, Q6_K, Q5_K_M, "
        "Q4_K_M or Q4_0 (llama-quantize; a DSpine code table stays Q8_0).",
    ),
) -> None:
    """Convert a DFlash, DFlash2, DSpark or DSpine drafter on disk to GGUF (every check first)."""
    from ..errors import ConversionError
    from ..hub.convert_run import ConvertProgress, convert_checkpoint

    config = folder / "config.json"
    shards = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    if not config.is_file() or not shards:
        raise ConversionError(
            f"{folder} holds no config.json and .safetensors files",
            "give the folder of a downloaded safetensors drafter; nothing was written",
        )
    if not target.is_file():
        raise ConversionError(f"the target {target} is not a file", "give the target model's .gguf")
    final = output or folder.resolve().with_name(folder.resolve().name + ".gguf")
    if not final.parent.is_dir():
        raise ConversionError(f"{final.parent} is not a folder", "give -o a path in an existing folder")
    settings = load_settings()
    from backends.llama_server import candidates

    servers = tuple(path for _, path in candidates(settings.llama_server, settings.llama_server_build))
    bars = RichPullProgress(err)

    class Report(ConvertProgress):
        def stage(self, what: str, total: int) -> None:
            bars.convert_stage(what, total)

        def advance(self, n: int) -> None:
            bars.convert_advance(n)

    try:
        converted = convert_checkpoint(config, shards, target, final, quant, servers, Report(), final.stem)
    finally:
        bars.end()
    out.print(
        f"{shown(converted.path)}: a {converted.kind} drafter, {converted.tensors} tensors, "
        f"{format_bytes(converted.size)}",
        soft_wrap=True,
    )
