"""`dspine --version` prints the installed package's version, the one pyproject.toml declares."""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from typer.testing import CliRunner

import app.version
from app.cli import app as cli

ROOT = Path(__file__).resolve().parents[2]


def test_version_prints_the_package_version_and_exits_zero():
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output == f"dspine {version('dspine')}\n"
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert result.output.split()[1] == declared


def test_version_runs_before_any_command():
    # --version is eager: it answers even next to a command that would fail.
    result = CliRunner().invoke(cli, ["--version", "fit", "--kv", "nonsense"])
    assert result.exit_code == 0 and result.output.startswith("dspine ")


def test_a_checkout_that_was_never_installed_says_so(monkeypatch):
    def missing(name: str) -> str:
        raise PackageNotFoundError(name)

    monkeypatch.setattr(app.version, "version", missing)
    assert app.version.package_version().startswith("unknown (not installed")
