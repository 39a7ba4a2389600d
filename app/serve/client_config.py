"""`dspine serve --print-config TOOL`, pure: the snippet or environment that points
a tool at this endpoint. Formats as each tool documents them (checked 2026-10):
aider (OPENAI_API_BASE + model metadata file), opencode (opencode.json with
@ai-sdk/openai-compatible), Continue (config.yaml, provider openai + apiBase),
Codex CLI (~/.codex/config.toml model_providers; wire_api "responses" is the
only one it accepts now), Claude Code (ANTHROPIC_BASE_URL + ANTHROPIC_AUTH_TOKEN),
llm (extra-openai-models.yaml), Zed (language_models.openai_compatible)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from .access import KEY_ENV

TOOLS = ("aider", "opencode", "continue", "codex", "claude-code", "llm", "zed", "curl")


@dataclass(frozen=True)
class Endpoint:
    base_url: str  # http://127.0.0.1:8080/v1
    model: str
    n_ctx: int
    has_key: bool

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/v1")

    @property
    def key(self) -> str:
        """The key as a reference to its variable (never the key itself); a placeholder
        when the endpoint needs none (most clients refuse an empty one)."""
        return f"${KEY_ENV}" if self.has_key else "dspine"


def _key_note(e: Endpoint) -> str:
    return f"# {KEY_ENV} holds the key dspine serve was given\n" if e.has_key else ""


def aider(e: Endpoint) -> str:
    metadata = {
        f"openai/{e.model}": {
            "max_input_tokens": e.n_ctx,
            "max_output_tokens": min(e.n_ctx, 8192),
            "input_cost_per_token": 0,
            "output_cost_per_token": 0,
            "litellm_provider": "openai",
            "mode": "chat",
        }
    }
    return (
        _key_note(e)
        + f"export OPENAI_API_BASE={e.base_url}\nexport OPENAI_API_KEY={e.key}\n"
        + "# context size for aider: .aider.model.metadata.json in the repository (or your home folder)\n"
        + f"cat > .aider.model.metadata.json <<'JSON'\n{json.dumps(metadata, indent=2)}\nJSON\n"
        + f"aider --model openai/{e.model}\n"
    )


def opencode(e: Endpoint) -> str:
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "dspine": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "dspine",
                "options": {"baseURL": e.base_url, "apiKey": f"{{env:{KEY_ENV}}}" if e.has_key else "dspine"},
                "models": {e.model: {"name": e.model, "limit": {"context": e.n_ctx, "output": min(e.n_ctx, 8192)}}},
            }
        },
        "model": f"dspine/{e.model}",
    }
    return "# opencode.json (project) or ~/.config/opencode/opencode.json\n" + json.dumps(config, indent=2) + "\n"


def continue_dev(e: Endpoint) -> str:
    key = f"${{{{ secrets.{KEY_ENV} }}}}" if e.has_key else "dspine"
    return (
        "# ~/.continue/config.yaml\n"
        "name: dspine\nversion: 0.0.1\nschema: v1\nmodels:\n"
        f"  - name: {e.model} (dspine)\n    provider: openai\n    model: {e.model}\n"
        f"    apiBase: {e.base_url}\n    apiKey: {key}\n    roles: [chat, edit, apply]\n"
        f"    defaultCompletionOptions:\n      contextLength: {e.n_ctx}\n"
    )


def codex(e: Endpoint) -> str:
    return (
        "# ~/.codex/config.toml (Codex speaks the Responses API: llama-server's /v1/responses)\n"
        f'model = "{e.model}"\nmodel_provider = "dspine"\nmodel_context_window = {e.n_ctx}\n\n'
        f'[model_providers.dspine]\nname = "dspine"\nbase_url = "{e.base_url}"\n'
        + (f'env_key = "{KEY_ENV}"\n' if e.has_key else "")
        + 'wire_api = "responses"\n'
    )


def claude_code(e: Endpoint) -> str:
    lines = [f"export ANTHROPIC_BASE_URL={e.root}", f"export ANTHROPIC_AUTH_TOKEN={e.key}"]
    names = ("MODEL", "DEFAULT_OPUS_MODEL", "DEFAULT_SONNET_MODEL", "DEFAULT_HAIKU_MODEL")
    lines += [f"export ANTHROPIC_{name}={e.model}" for name in names]
    return _key_note(e) + "\n".join(lines) + "\nclaude\n"


def llm(e: Endpoint) -> str:
    entry = f'- model_id: {e.model}\n  model_name: {e.model}\n  api_base: "{e.base_url}"\n'
    if e.has_key:
        entry += "  api_key_name: dspine\n"
    keys = f'llm keys set dspine --value "${KEY_ENV}"\n' if e.has_key else ""
    return (
        '# add to "$(dirname "$(llm logs path)")/extra-openai-models.yaml"\n'
        + entry
        + keys
        + f"llm -m {e.model} 'hello'\n"
    )


def zed(e: Endpoint) -> str:
    config = {
        "language_models": {
            "openai_compatible": {
                "dspine": {
                    "api_url": e.base_url,
                    "available_models": [
                        {
                            "name": e.model,
                            "display_name": f"{e.model} (dspine)",
                            "max_tokens": e.n_ctx,
                            "capabilities": {
                                "tools": True,
                                "images": False,
                                "parallel_tool_calls": False,
                                "prompt_cache_key": False,
                            },
                        }
                    ],
                }
            }
        }
    }
    note = f"# Zed reads the key from DSPINE_API_KEY: export DSPINE_API_KEY=${KEY_ENV}\n" if e.has_key else ""
    return note + "# merge into Zed's settings.json\n" + json.dumps(config, indent=2) + "\n"


def curl(e: Endpoint) -> str:
    auth = f' -H "Authorization: Bearer ${KEY_ENV}"' if e.has_key else ""
    body = {"model": e.model, "messages": [{"role": "user", "content": "hello"}], "stream": True}
    return f"curl -N {e.base_url}/chat/completions{auth} -H 'Content-Type: application/json' -d '{json.dumps(body)}'\n"


WRITERS = {
    "aider": aider,
    "opencode": opencode,
    "continue": continue_dev,
    "codex": codex,
    "claude-code": claude_code,
    "llm": llm,
    "zed": zed,
    "curl": curl,
    "plain": curl,
}


def snippet(tool: str, endpoint: Endpoint) -> str | None:
    writer = WRITERS.get(tool.lower())
    return writer(endpoint) if writer else None
