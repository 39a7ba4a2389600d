"""`dspine doctor`: what is installed and found, and what to do about it."""

from __future__ import annotations

import json

import typer
from rich.table import Table
from rich.text import Text

from ..models.catalog import load_catalog
from ..settings import load_settings
from ..terminal_text import controls_shown
from .base import (
    ApiKeyOption,
    app,
    err,
    out,
)


@app.command()
def doctor(
    model: str | None = typer.Option(
        None, "--model", "-m", help="The model you mean to use: what it needs is required."
    ),
    quick: bool = typer.Option(False, "--quick", help="Check file sizes only, not checksums."),
    as_json: bool = typer.Option(False, "--json", help="Print the checks as a JSON list."),
    next_step: bool = typer.Option(
        False, "--next-step", help="Print only the command to run next (what the installer ends with)."
    ),
    url: str | None = typer.Option(
        None, "--url", help="Check a remote server instead: its model, window, speculation and what it reports."
    ),
    api_key: ApiKeyOption = None,
) -> None:
    """Check Python, llama.cpp builds, GPUs, pulled models, disk and hub; say how to fix each."""
    from ..doctor import check_dspine, check_python, run_checks
    from ..doctor import next_step as next_command

    settings = load_settings()
    if url is not None:
        from ..doctor_remote import remote_checks

        _doctor_output([check_python(), check_dspine(), *remote_checks(url, api_key, model)], as_json)
        return
    if next_step:
        out.print(next_command(settings, load_catalog(settings.catalog)), markup=False, highlight=False, soft_wrap=True)
        return
    shown: dict[str, int] = {}

    def progress(label: str, done: int, total: int) -> None:
        percent = done * 100 // max(total, 1)
        if not as_json and percent // 25 != shown.get(label, -1):
            shown[label] = percent // 25
            err.print(f"[dim]verifying {label}: {percent}%[/]")

    checks = run_checks(settings, load_catalog(settings.catalog), model, verify=not quick, progress=progress)
    _doctor_output(checks, as_json)


def _doctor_output(checks, as_json: bool) -> None:
    if as_json:
        out.print_json(json.dumps([c.to_json() for c in checks]))
    else:
        table = Table(title="dspine doctor", title_justify="left")
        for column in ("check", "", "detail", "fix"):
            table.add_column(column, overflow="fold")
        for c in checks:
            mark = "[green]ok[/]" if c.ok else ("[red]FAIL[/]" if c.required else "[yellow]warn[/]")
            # Details carry what servers and files say (a model's name, a path): text, never markup.
            table.add_row(Text(c.name), mark, Text(controls_shown(c.detail)), Text(controls_shown(c.fix)))
        out.print(table)
    if any(c.required and not c.ok for c in checks):
        raise typer.Exit(1)
