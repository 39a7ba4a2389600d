"""End to end: the CLI as a user runs it against the local hub, real clients (aider, Claude
Code, Codex, llm, MCP servers), the installers."""
