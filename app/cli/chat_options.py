"""`dspine chat`'s own options (those it shares with other commands are in base.py), each an
annotated type, so the command's signature lists what it takes and not how each is helped."""

from __future__ import annotations

from typing import Annotated

import typer

from ..choices import OutputFormatName, PermissionMode, Think

CtxOption = Annotated[
    int, typer.Option("--ctx", help="Context length per conversation; the start says how much the fit plan allows.")
]
ThinkOption = Annotated[
    Think | None,
    typer.Option(
        "--think",
        help="Start with thinking on or off (Ctrl+T switches). Default: on; a saved chat you go on with "
        "keeps the mode it was left in.",
    ),
]
ModeOption = Annotated[
    PermissionMode | None,
    typer.Option(
        "--mode",
        help="Start in this permission mode (Shift+Tab cycles): ask asks before edits, writes, commands and "
        "MCP calls; accept-edits applies edits and writes in the project without asking (commands and MCP "
        "calls still ask); plan offers only the reading tools, for a plan. Default: ask; a saved chat you "
        "go on with keeps the mode it was left in.",
    ),
]
NoToolsOption = Annotated[
    bool,
    typer.Option("--no-tools", help="A plain chat: no project tools (read, search, edit, run); /tools on switches."),
]
ContinueOption = Annotated[
    bool,
    typer.Option("--continue", "-c", help="Go on with the last chat of this project, the model's context as it was."),
]
ResumeOption = Annotated[
    int | None,
    typer.Option(
        "--resume", help="Go on with the saved chat of this number (Ctrl+L lists them), its context as it was."
    ),
]
PrintOption = Annotated[
    str | None,
    typer.Option(
        "--print",
        "-p",
        help="Headless: send this prompt (- reads standard input), run the agent on the project, print the "
        "result and exit; nothing waits on a terminal (see --allow, --deny, --mode).",
    ),
]
OutputFormatOption = Annotated[
    OutputFormatName,
    typer.Option(
        "--output-format", help="With -p: text, json (one object at the end) or stream-json (a line an event)."
    ),
]
AllowOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allow",
        help="With -p: a tool that may run without asking (edit_file, mcp__srv__tool), or one command word for "
        "word (run_command:pytest -q); repeatable. What would ask and no rule allows is denied.",
    ),
]
DenyOption = Annotated[
    list[str] | None, typer.Option("--deny", help="With -p: a tool or command that never runs; repeatable.")
]
AllowUnsandboxedOption = Annotated[
    bool,
    typer.Option(
        "--allow-unsandboxed",
        help="With -p: where this system has no working sandbox (bubblewrap, sandbox-exec), let the commands "
        "--allow covers run without one; else they are denied.",
    ),
]
