"""`dspine bench`'s own options (those it shares with other commands are in base.py), each an
annotated type, so the command's signature lists what it takes and not how each is helped."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..choices import BenchThink

DraftersOption = Annotated[
    str,
    typer.Option(
        "--draft",
        "--drafters",
        "-d",
        help="all (n-gram copies and what is pulled), none, or a comma list of ngram, variants or .gguf files.",
    ),
]
PromptsOption = Annotated[
    list[Path] | None,
    typer.Option("--prompts", help="JSONL of chats (one a line); repeatable. Default: the built-in sets."),
]
ThinkOption = Annotated[BenchThink, typer.Option("--think", help="The thinking mode to measure, or both.")]
NMaxOption = Annotated[
    str, typer.Option("--n-max", help="Draft lengths to try, e.g. 2,4,8,16 (default: the drafter kind's).")
]
AdaptiveOption = Annotated[
    bool,
    typer.Option(
        "--adaptive/--no-adaptive",
        help="Also run each drafter with the draft length learned per think mode (in-process, and on a "
        "llama-server that honours a per-request length: dspine's patched build).",
    ),
]
RepeatOption = Annotated[
    int | None,
    typer.Option(
        "--repeat", help="Rounds: each setup runs each prompt once a round, in turns (default 3; 2 with a GPU)."
    ),
]
MaxTokensOption = Annotated[
    int | None,
    typer.Option("--max-tokens", "-n", help="Tokens generated per prompt (default 128; 64 without a GPU)."),
]
CtxOption = Annotated[
    int,
    typer.Option("--ctx", help="Context length; raised for a --depth that needs more, where the fit plan has room."),
]
SeedOption = Annotated[
    int,
    typer.Option(
        "--seed", help="Sampling seed of the first round; each round the next (sampled replies are other texts)."
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")]
MarkdownOption = Annotated[bool, typer.Option("--markdown", help="Print a Markdown table.")]
DepthOption = Annotated[
    str,
    typer.Option("--depth", help="Tokens of context before each prompt, a list: 0,8k,32k (acceptance by depth)."),
]
ContextFilesOption = Annotated[
    list[Path] | None,
    typer.Option("--context-files", help="Source files or folders the context is read from (default: dspine's own)."),
]
