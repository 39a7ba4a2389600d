"""Pure logic: no engine, no model, no server, no TUI; the whole layer runs in seconds
(`bash scripts/test.sh tests/unit`)."""
