"""A tool's work in a process of its own, so that it can be killed.

A thread is not enough for some work: Python's `re` holds the interpreter lock for the
whole of a match, so a catastrophic pattern in `search` on a worker thread still froze
the chat. In a child process the chat's interpreter stays free, and Esc kills the child.

The child is a plain `python -m app.agent.apart MODULE FUNCTION` fed JSON on stdin
(multiprocessing's start methods need the parent's stderr as a real file, which a
full-screen app has replaced).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .paths import ToolRefused

POLL_S = 0.05
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds `app`


class Stopped(Exception):
    """The user stopped the work before it finished."""


def call(work: Callable[[Path, dict[str, Any]], Any], root: Path, args: dict[str, Any], stop: threading.Event) -> Any:
    """`work(root, args)` in a child process: its result (a toolbox Step), or ToolRefused as raised
    there. Raises Stopped, with the child killed, as soon as `stop` is set."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(_PACKAGE_ROOT), os.environ.get("PYTHONPATH")])),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "app.agent.apart", work.__module__, work.__qualname__],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    answer: list[bytes] = []
    talker = threading.Thread(
        target=lambda: answer.append(process.communicate(json.dumps({"root": str(root), "args": args}).encode())[0]),
        daemon=True,
    )
    talker.start()
    try:
        while talker.is_alive():
            if stop.wait(POLL_S):
                raise Stopped
        talker.join()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=5)
    try:
        kind, value = json.loads(answer[0] if answer else b"null") or ("error", "no answer")
    except (ValueError, TypeError):
        kind, value = "error", f"the tool's process ended without an answer (exit code {process.returncode})"
    if kind == "ok":
        from .toolbox import Done

        return Done(value)
    if kind == "refused":
        raise ToolRefused(value)
    raise RuntimeError(value)


def _main(module: str, name: str) -> None:
    request = json.loads(sys.stdin.buffer.read())
    try:
        step = getattr(importlib.import_module(module), name)(Path(request["root"]), request["args"])
        answer: tuple[str, str] = ("ok", step.result)
    except ToolRefused as exc:
        answer = ("refused", str(exc))
    except Exception as exc:  # whatever broke is reported, never lost with the process
        answer = ("error", f"{type(exc).__name__}: {exc}")
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2])
