"""`dspine serve`: the proxy in front of llama-server, its guards, deadlines, windows and tool calls."""
