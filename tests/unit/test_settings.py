import os
import resource
import subprocess
import time
from pathlib import Path

import pytest

from app.errors import ConfigError
from app.settings import load_settings
from tests.conftest import ROOT, dspine_cmd


@pytest.fixture
def config_file(tmp_path, monkeypatch):
    path = tmp_path / "config.toml"
    path.write_text("")  # DSPINE_CONFIG naming a missing file is an error
    monkeypatch.setenv("DSPINE_CONFIG", str(path))
    for key in (
        "DSPINE_MODELS_DIR",
        "DSPINE_DOWNLOAD_RETRIES",
        "DSPINE_CATALOG",
        "DSPINE_DEBUG",
        "DSPINE_CHATS_DB",
        "DSPINE_LLAMA_SERVER",
        "DSPINE_SERVE_ORIGINS",
        "DSPINE_SPECULATION",
    ):
        monkeypatch.delenv(key, raising=False)
    return path


def test_defaults_then_file_then_environment(config_file, tmp_path, monkeypatch):
    settings = load_settings()
    assert settings.sources["models_dir"] == "default" and settings.download_retries == 5
    config_file.write_text(f'models_dir = "{tmp_path / "m"}"\ndownload_retries = 2\n')
    settings = load_settings()
    assert settings.models_dir == tmp_path / "m"
    assert settings.sources["download_retries"] == f"file {config_file}"
    monkeypatch.setenv("DSPINE_DOWNLOAD_RETRIES", "9")
    settings = load_settings()
    assert settings.download_retries == 9
    assert settings.sources["download_retries"] == "env DSPINE_DOWNLOAD_RETRIES"
    assert settings.manifest_path == tmp_path / "m" / "manifest.json"


def test_unknown_key_suggests_the_right_one(config_file):
    config_file.write_text('model_dir = "/x"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "unknown setting 'model_dir'" in caught.value.cause
    assert "did you mean 'models_dir'" in caught.value.fix


def test_bad_value_and_bad_toml(config_file, monkeypatch):
    monkeypatch.setenv("DSPINE_DOWNLOAD_RETRIES", "many")
    with pytest.raises(ConfigError, match="bad value 'many' for download_retries"):
        load_settings()
    monkeypatch.delenv("DSPINE_DOWNLOAD_RETRIES")
    config_file.write_text("models_dir = \n")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_settings()


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('models_dir = ""\n', "models_dir"),
        ("[models_dir]\nx = 1\n", "models_dir"),
        ("# comment\nfit_margin_mib = 1.5\n", "fit_margin_mib"),
        ("download_retries = true\n", "download_retries"),
        ("read_timeout_s = 0\n", "read_timeout_s"),
        ('read_timeout_s = "soon"\n', "read_timeout_s"),
        ('speculation = "sometimes"\n', "speculation"),
    ],
)
def test_settings_are_typed_and_errors_name_the_setting_file_and_line(config_file, text, key):
    config_file.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert key in caught.value.cause and str(config_file) in caught.value.cause
    if "[" not in text:
        assert f"line {text.count(chr(10))}" in caught.value.cause


def test_a_settings_file_that_is_not_utf8_is_a_clear_error_and_config_path_still_works(env, dspine, config_file):
    config_file.write_bytes(b"models_dir = '\xff\xfe'\n")
    with pytest.raises(ConfigError, match="UTF-8"):
        load_settings()
    shown = dspine("config", "--path", extra_env={"DSPINE_CONFIG": str(config_file)})
    assert shown.returncode == 0 and shown.stdout.strip() == str(config_file)


def test_dspine_config_pointing_nowhere_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("DSPINE_CONFIG", str(tmp_path / "nowhere.toml"))
    with pytest.raises(ConfigError, match="nowhere.toml"):
        load_settings()


def test_read_timeout_takes_seconds_with_or_without_a_unit(config_file, monkeypatch):
    assert load_settings().read_timeout_s == 60.0
    config_file.write_text("read_timeout_s = 2.5\n")
    assert load_settings().read_timeout_s == 2.5
    monkeypatch.setenv("DSPINE_READ_TIMEOUT_S", "90s")
    assert load_settings().read_timeout_s == 90.0


