"""docs/cli.md is the commands' own --help: a test fails when an option changes without it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer.main

from app.cli import app

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "cli_reference.py"
REFERENCE = ROOT / "docs" / "cli.md"


def check(path: Path) -> subprocess.CompletedProcess[str]:
    # In a child process: the script pins Typer's console width and colours for the whole process.
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--path", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_docs_cli_md_matches_every_commands_help():
    result = check(REFERENCE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_stale_reference_fails_and_names_the_command_to_run(tmp_path):
    stale = tmp_path / "cli.md"
    # As if --seed had been added to `dspine bench` without regenerating the file.
    lines = REFERENCE.read_text(encoding="utf-8").splitlines(keepends=True)
    stale.write_text("".join(line for line in lines if "--seed" not in line), encoding="utf-8")
    result = check(stale)
    assert result.returncode == 1
    assert "is stale" in result.stdout and "python scripts/cli_reference.py" in result.stdout


def test_every_command_and_option_has_its_place_in_the_reference():
    text = REFERENCE.read_text(encoding="utf-8")
    group = typer.main.get_command(app)
    commands = getattr(group, "commands", {})
    assert {"pull", "fit", "chat", "serve", "bench", "run"} <= set(commands)
    for name, command in commands.items():
        heading = f"## `dspine {name}`"
        assert heading in text, f"{heading} missing from docs/cli.md"
        section = text.split(heading, 1)[1].split("\n## ", 1)[0]
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("-"):
                    assert opt in section, f"{opt} of dspine {name} missing from docs/cli.md"
