"""The CLI as a user meets it: help, config, list and rm round trip, errors."""

import json

from tests.conftest import DRAFTER_Q4, DSPINE_REPO, TARGET_Q4, TARGET_REPO


def test_help_lists_every_command_with_one_line(dspine):
    result = dspine("--help")
    assert result.returncode == 0
    for command in ("pull", "list", "rm", "config"):
        assert f"│ {command} " in result.stdout


def test_config_shows_file_and_sources(dspine, env, tmp_path):
    result = dspine("config", extra_env={"DSPINE_DOWNLOAD_RETRIES": "3"})
    assert result.returncode == 0
    assert str(tmp_path / "config" / "dspine" / "config.toml") in result.stdout
    assert "env DSPINE_DOWNLOAD_RETRIES" in result.stdout
    assert dspine("config", "--path").stdout.strip() == str(tmp_path / "config" / "dspine" / "config.toml")


def test_bad_config_file_is_a_message_not_a_traceback(dspine, tmp_path):
    path = tmp_path / "config" / "dspine" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text("models_dir = [\n")
    result = dspine("list")
    assert result.returncode == 8
    assert "is not valid TOML" in result.stderr and "Traceback" not in result.stderr
    debug = dspine("--debug", "list")
    assert "Traceback" in debug.stderr


def test_list_and_rm_round_trip(dspine, models_dir):
    assert "nothing pulled yet" in dspine("list").stdout
    assert "dspine pull smollm2-135m" in dspine("list").stdout  # no GPU here: the small model first
    assert dspine("pull", "qwen3.8-27b", "--drafter", "dspine-gguf").returncode == 0
    assert dspine("pull", f"{TARGET_REPO}:Q4_K_M").returncode == 0  # shares the target file

    table = dspine("list")
    assert table.returncode == 0
    assert "qwen3.8-27b" in table.stdout and "complete" in table.stdout
    data = json.loads(dspine("list", "--json").stdout)
    assert set(data["pulls"]) == {"qwen3.8-27b", f"{TARGET_REPO}:Q4_K_M"}
    assert data["pulls"]["qwen3.8-27b"]["status"] == "complete"

    refused = dspine("rm", "qwen3.8-27b")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert (models_dir / DSPINE_REPO / DRAFTER_Q4).exists()

    removed = dspine("rm", "qwen3.8-27b", "--yes")
    assert removed.returncode == 0, removed.stderr
    assert not (models_dir / DSPINE_REPO / DRAFTER_Q4).exists()
    assert (models_dir / TARGET_REPO / TARGET_Q4).exists()  # still used by the other pull
    assert "another pull uses it" in removed.stdout

    assert dspine("rm", f"{TARGET_REPO}:q4_k_m", "--yes").returncode == 0
    assert not (models_dir / TARGET_REPO).exists()
    assert json.loads(dspine("list", "--json").stdout)["pulls"] == {}

    missing = dspine("rm", "qwen3.8-27b", "--yes")
    assert missing.returncode == 2 and "has not been pulled" in missing.stderr


def test_drafter_none_and_builtin_mtp(dspine, hub):
    result = dspine("pull", "qwen3.8-27b", "--drafter", "mtp")
    assert result.returncode == 0, result.stderr
    assert "built into the target file" in result.stdout
    assert hub.served_bytes(DSPINE_REPO) == 0
    data = json.loads(dspine("list", "--json").stdout)["pulls"]["qwen3.8-27b"]
    assert data["drafter"] == "mtp" and data["drafter_kind"] == "mtp"
    assert [f["role"] for f in data["files"]] == ["target"]


def test_a_table_written_to_a_file_is_not_cut_at_80_columns(env, tmp_path):
    """A new user's `dspine bench > results.txt` had its headers cut ("spee…", "acce…"): without
    a terminal Rich takes 80 columns. A file gets room (COLUMNS, where set, still wins)."""
    import subprocess

    from tests.conftest import ROOT, dspine_cmd

    without = {k: v for k, v in env.items() if k != "COLUMNS"}
    saved = tmp_path / "catalog.txt"
    with saved.open("w") as sink:
        done = subprocess.run(dspine_cmd("list", "--catalog"), env=without, cwd=ROOT, stdout=sink, timeout=60)
    assert done.returncode == 0
    assert "unsloth/Qwen3.8-27B-GGUF" in saved.read_text()
