"""`dspine serve --print-config TOOL`, pure: the snippet or environment that points
a tool at this endpoint, with the window one slot really holds and a compaction point
that leaves room for a reply (window.py), in each tool's own knobs. Formats as each
tool documents them (checked 2026-10, the window knobs 2026-12 against the installed
packages): aider (OPENAI_API_BASE + model metadata file), opencode (opencode.json with
@ai-sdk/openai-compatible; `limit` and `compaction.reserved`), Continue (config.yaml,
provider openai + apiBase; `contextLength`), Codex CLI (~/.codex/config.toml
model_providers, wire_api "responses"; `model_context_window` and
`model_auto_compact_token_limit`), Claude Code 2.1 (ANTHROPIC_BASE_URL +
ANTHROPIC_AUTH_TOKEN; CLAUDE_CODE_MAX_CONTEXT_TOKENS, CLAUDE_CODE_MAX_OUTPUT_TOKENS,
CLAUDE_AUTOCOMPACT_PCT_OVERRIDE, read from its own code), qwen-code (OPENAI_* variables
+ .qwen/settings.json `contextWindowSize`, `context.autoCompactThreshold` since 0.24, before
it `model.chatCompression.contextPercentageThreshold`, which 0.24 ignores),
llm (extra-openai-models.yaml), Zed (language_models.openai_compatible)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from .access import KEY_ENV
from .window import Window, budget

TOOLS = ("aider", "opencode", "continue", "codex", "claude-code", "qwen-code", "llm", "zed", "curl")
# Claude Code compacts at (window - reply) - 13,000 tokens at the latest (a constant in its code).
CLAUDE_CODE_BUFFER = 13000


@dataclass(frozen=True)
class Endpoint:
    base_url: str  # http://127.0.0.1:8080/v1
    model: str
    n_ctx: int  # one slot's window: what a single request can hold
    has_key: bool

    @property
    def window(self) -> Window:
        return budget(self.n_ctx)

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


def _window_note(e: Endpoint) -> str:
    w = e.window
    return (
        f"# one request holds {w.context} tokens (the context over --parallel slots); "
        f"compact at {w.compact_at} to leave {w.reply} for the reply\n"
    )


def aider(e: Endpoint) -> str:
    w = e.window
    metadata = {
        f"openai/{e.model}": {
            "max_input_tokens": w.context - w.reply,
            "max_output_tokens": w.reply,
            "input_cost_per_token": 0,
            "output_cost_per_token": 0,
            "litellm_provider": "openai",
            "mode": "chat",
        }
    }
    return (
        _key_note(e)
        + _window_note(e)
        + f"export OPENAI_API_BASE={e.base_url}\nexport OPENAI_API_KEY={e.key}\n"
        + "# context size for aider: .aider.model.metadata.json in the repository (or your home folder)\n"
        + f"cat > .aider.model.metadata.json <<'JSON'\n{json.dumps(metadata, indent=2)}\nJSON\n"
        + "# aider has no compaction point for the whole prompt: it summarises the chat history\n"
        + "# past --max-chat-history-tokens and warns when the chat's files pass max_input_tokens\n"
        + f"aider --model openai/{e.model} --max-chat-history-tokens {w.compact_at // 4}\n"
    )


def opencode(e: Endpoint) -> str:
    w = e.window
    # opencode compacts when a turn's tokens reach limit.input - compaction.reserved.
    limit = {"context": w.context, "input": w.context - w.reply, "output": w.reply}
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "dspine": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "dspine",
                "options": {"baseURL": e.base_url, "apiKey": f"{{env:{KEY_ENV}}}" if e.has_key else "dspine"},
                "models": {e.model: {"name": e.model, "limit": limit}},
            }
        },
        "model": f"dspine/{e.model}",
        "compaction": {"auto": True, "prune": True, "reserved": w.context - w.reply - w.compact_at},
    }
    return "# opencode.json (project) or ~/.config/opencode/opencode.json\n" + json.dumps(config, indent=2) + "\n"


def continue_dev(e: Endpoint) -> str:
    w = e.window
    key = f"${{{{ secrets.{KEY_ENV} }}}}" if e.has_key else "dspine"
    return (
        "# ~/.continue/config.yaml\n"
        + _window_note(e)
        + "# Continue has no compaction setting: it drops the oldest messages to fit contextLength - maxTokens\n"
        "name: dspine\nversion: 0.0.1\nschema: v1\nmodels:\n"
        f"  - name: {e.model} (dspine)\n    provider: openai\n    model: {e.model}\n"
        f"    apiBase: {e.base_url}\n    apiKey: {key}\n    roles: [chat, edit, apply]\n"
        f"    defaultCompletionOptions:\n      contextLength: {w.context}\n      maxTokens: {w.reply}\n"
    )


def codex(e: Endpoint) -> str:
    w = e.window
    return (
        "# ~/.codex/config.toml (Codex speaks the Responses API: llama-server's /v1/responses)\n"
        + _window_note(e)
        + f'model = "{e.model}"\nmodel_provider = "dspine"\n'
        f"model_context_window = {w.context}\nmodel_auto_compact_token_limit = {w.compact_at}\n\n"
        f'[model_providers.dspine]\nname = "dspine"\nbase_url = "{e.base_url}"\n'
        + (f'env_key = "{KEY_ENV}"\n' if e.has_key else "")
        + 'wire_api = "responses"\n'
    )


def claude_code_compaction(w: Window) -> tuple[int, int]:
    """CLAUDE_AUTOCOMPACT_PCT_OVERRIDE for this window, and where Claude Code will then
    compact: at that share of (window - reply), or at (window - reply) - 13,000 if that
    is lower (the override can only lower its threshold)."""
    usable = w.context - min(w.reply, 20000)  # Claude Code keeps min(max output, 20K) free
    pct = max(1, min(100, w.compact_at * 100 // max(usable, 1)))
    return pct, min(usable * pct // 100, usable - CLAUDE_CODE_BUFFER)


def claude_code(e: Endpoint) -> str:
    w = e.window
    pct, compacts_at = claude_code_compaction(w)
    lines = [f"export ANTHROPIC_BASE_URL={e.root}", f"export ANTHROPIC_AUTH_TOKEN={e.key}"]
    names = ("MODEL", "DEFAULT_OPUS_MODEL", "DEFAULT_SONNET_MODEL", "DEFAULT_HAIKU_MODEL")
    lines += [f"export ANTHROPIC_{name}={e.model}" for name in names]
    lines += [
        "# the window (without it Claude Code assumes 200K, or 1M, for a model it does not know;",
        '# it reads this only for model names that do not start with "claude-")',
        f"export CLAUDE_CODE_MAX_CONTEXT_TOKENS={w.context}",
        "# the reply it asks for, kept free below the window",
        f"export CLAUDE_CODE_MAX_OUTPUT_TOKENS={w.reply}",
        f"# compaction: Claude Code compacts here at {max(compacts_at, 0)} tokens, the lower of {pct}% of",
        "# (window - reply) and its own (window - reply) - 13,000",
        f"export CLAUDE_AUTOCOMPACT_PCT_OVERRIDE={pct}",
    ]
    if compacts_at < w.compact_at // 2:
        lines.append(
            f"# note: with a {w.context}-token window Claude Code compacts at {max(compacts_at, 0)} tokens "
            "(its fixed 13,000-token buffer): give each slot a larger --ctx"
        )
    return _key_note(e) + _window_note(e) + "\n".join(lines) + "\nclaude\n"


def qwen_code(e: Endpoint) -> str:
    w = e.window
    share = round(w.compact_share, 2)
    settings = {
        "model": {
            "name": e.model,
            "generationConfig": {"contextWindowSize": w.context, "samplingParams": {"max_tokens": w.reply}},
            "chatCompression": {"contextPercentageThreshold": share},
        },
        "context": {"autoCompactThreshold": share},
        "security": {"auth": {"selectedType": "openai"}},
    }
    return (
        _key_note(e)
        + _window_note(e)
        + f"export OPENAI_BASE_URL={e.base_url}\nexport OPENAI_API_KEY={e.key}\nexport OPENAI_MODEL={e.model}\n"
        + "# .qwen/settings.json (project) or ~/.qwen/settings.json; compaction at "
        + f"{share:.0%} of the window: context.autoCompactThreshold\n"
        + "# (qwen-code 0.24 on), model.chatCompression.contextPercentageThreshold (earlier versions)\n"
        + f"mkdir -p .qwen && cat > .qwen/settings.json <<'JSON'\n{json.dumps(settings, indent=2)}\nJSON\n"
        + "qwen\n"
    )


def llm(e: Endpoint) -> str:
    note = f"# llm has no window or compaction setting; one request holds {e.window.context} tokens\n"
    entry = f'- model_id: {e.model}\n  model_name: {e.model}\n  api_base: "{e.base_url}"\n'
    if e.has_key:
        entry += "  api_key_name: dspine\n"
    keys = f'llm keys set dspine --value "${KEY_ENV}"\n' if e.has_key else ""
    return (
        note
        + '# add to "$(dirname "$(llm logs path)")/extra-openai-models.yaml"\n'
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
                            "max_tokens": e.window.context,
                            "max_output_tokens": e.window.reply,
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
    note += "# Zed has no compaction setting: start a new thread (or summarise) before the window fills\n"
    return note + _window_note(e) + "# merge into Zed's settings.json\n" + json.dumps(config, indent=2) + "\n"


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
    "qwen-code": qwen_code,
    "llm": llm,
    "zed": zed,
    "curl": curl,
    "plain": curl,
}


def snippet(tool: str, endpoint: Endpoint) -> str | None:
    writer = WRITERS.get(tool.lower())
    return writer(endpoint) if writer else None
