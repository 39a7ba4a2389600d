"""`dspine run`'s own options (those it shares with other commands are in base.py), each an
annotated type, so the command's signature lists what it takes and not how each is helped."""

from __future__ import annotations

from typing import Annotated

import typer

from ..choices import Think
from .base import MODEL_HELP

FirstArgument = Annotated[
    str | None,
    typer.Argument(
        metavar="MODEL", show_default=False, help=MODEL_HELP + " Or give it as --model, then only the prompt."
    ),
]
SecondArgument = Annotated[
    str | None,
    typer.Argument(metavar="PROMPT", show_default=False, help="What to ask; - reads it from standard input."),
]
ThinkOption = Annotated[
    Think | None,
    typer.Option(
        "--think", help="The model's thinking mode. Default: on, or off for a model whose chat template has none."
    ),
]
TempOption = Annotated[
    float | None, typer.Option("--temp", help="Temperature (0 = greedy); default: the mode's preset.")
]
TopPOption = Annotated[float | None, typer.Option("--top-p", help="Top-p; default: the mode's preset.")]
TopKOption = Annotated[int | None, typer.Option("--top-k", help="Top-k (0 = off); default: the mode's preset.")]
MinPOption = Annotated[float | None, typer.Option("--min-p", help="Min-p; default: the mode's preset.")]
PresencePenaltyOption = Annotated[
    float | None,
    typer.Option(
        "--presence-penalty", help="Presence penalty; default: the mode's preset (Qwen3.8: 1.5 with thinking off)."
    ),
]
SeedOption = Annotated[int | None, typer.Option("--seed", help="Sampling seed.")]
MaxTokensOption = Annotated[int | None, typer.Option("--max-tokens", "-n", help="Stop after this many tokens.")]
NMaxOption = Annotated[int | None, typer.Option("--n-max", help="Draft length: tokens drafted per step.")]
CtxOption = Annotated[int, typer.Option("--ctx", help="Context length.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object at the end instead of streaming.")]
