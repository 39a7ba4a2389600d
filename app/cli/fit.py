"""`dspine fit`: what fits in VRAM next to the drafter, and why."""

from __future__ import annotations

import json
from pathlib import Path

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
    err,
    out,
)


@app.command()
def fit(
    model: str | None = typer.Argument(
        None,
        help="A catalog name (default: the model chat starts with here; qwen3.8-27b with a GPU or --vram), "
        "ORG/REPO[:QUANT], or a .gguf file.",
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
    from ..fit.hardware import detect
    from ..fit.service import DEFAULT_MODEL, FitRequest
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
    catalog = load_catalog(settings.catalog)
    hardware = detect()
    model = _one_model(model, model_option)
    if model is None and vram_bytes is None:
        model = _model_here(catalog, hardware, settings)
    request = FitRequest(model, draft, quant, goal, ctx, kv, gpu, vram_bytes, measure)
    result = fit_model(request, catalog, settings, hardware)
    if as_json:
        out.print_json(json.dumps(result.plan.to_json()))
    else:
        fit_view(out, result, Path(request.model).name if request.model else DEFAULT_MODEL)
    if not result.plan.fits:
        raise typer.Exit(10)


def _model_here(catalog, hardware, settings) -> str | None:
    """The model chat and run start with here (the small one where no GPU was found) once it is
    pulled; before, None (the default bundle's plan), said on stderr so --json stays JSON."""
    from ..fit.service import DEFAULT_MODEL
    from ..hub.store import Manifest, record_status
    from ..run.first_run_offer import default_model

    records = Manifest(settings.manifest_path).records
    here = default_model(catalog, hardware, DEFAULT_MODEL, records)
    if here in records and record_status(records[here]) == "complete":
        return here
    if here != DEFAULT_MODEL:
        err.print(
            f"No NVIDIA GPU here: chat and run start with {here} (`dspine pull {here}`, then "
            f"`dspine fit {here}`). The plan for {DEFAULT_MODEL} on this CPU:",
            markup=False,
        )
    return None
