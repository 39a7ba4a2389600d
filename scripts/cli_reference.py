"""Write docs/cli.md from the commands' own `--help`, so the reference cannot drift.

    python scripts/cli_reference.py           # rewrite docs/cli.md
    python scripts/cli_reference.py --check   # exit 1 when docs/cli.md is stale

The help is rendered at a fixed width with no colour, so the file is the same on
every machine; tests/unit/test_cli_reference.py runs the check.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from generated_page import generated_page_main  # noqa: E402

REFERENCE = ROOT / "docs" / "cli.md"
WIDTH = 100
REGENERATE = "python scripts/cli_reference.py"

HEADER = f"""# Command-line reference

Generated from each command's `--help` by `{REGENERATE}`; do not edit by hand
(`tests/unit/test_cli_reference.py` fails when this file and `--help` differ).
What each command does, with examples: [index.md](index.md).
"""


def _commands(group: object, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command path under the group, the group itself first, in declared order."""
    yield path
    # Typer carries its own copy of click, so look for subcommands rather than a click class.
    for name, command in getattr(group, "commands", {}).items():
        if not command.hidden:
            yield from _commands(command, (*path, name))


def _help_text(group: object, path: tuple[str, ...]) -> str:
    from click.testing import CliRunner

    result = CliRunner().invoke(group, [*path, "--help"], prog_name="dspine", color=False)  # type: ignore[arg-type]
    if result.exit_code != 0:
        raise SystemExit(f"`dspine {' '.join(path)} --help` failed: {result.output}")
    lines = [line.rstrip() for line in result.output.splitlines()]
    return "\n".join(lines).strip("\n")


def render() -> str:
    """The whole of docs/cli.md, as the commands' help says it now."""
    sys.path.insert(0, str(ROOT))
    import typer.main
    import typer.rich_utils

    # Typer reads its console's width and colours at import; pin them for a stable file.
    typer.rich_utils.MAX_WIDTH = WIDTH
    typer.rich_utils.COLOR_SYSTEM = None
    typer.rich_utils.FORCE_TERMINAL = False
    from app.cli import app

    group = typer.main.get_command(app)
    parts = [HEADER]
    for path in _commands(group):
        title = " ".join(("dspine", *path))
        parts.append(f"## `{title}`\n\n```text\n{_help_text(group, path)}\n```\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    return generated_page_main(__doc__ or "", REFERENCE, render, "the commands' --help", REGENERATE, argv)


if __name__ == "__main__":
    sys.exit(main())
