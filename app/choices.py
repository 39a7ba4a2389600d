"""The closed sets of words the command line takes, as Literal types: typer lists each
set in --help and refuses any other word (exit 2, naming the choices), and mypy checks
the code that reads them. Kept apart and light: `dspine --help` imports this, not the
planner."""

from __future__ import annotations

from typing import Literal

Think = Literal["on", "off"]
BenchThink = Literal["on", "off", "both"]
# auto: dspine's patched llama-server if found, else any llama-server, else in process (app/run/engines.py)
EngineName = Literal["auto", "server", "inproc", "remote"]
ENGINE_NAMES: tuple[EngineName, ...] = ("auto", "server", "inproc", "remote")
LocalEngine = Literal["server", "inproc"]  # what tune measures: an engine on this machine
Goal = Literal["speed", "context"]
KvType = Literal["f16", "q8_0", "q4_0"]
PermissionMode = Literal["ask", "accept-edits", "plan"]  # what waits for the user (app/agent/modes.py)
OutputFormatName = Literal["text", "json", "stream-json"]  # what `dspine chat -p` prints
