"""How long dspine takes to start, next to the floor any Typer + Rich command
line pays: `python -c "import typer, rich"`. Runs take turns, best of N each.

    .venv/bin/python benchmarks/startup.py --runs 15
    .venv/bin/python benchmarks/startup.py --runs 15 --against /tmp/old-checkout

`--against DIR`: the same commands from another checkout of dspine too, taking turns with
this one run by run; prints each command's best of both and the ratio of their medians with
the spread of the per-round ratios (this / that). `chat -p` here is the headless start up to
its first answer where nothing is pulled (it stops there, exit 2): the chat's whole start-up
path (the setup, the store, the project) without a model.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The console script `dspine` runs `from app.cli import main; main()`; so does this.
DSPINE = [sys.executable, "-c", "import sys; sys.argv[0] = 'dspine'; from app.cli import main; main()"]
FLOOR = 'python -c "import typer, rich"'
COMMANDS = {
    FLOOR: ([sys.executable, "-c", "import typer, rich"], 0),
    "dspine --help": ([*DSPINE, "--help"], 0),
    "dspine list": ([*DSPINE, "list"], 0),
    "dspine chat -p (nothing pulled)": ([*DSPINE, "chat", "-p", "hello"], 2),
}


def timed(cmd: list[str], env: dict[str, str], expected: int) -> float:
    started = time.perf_counter()
    result = subprocess.run(cmd, env=env, cwd=env["DSPINE_STARTUP_CWD"], capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != expected:
        raise SystemExit(f"{' '.join(cmd)} exited {result.returncode}, not {expected}:\n{result.stderr[-2000:]}")
    return elapsed


def environment(tree: Path, tmp: Path) -> dict[str, str]:
    """A fresh home for dspine's files (nothing pulled), the code of `tree`."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "config.toml").write_text(f'data_dir = "{tmp / "data"}"\n')
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH", "")])),
        "DSPINE_CONFIG": str(tmp / "config.toml"),
        "DSPINE_MODELS_DIR": str(tmp / "models"),
        "DSPINE_STARTUP_CWD": str(tmp),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="runs of each command (the best counts)")
    parser.add_argument("--against", type=Path, help="another checkout of dspine to alternate with")
    args = parser.parse_args()
    trees = {"this": ROOT} | ({"that": args.against.resolve()} if args.against else {})
    with tempfile.TemporaryDirectory(prefix="dspine-startup-") as tmp:
        envs = {name: environment(tree, Path(tmp) / name) for name, tree in trees.items()}
        times = {(tree, name): [] for tree in trees for name in COMMANDS}
        for env in envs.values():
            for cmd, expected in COMMANDS.values():
                timed(cmd, env, expected)  # warm the file cache and the .pyc files
        for _ in range(args.runs):
            for name, (cmd, expected) in COMMANDS.items():
                for tree, env in envs.items():
                    times[(tree, name)].append(timed(cmd, env, expected))
    report(times, trees, args.runs)


def report(times: dict[tuple[str, str], list[float]], trees: dict[str, Path], runs: int) -> None:
    floor = min(times[("this", FLOOR)])
    print(f"best of {runs} runs, wall time")
    width = max(len(name) for name in COMMANDS)
    for name in COMMANDS:
        best = min(times[("this", name)])
        line = f"  {name:{width}}  {best * 1000:6.0f} ms   (+{(best - floor) * 1000:4.0f} ms over typer + rich)"
        if "that" in trees:
            ratios = [a / b for a, b in zip(times[("this", name)], times[("that", name)], strict=True)]
            median = statistics.median(times[("this", name)]) / statistics.median(times[("that", name)])
            line += (
                f"   against {min(times[('that', name)]) * 1000:6.0f} ms: {median:.3f}x "
                f"(rounds {min(ratios):.2f}-{max(ratios):.2f})"
            )
        print(line)
    if "that" in trees:
        print(f"this: {trees['this']}; that: {trees['that']}")


if __name__ == "__main__":
    main()
