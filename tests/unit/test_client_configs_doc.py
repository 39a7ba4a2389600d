"""docs/client-configs.md is what `dspine serve --print-config` prints: stale means a failing test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from app.serve.client_config import TOOLS

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "client_configs.py"
PAGE = ROOT / "docs" / "client-configs.md"


def check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--path", str(path)], capture_output=True, text=True, timeout=60
    )


def test_the_page_matches_what_serve_prints_for_every_tool():
    result = check(PAGE)
    assert result.returncode == 0, result.stdout + result.stderr
    text = PAGE.read_text(encoding="utf-8")
    assert all(f"\n## {tool}\n" in text for tool in TOOLS)
    assert "DSPINE_SERVE_API_KEY" in text  # the note on keys: a key is named, never printed


def test_a_stale_page_fails_and_names_the_command_to_run(tmp_path):
    stale = tmp_path / "client-configs.md"
    stale.write_text(PAGE.read_text(encoding="utf-8").replace("25396", "25000"), encoding="utf-8")
    result = check(stale)
    assert result.returncode == 1 and "python scripts/client_configs.py" in result.stdout
