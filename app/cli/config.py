"""`dspine config`: the settings and where they come from."""

from __future__ import annotations

import typer
from rich.text import Text

from ..cli_views import config_table
from ..settings import load_settings
from ..terminal_text import controls_shown
from .base import (
    app,
    out,
)


@app.command()
def config(
    path: bool = typer.Option(False, "--path", help="Print only the settings file's path."),
) -> None:
    """Show the settings file and every setting in force: its value, where it came from, its
    environment variable and what it means. Set one in the settings file (`dspine config --path`
    prints where) or with its environment variable."""
    if path:  # without reading it: this is how people find a file that does not parse
        from ..settings import config_file

        out.print(Text(controls_shown(str(config_file()))))
        return
    settings = load_settings()
    out.print(config_table(settings))
