"""What the reaper (app/agent/reaper.py, a child subreaper that ends every process a
command started) costs per `run_command`, against the shell started directly, in one
run: the same commands, taking turns, each scored by its best round (interference
from other tenants only ever adds time); the median is printed too.

    .venv/bin/python benchmarks/command_reaper.py [--rounds 7] [--per-round 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from app.agent import commands

COMMANDS = ["true", "echo hello", "sleep 0.2"]


def one_round(root: Path, command: str, reaper: bool, count: int) -> float:
    commands._USE_REAPER = reaper
    started = time.perf_counter()
    for _ in range(count):
        commands.run_command(root, command)
    return (time.perf_counter() - started) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--per-round", type=int, default=5)
    args = parser.parse_args()
    if not commands._USE_REAPER:
        raise SystemExit("the reaper runs on Linux only; there is nothing to compare here")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        print(f"{'command':<12} {'direct ms':>10} {'reaper ms':>10} {'added ms':>9} {'ratio':>6}  (best; median)")
        for command in COMMANDS:
            times: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(args.rounds):
                for reaper in (False, True):
                    times[reaper].append(one_round(root, command, reaper, args.per_round))
            direct, wrapped = min(times[False]) * 1000, min(times[True]) * 1000
            median = statistics.median(times[True]) / statistics.median(times[False])
            print(
                f"{command:<12} {direct:>10.1f} {wrapped:>10.1f} {wrapped - direct:>9.1f} "
                f"{wrapped / direct:>6.2f}  (median ratio {median:.2f})"
            )
    commands._USE_REAPER = True


if __name__ == "__main__":
    main()