# -- issue 22, point 9: files that are no settings file, values no path can hold ---------


def _limited_memory() -> None:
    """In the child: 2 GiB of address space, so a settings reader that reads without
    end fails with MemoryError instead of taking the machine's memory."""
    resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_fifo_or_device_as_settings_file_is_refused_at_once(dspine, tmp_path, kind):
    if kind == "fifo":
        target = tmp_path / "config.fifo"
        os.mkfifo(target)  # nobody writes: opening it to read would wait for ever
    else:
        target = Path(kind)
    started = time.monotonic()
    done = dspine("config", extra_env={"DSPINE_CONFIG": str(target)}, timeout=30, preexec_fn=_limited_memory)
    assert done.returncode == 8, done.stderr
    assert "not a settings file" in done.stderr and "DSPINE_CONFIG" in done.stderr
    assert time.monotonic() - started < 20


def test_a_folder_or_an_oversized_file_is_refused(tmp_path, monkeypatch):
    huge = tmp_path / "huge.toml"
    huge.write_bytes(b"# " + b"x" * (2 * 2**20) + b"\n")
    monkeypatch.setenv("DSPINE_CONFIG", str(huge))
    with pytest.raises(ConfigError, match="larger than 1 MiB"):
        load_settings()
    monkeypatch.setenv("DSPINE_CONFIG", str(tmp_path))
    with pytest.raises(ConfigError, match="folder"):
        load_settings()


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_fifo_or_device_as_catalog_is_refused_at_once(dspine, tmp_path, kind):
    # Issue 34: DSPINE_CATALOG=/dev/zero grew the memory without limit.
    if kind == "fifo":
        target = tmp_path / "catalog.fifo"
        os.mkfifo(target)
    else:
        target = Path(kind)
    started = time.monotonic()
    done = dspine(
        "list", "--catalog", extra_env={"DSPINE_CATALOG": str(target)}, timeout=30, preexec_fn=_limited_memory
    )
    assert done.returncode == 8, done.stderr
    assert "not a catalog" in done.stderr and "DSPINE_CATALOG" in done.stderr
    assert "Traceback" not in done.stderr and "unexpected" not in done.stderr
    assert time.monotonic() - started < 20


def test_an_oversized_catalog_is_refused(tmp_path):
    from app.models.catalog import MAX_CATALOG_BYTES, load_catalog

    huge = tmp_path / "huge.toml"
    huge.write_bytes(b"# " + b"x" * MAX_CATALOG_BYTES + b"\n")
    with pytest.raises(ConfigError, match="larger than 4 MiB, not a catalog"):
        load_catalog(huge)


@pytest.mark.parametrize("depth", [40, 30_000])
def test_deeply_nested_mcp_servers_are_a_clear_error(dspine, depth):
    # Issue 34: a DSPINE_MCP_SERVERS nested past the recursion limit gave a traceback.
    nested = '{"a": ' + "[" * depth + "]" * depth + "}"
    done = dspine("config", extra_env={"DSPINE_MCP_SERVERS": nested}, timeout=60)
    assert done.returncode == 8, done.stderr
    assert "mcp_servers" in done.stderr and "deep" in done.stderr
    assert "Traceback" not in done.stderr and "unexpected" not in done.stderr
    assert len(done.stderr) < 5000  # the value is cut, not printed whole


