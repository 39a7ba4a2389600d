"""What `/mcp` shows: each server, where it came from, its state, its tools and what
their definitions cost in the prompt. Text (Markdown) only; the chat draws it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .manager import McpManager

Counter = Callable[[list[dict]], int]  # tokens of a prompt with these tool schemas added


def _source(source: str) -> str:
    return Path(source).name if "/" in source else source


def describe(
    manager: McpManager | None, counter: Counter | None = None, n_ctx: int | None = None, active: bool = True
) -> str:
    """`counter`: the model's tokenizer (None: estimates, marked ~); `active`: MCP tools are
    sent (False under --no-tools or /tools off)."""
    if manager is None or not manager.servers:
        return (
            "**MCP servers**\n\nNone configured. dspine reads the project's `.mcp.json`, then the `mcp` block of "
            "its `opencode.json`, then `[mcp_servers.NAME]` in dspine's settings."
        )
    lines = ["**MCP servers**" + ("" if active else " (tools are off in this chat: none are sent)"), ""]
    total = 0
    for server in manager.servers.values():
        head = f"- **{server.name}** · {server.status} · {_source(server.spec.source)} · `{server.spec.describe()}`"
        if server.status == "ready":
            tokens, exact = manager.cost(server.name, counter)
            total += tokens
            head += f" · {len(server.tools)} tools, {'' if exact else '~'}{tokens:,} tokens"
        elif server.status == "off":
            head += f" · `/mcp on {server.name}`"
        elif server.status == "untrusted":
            head += " · the project's own: starts once you trust the project (`/mcp trust`)"
        elif server.reason:
            head += f" · {server.reason}"
        lines.append(head)
        for tool in server.tools:
            summary = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
            lines.append(f"  - `{tool.name}`" + (f": {summary[:100]}" if summary else ""))
    share = f" ({total / n_ctx:.1%} of the {n_ctx:,}-token context)" if n_ctx else ""
    lines += [
        "",
        f"Tool definitions from MCP: {total:,} tokens in every request{share}.",
        "`/mcp off NAME` or `/mcp on NAME` switches a server for this project (remembered); a change applies "
        "from your next message.",
    ]
    return "\n".join(lines)
