"""`dspine list`'s table: every row has exactly its six columns, a pull with no files too."""

from __future__ import annotations

from rich.console import Console

from app.cli_views import list_table
from app.hub.store import Manifest, PullRecord


def test_a_pull_without_files_fills_the_six_columns_and_shows_its_status(tmp_path):
    manifest = Manifest(tmp_path / "manifest.json")
    manifest.records["empty"] = PullRecord("empty", "catalog", "Q8_0", None, None, [])
    table = list_table(manifest)
    assert [c.header for c in table.columns] == ["name", "role", "size", "on disk", "status", "path"]
    assert all(len(c._cells) == 1 for c in table.columns)
    assert table.columns[4]._cells[0] == "missing" and table.columns[5]._cells[0] == ""
    console = Console(width=200, record=True)
    console.print(table)
    assert "│ empty │      │      │         │ missing │      │" in console.export_text()