def test_deeply_nested_settings_toml_is_a_clear_error(config_file):
    config_file.write_text("mcp_servers = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ConfigError, match="too deep"):
        load_settings()


@pytest.mark.parametrize("key", ["models_dir", "chats_db", "catalog", "llama_server"])
def test_a_nul_or_escape_in_a_path_setting_is_a_clear_error(config_file, key):
    config_file.write_text(f'{key} = "a\\u0000b"\n')
    with pytest.raises(ConfigError, match=f"{key}.*control characters"):
        load_settings()
    config_file.write_text(f'{key} = "a\\u001b]52;c;aGk=\\u0007"\n')
    with pytest.raises(ConfigError, match="control characters"):
        load_settings()


def test_nul_in_models_dir_through_the_cli(env, tmp_path):
    config = tmp_path / "settings.toml"
    config.write_text('models_dir = "a\\u0000b"\n')
    environ = {k: v for k, v in env.items() if k != "DSPINE_MODELS_DIR"} | {"DSPINE_CONFIG": str(config)}
    done = subprocess.run(dspine_cmd("list"), env=environ, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 8, done.stderr
    assert "unexpected" not in done.stderr and "models_dir" in done.stderr and "control characters" in done.stderr


def test_dspine_config_prints_no_escape_sequences(dspine, tmp_path):
    folder = tmp_path / "cfg\x1b]0;owned\x07\x1b[2J"
    folder.mkdir()
    config = folder / "config.toml"
    config.write_text('serve_origins = ["http://localhost:3000"]\n')
    shown = dspine("config", extra_env={"DSPINE_CONFIG": str(config)})
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    assert "␛" in shown.stdout and "http://localhost:3000" in shown.stdout
    path_only = dspine("config", "--path", extra_env={"DSPINE_CONFIG": str(config)})
    assert "\x1b" not in path_only.stdout and "␛" in path_only.stdout
    config.write_text("models_dir = \n")  # an error message names the path too
    broken = dspine("config", extra_env={"DSPINE_CONFIG": str(config)})
    assert broken.returncode == 8 and "\x1b" not in broken.stderr and "␛" in broken.stderr


def test_serve_origins_from_the_file_or_the_environment(config_file, monkeypatch):
    assert load_settings().serve_origins == ()
    config_file.write_text('serve_origins = ["http://localhost:3000", "app://obsidian.md"]\n')
    assert load_settings().serve_origins == ("http://localhost:3000", "app://obsidian.md")
    monkeypatch.setenv("DSPINE_SERVE_ORIGINS", "http://localhost:*, https://ui.example")
    assert load_settings().serve_origins == ("http://localhost:*", "https://ui.example")
    monkeypatch.delenv("DSPINE_SERVE_ORIGINS")
    config_file.write_text("serve_origins = 5\n")
    with pytest.raises(ConfigError, match="serve_origins"):
        load_settings()


def test_draft_p_min_is_the_kinds_unless_set(config_file, monkeypatch):
    assert load_settings().draft_p_min is None  # None: the drafter kind's measured floor
    config_file.write_text("draft_p_min = 0\n")
    assert load_settings().draft_p_min == 0.0
    monkeypatch.setenv("DSPINE_DRAFT_P_MIN", "auto")
    assert load_settings().draft_p_min is None
    for wrong in ("1.5", "-0.1", "high"):
        monkeypatch.setenv("DSPINE_DRAFT_P_MIN", wrong)
        with pytest.raises(ConfigError, match="DSPINE_DRAFT_P_MIN"):
            load_settings()


def test_the_code_table_is_placed_by_fit_unless_host_or_a_device_is_named(config_file, monkeypatch):
    assert load_settings().code_table_device == "auto"
    config_file.write_text('code_table_device = "CUDA0"\n')
    assert load_settings().code_table_device == "CUDA0"
    monkeypatch.setenv("DSPINE_CODE_TABLE_DEVICE", "host")
    assert load_settings().code_table_device is None
    # a device name goes onto llama-server's command line inside a pattern: nothing else passes
    for wrong in ("CUDA0,CPU", "gpu", "CUDA0 --api-key x", "dspine.*=CUDA0"):
        monkeypatch.setenv("DSPINE_CODE_TABLE_DEVICE", wrong)
        with pytest.raises(ConfigError, match="DSPINE_CODE_TABLE_DEVICE"):
            load_settings()


def test_speculation_is_auto_unless_pinned(config_file, monkeypatch):
    assert load_settings().speculation == "auto"
    config_file.write_text('speculation = "Off"\n')
    assert load_settings().speculation == "off"
    monkeypatch.setenv("DSPINE_SPECULATION", "on")
    assert load_settings().speculation == "on"
