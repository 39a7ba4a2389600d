"""MCP servers as tools in the chat: the user's existing configs (`.mcp.json`,
`opencode.json`, dspine's settings), servers started in the background and stopped
with the chat, their tools offered as `server__tool` with consent, their cost shown."""
