"""Every file and folder dspine keeps, in one place: where each lives by default.

Three roots, each a setting with its environment variable (see `dspine config`):

    data_dir   DSPINE_DATA_DIR    pulled models, chats, learned draft lengths, MCP
                                  switches, the llama-server dspine builds
    cache_dir  DSPINE_CACHE_DIR   what can be fetched or measured again: GGUF headers
                                  read over HTTP, llama.cpp's compute buffer curves
    log_dir    DSPINE_LOG_DIR     llama-server logs and the chat templates it was given

Beneath a root a file has a fixed name, unless people move it on its own, which
`models_dir`, `chats_db` and `adaptive_draft_file` allow (settings too). The
settings file itself is named by DSPINE_CONFIG; Hugging Face's cache, which pulls
read, by HF_HUB_CACHE or HF_HOME; the chat's scratch folder is `.dspine/` in the
project; custom slash commands are read from the folders other coding agents use
(the project's and the user's own; Codex's under CODEX_HOME when it is set). Only
this module asks platformdirs; `backends/` computes no path: it is
handed the ones it needs.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "dspine"
CONFIG_ENV = "DSPINE_CONFIG"


def config_file() -> Path:
    """The settings file: DSPINE_CONFIG, else config.toml in the user's config folder."""
    explicit = os.environ.get(CONFIG_ENV)
    if explicit:
        return Path(os.path.expanduser(explicit))
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME))


def default_cache_dir() -> Path:
    return Path(platformdirs.user_cache_dir(APP_NAME))


def default_log_dir() -> Path:
    return Path(platformdirs.user_log_dir(APP_NAME))


def hf_cache_dir() -> Path:
    """Hugging Face's hub cache (read, never written: models already there are used in
    place), from the environment at call time as `hf` does: HF_HUB_CACHE, HF_HOME."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.path.expanduser(os.environ["HF_HUB_CACHE"]))
    if os.environ.get("HF_HOME"):
        return Path(os.path.expanduser(os.environ["HF_HOME"])) / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


# -- beneath data_dir ------------------------------------------------------------------


def models_dir(data_dir: Path) -> Path:
    return data_dir / "models"


def chats_db(data_dir: Path) -> Path:
    return data_dir / "chats.db"


def adaptive_draft_file(data_dir: Path) -> Path:
    return data_dir / "adaptive-draft.json"


def tune_file(data_dir: Path) -> Path:
    """What `dspine tune` measured and picked, per model pair and engine (app/run/tune_record.py)."""
    return data_dir / "tunes.json"


def mcp_switches_file(data_dir: Path) -> Path:
    return data_dir / "mcp-switches.json"


def project_trust_file(data_dir: Path) -> Path:
    """The user's answers about projects' MCP files (app/agent/trust.py): never in a project."""
    return data_dir / "project-trust.json"


def llama_server_build(data_dir: Path) -> Path:
    """Where installers/install.sh (install.ps1 -Fork) puts the llama-server it builds."""
    return data_dir / "llama.cpp" / "bin" / ("llama-server.exe" if os.name == "nt" else "llama-server")


def manifest(models_dir: Path) -> Path:
    return models_dir / "manifest.json"


# -- in the project the chat works on --------------------------------------------------


def project_scratch(root: Path) -> Path:
    """Whole tool outputs that were cut for the model (0700, ignored by git)."""
    return root / ".dspine"


def project_command_folders(root: Path) -> list[Path]:
    """Where a project keeps custom slash commands, in the order a name is looked up:
    dspine's own, then Claude Code's, then opencode's (both spellings)."""
    return [
        project_scratch(root) / "commands",
        root / ".claude" / "commands",
        root / ".opencode" / "command",
        root / ".opencode" / "commands",
    ]


# -- the user's own, kept by other coding agents -----------------------------------------


def user_hook_files() -> list[Path]:
    """The user's own hooks, in Claude Code's settings file (app/agent/hooks.py)."""
    return [Path.home() / ".claude" / "settings.json"]


def user_command_folders() -> list[Path]:
    """The user's own custom slash commands, before the project's: Claude Code's
    `~/.claude/commands`, then Codex's prompts (`$CODEX_HOME/prompts`, else `~/.codex/prompts`)."""
    codex = os.environ.get("CODEX_HOME")
    codex_home = Path(os.path.expanduser(codex)) if codex else Path.home() / ".codex"
    return [Path.home() / ".claude" / "commands", codex_home / "prompts"]


def users_own_folders() -> list[Path]:
    """Folders that hold what dspine trusts as the user's own words: its settings (MCP servers
    it starts unasked), its data (trust answers, chats), and the user's command folders. A
    chat whose project is the home folder must never write there (app/agent/paths.py)."""
    return [config_file().parent, default_data_dir(), *user_command_folders()]


# -- beneath cache_dir -----------------------------------------------------------------


def header_cache(cache_dir: Path) -> Path:
    return cache_dir / "headers"


def cpu_repack_file(cache_dir: Path) -> Path:
    """Whether llama.cpp's CPU weight repacking survived a probe, per CPU and llama.cpp build."""
    return cache_dir / "cpu-repack.json"


def compute_curves_file(cache_dir: Path) -> Path:
    return cache_dir / "compute-curves.json"
