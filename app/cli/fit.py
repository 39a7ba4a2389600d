"""`dspine fit`: what fits in VRAM next to the drafter, and why."""

from __future__ import annotations

import json

import typer

from ..choices import (
    Goal,
    KvType,
)
from ..errors import UsageError
from ..models.catalog import load_catalog
from ..settings import load_settings
from .base import (
    ModelOption,
    _one_model,
    app,
    out,
)


@app.command()
def fit(
    model: str | None = typer.Argument(
        None, help="A catalog name (default qwen3.8-27b), ORG/REPO[:QUANT], or a .gguf file."
    ),
    model_option: ModelOption = None,
    draft: str | None = typer.Option(None, "--draft", "-d", help="Drafter variant, a .gguf file, or none."),
    quant: str | None = typer.Option(None, "--quant", "-q", help="Only this target quant."),
    goal: Goal = typer.Option(
        "speed", "--goal", help="speed: all on GPU with the best drafter; context: the longest context."
    ),
    ctx: int | None = typer.Option(None, "--ctx", help="A fixed context length in tokens."),
    kv: KvType | None = typer.Option(None, "--kv", help="KV cache type (default: the plan's)."),
    gpu: int = typer.Option(0, "--gpu", help="Which GPU to plan for."),
    vram: str | None = typer.Option(None, "--vram", help="Plan for this much VRAM instead, e.g. 24GiB."),
    measure: bool = typer.Option(True, "--measure/--no-measure", help="Ask llama.cpp for compute buffers (dry run)."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as one JSON object."),
) -> None:
    """Plan what fits in this GPU's VRAM next to the drafter, and say why."""
    from ..cli_views import fit_view
    from ..fit.service import FitRequest
    from ..fit.service import fit as fit_model
    from ..units import parse_bytes

    if ctx is not None and ctx < 256:
        raise UsageError(f"--ctx {ctx} is too small", "give a context of at least 256 tokens, e.g. 32768")
    if gpu < 0:
        raise UsageError(f"--gpu {gpu} is not a GPU's number", "give 0 for the first GPU (`dspine doctor` lists them)")
    try:
        vram_bytes = parse_bytes(vram) if vram else None
    except ValueError as exc:
        raise UsageError(str(exc), "write it like 24GiB or 16GB") from None
    settings = load_settings()
    model = _one_model(model, model_option)
    request = FitRequest(model, draft, quant, goal, ctx, kv, gpu, vram_bytes, measure)
    result = fit_model(request, load_catalog(settings.catalog), settings)
    if as_json:
        out.print_json(json.dumps(result.plan.to_json()))
    else:
        fit_view(out, result)
    if not result.plan.fits:
        raise typer.Exit(10)
