"""How long dspine takes to start, next to the floor any Typer + Rich command
line pays: `python -c "import typer, rich"`. Runs take turns, best of N each.

    .venv/bin/python benchmarks/startup.py --runs 15
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The console script `dspine` runs `from app.cli import main; main()`; so does this.
DSPINE = [sys.executable, "-c", "import sys; sys.argv[0] = 'dspine'; from app.cli import main; main()"]
COMMANDS = {
    'python -c "import typer, rich"': [sys.executable, "-c", "import typer, rich"],
    "dspine --help": [*DSPINE, "--help"],
    "dspine list": [*DSPINE, "list"],
}


def timed(cmd: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{result.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="runs of each command (the best counts)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dspine-startup-") as tmp:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])),
            "DSPINE_CONFIG": str(Path(tmp) / "config.toml"),
            "DSPINE_MODELS_DIR": str(Path(tmp) / "models"),
        }
        times: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for cmd in COMMANDS.values():
            timed(cmd, env)  # warm the file cache and the .pyc files
        for _ in range(args.runs):
            for name, cmd in COMMANDS.items():
                times[name].append(timed(cmd, env))
    floor = min(times['python -c "import typer, rich"'])
    print(f"best of {args.runs} runs, wall time")
    width = max(len(name) for name in COMMANDS)
    for name, runs in times.items():
        best = min(runs)
        print(f"  {name:{width}}  {best * 1000:6.0f} ms   (+{(best - floor) * 1000:4.0f} ms over typer + rich)")


if __name__ == "__main__":
    main()
