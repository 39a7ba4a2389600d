"""Settings typed end to end (issue 26, item 4): the type checker sees each setting,
`debug = true` in the file works like --debug, every path dspine keeps is settable."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys

import pytest

from app.paths import adaptive_draft_file, llama_server_build
from app.settings import SPECS, Settings, load_settings, parse_bool
from tests.conftest import ROOT

MISUSE = """
from app.settings import load_settings

settings = load_settings()
settings.ctx  # no such setting
settings.download_retries + "x"  # an int
settings.debug = True  # frozen
"""

PROPER = """
from pathlib import Path

from app.settings import load_settings

settings = load_settings()
folder: Path = settings.adaptive_draft_file.parent
retries: int = settings.download_retries + 1
shown: bool = settings.debug
"""


def test_mypy_sees_each_setting_and_refuses_a_misuse(tmp_path):
    (tmp_path / "misuse.py").write_text(MISUSE)
    (tmp_path / "proper.py").write_text(PROPER)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "mypy-cache"),
            "--follow-imports=silent",
            str(tmp_path / "misuse.py"),
            str(tmp_path / "proper.py"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = done.stdout + done.stderr
    assert done.returncode == 1, report
    errors = [line for line in report.splitlines() if ": error:" in line]
    assert all("misuse.py" in line for line in errors), report  # the proper use passes
    assert any(':5: error: "Settings" has no attribute "ctx"' in line for line in errors), report
    assert any(":6: error: Unsupported operand types" in line and '"int" and "str"' in line for line in errors)
    assert any(":7: error:" in line and "read-only" in line for line in errors), report
    assert len(errors) == 3, report


def test_the_table_of_settings_is_the_dataclass(tmp_path, monkeypatch):
    """One declaration per setting: the typed field carries its parser, default and meaning."""
    keys = [f.name for f in dataclasses.fields(Settings) if f.name not in ("sources", "file", "file_exists")]
    assert [spec.key for spec in SPECS] == keys
    monkeypatch.setenv("DSPINE_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")
    settings = load_settings({})
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.debug = True  # type: ignore[misc]
    assert set(settings.sources) == set(keys) and set(settings.sources.values()) == {"default"}


@pytest.mark.parametrize(
    ("text", "expected"), [(True, True), ("yes", True), ("ON", True), ("1", True), ("0", False), ("", False)]
)
def test_one_reading_of_true_and_false(text, expected):
    assert parse_bool(text) is expected


def test_parse_bool_refuses_anything_else():
    with pytest.raises(ValueError, match="true or false"):
        parse_bool("maybe")


# -- debug = true in the file --------------------------------------------------------------


def test_debug_in_the_settings_file_shows_the_traceback_and_only_then(dspine, tmp_path):
    config = tmp_path / "settings.toml"
    config.write_text("debug = false\n")
    plain = dspine("rm", "ghost", "--yes", extra_env={"DSPINE_CONFIG": str(config)})
    assert plain.returncode == 2 and "'ghost' has not been pulled" in plain.stderr
    assert "Traceback" not in plain.stderr
    config.write_text("# as a user writes it\ndebug = true\n")
    shown = dspine("rm", "ghost", "--yes", extra_env={"DSPINE_CONFIG": str(config)})
    assert shown.returncode == 2 and "'ghost' has not been pulled" in shown.stderr  # same code, same words
    assert "Traceback" in shown.stderr and "raise UsageError" in shown.stderr
    listed = dspine("config", extra_env={"DSPINE_CONFIG": str(config)})
    assert listed.returncode == 0 and "debug" in listed.stdout and "True" in listed.stdout


def test_a_bad_debug_value_is_a_settings_error_and_the_environment_still_decides(dspine, tmp_path):
    config = tmp_path / "settings.toml"
    config.write_text('debug = "maybe"\n')
    bad = dspine("list", extra_env={"DSPINE_CONFIG": str(config)})
    assert bad.returncode == 8 and "Traceback" not in bad.stderr
    assert f"bad value 'maybe' for debug ({config} line 1): must be true or false" in bad.stderr
    # A file that does not load: DSPINE_DEBUG, read by the same rule, still asks for the traceback.
    config.write_text("debug = true\nmodels_dir = \n")
    loud = dspine("list", extra_env={"DSPINE_CONFIG": str(config), "DSPINE_DEBUG": "yes"})
    assert loud.returncode == 8 and "Traceback" in loud.stderr


# -- one module for every path -------------------------------------------------------------


def _importers_of(name: str) -> list[str]:
    found = []
    for path in sorted([*(ROOT / "app").rglob("*.py"), *(ROOT / "backends").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if any(n == name or n.startswith(name + ".") for n in names):
                found.append(path.relative_to(ROOT).as_posix())
    return found


def test_only_the_paths_module_asks_where_the_user_folders_are():
    assert _importers_of("platformdirs") == ["app/paths.py"]


def test_data_dir_moves_everything_under_it_and_each_file_moves_alone(tmp_path, monkeypatch):
    config = tmp_path / "settings.toml"
    config.write_text("")
    monkeypatch.setenv("DSPINE_CONFIG", str(config))
    environ = {"DSPINE_DATA_DIR": str(tmp_path / "data")}
    settings = load_settings(environ)
    assert settings.models_dir == tmp_path / "data" / "models"
    assert settings.chats_db == tmp_path / "data" / "chats.db"
    assert settings.adaptive_draft_file == adaptive_draft_file(tmp_path / "data")
    assert settings.mcp_switches_file.parent == tmp_path / "data"
    assert settings.llama_server_build == llama_server_build(tmp_path / "data")
    assert settings.sources["models_dir"] == "default"
    config.write_text(f'adaptive_draft_file = "{tmp_path / "learned.json"}"\ncache_dir = "{tmp_path / "c"}"\n')
    environ["DSPINE_LOG_DIR"] = str(tmp_path / "logs")
    moved = load_settings(environ)
    assert moved.adaptive_draft_file == tmp_path / "learned.json"
    assert moved.sources["adaptive_draft_file"] == f"file {config}"
    assert moved.header_cache == tmp_path / "c" / "headers" and moved.log_dir == tmp_path / "logs"
    assert moved.models_dir == tmp_path / "data" / "models"  # the others stay


def test_a_bad_path_setting_says_what_where_and_what_to_do(dspine, tmp_path):
    config = tmp_path / "settings.toml"
    config.write_text("adaptive_draft_file = 3\n")
    done = dspine("config", extra_env={"DSPINE_CONFIG": str(config)})
    assert done.returncode == 8 and "Traceback" not in done.stderr
    assert f"bad value 3 for adaptive_draft_file ({config} line 1): must be a path" in done.stderr
    assert "draft lengths learned" in done.stderr  # the fix line says what the setting is


def test_dspine_config_lists_the_path_settings_with_their_variables(dspine, tmp_path):
    wide = {"COLUMNS": "500"}  # each path on one line of the table
    shown = dspine("config", extra_env={"DSPINE_ADAPTIVE_DRAFT_FILE": str(tmp_path / "a.json"), **wide})
    assert shown.returncode == 0, shown.stderr
    for key in ("data_dir", "cache_dir", "log_dir", "adaptive_draft_file"):
        assert key in shown.stdout and f"DSPINE_{key.upper()}" in shown.stdout
    assert str(tmp_path / "a.json") in shown.stdout and "env DSPINE_ADAPTIVE_DRAFT_FILE" in shown.stdout


def test_the_dspine_build_is_found_in_the_data_dir_the_settings_name(tmp_path, monkeypatch):
    from app.run.engines import llama_server_binary

    config = tmp_path / "settings.toml"
    config.write_text(f'data_dir = "{tmp_path / "elsewhere"}"\n')
    monkeypatch.setenv("DSPINE_CONFIG", str(config))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no llama-server on PATH
    build = tmp_path / "elsewhere" / "llama.cpp" / "bin" / "llama-server"
    build.parent.mkdir(parents=True)
    build.write_text("#!/bin/sh\n")
    build.chmod(0o755)
    assert llama_server_binary(load_settings({})) == build


def test_the_remote_url_setting_is_used_only_where_the_engine_is_remote(tmp_path, monkeypatch):
    """`engine = remote` in the config needed --url on every command; with `remote_url` it does
    not, and a URL setting alone does not send anything to a server."""
    import pytest

    from app.errors import ConfigError
    from app.run.engines import engine_and_url
    from app.settings import load_settings

    monkeypatch.setenv("DSPINE_REMOTE_URL", "http://gpu-box:8000/v1")
    monkeypatch.setenv("DSPINE_ENGINE", "remote")
    settings = load_settings()
    assert engine_and_url(None, settings, None) == ("remote", "http://gpu-box:8000/v1")
    assert engine_and_url(None, settings, "http://other:1/v1") == ("remote", "http://other:1/v1")
    assert engine_and_url("inproc", settings, None) == ("inproc", None)
    monkeypatch.setenv("DSPINE_ENGINE", "inproc")
    assert engine_and_url(None, load_settings(), None) == ("inproc", None)
    monkeypatch.setenv("DSPINE_REMOTE_URL", "gpu-box:8000")
    with pytest.raises(ConfigError, match="remote_url"):
        load_settings()
