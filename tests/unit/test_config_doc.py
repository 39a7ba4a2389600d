"""docs/config.md has a row for every setting, with its environment variable."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import app.settings

ROOT = Path(__file__).resolve().parents[2]


def setting_keys() -> list[str]:
    return [f.name for f in dataclasses.fields(app.settings.Settings) if "setting" in f.metadata]


def test_every_setting_has_its_row_in_docs_config_md():
    text = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    keys = setting_keys()
    assert {"models_dir", "speculation", "debug"} <= set(keys)
    missing = [key for key in keys if f"| `{key}` (`DSPINE_{key.upper()}`" not in text]
    assert not missing, f"docs/config.md has no row for {missing}: add one under `dspine config`"
