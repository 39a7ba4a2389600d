import pytest

from app.errors import ConfigError
from app.settings import load_settings


@pytest.fixture
def config_file(tmp_path, monkeypatch):
    path = tmp_path / "config.toml"
    path.write_text("")  # DSPINE_CONFIG naming a missing file is an error
    monkeypatch.setenv("DSPINE_CONFIG", str(path))
    for key in ("DSPINE_MODELS_DIR", "DSPINE_DOWNLOAD_RETRIES", "DSPINE_CATALOG", "DSPINE_DEBUG", "DSPINE_SPECULATION"):
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


def test_speculation_is_auto_unless_pinned(config_file, monkeypatch):
    assert load_settings().speculation == "auto"
    config_file.write_text('speculation = "Off"\n')
    assert load_settings().speculation == "off"
    monkeypatch.setenv("DSPINE_SPECULATION", "on")
    assert load_settings().speculation == "on"
