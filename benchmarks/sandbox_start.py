"""What the sandbox adds to run_command's start: a trivial command (`true`) run through
the chat's command runner (app/agent/commands.py, the reaper included) inside the
sandbox and outside it, alternating run by run so load on this two-core machine hits
both alike. Prints each setup's median and its spread (min-max) over `--runs` runs, and
the ratio of medians, with the ratio's spread over the pairs (one run inside over the
run outside next to it). The runner looks at its command every 50 ms, so a second table
times the shell alone (`/bin/sh -c true`, with and without the sandbox's argv in front),
which shows what the sandbox itself costs. A third table times what guarding the places
that run code later adds to a command's start: finding them (`Guard.read_only()`, a walk of
a project with a nested repository and agent settings), the filtered environment
(`child_environ()`) and one `--ro-bind-try` each, against the bare sandbox with the whole
environment.

    .venv/bin/python benchmarks/sandbox_start.py [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.agent.child_env import child_environ
from app.agent.commands import run_command
from app.agent.guarded import Guard
from app.agent.sandbox import find


def timed(root: Path, wrap: list[str] | None) -> float:
    started = time.perf_counter()
    result = run_command(root, "true", wrap=wrap)
    elapsed = time.perf_counter() - started
    if result.exit_code != 0:
        raise SystemExit(f"`true` failed ({result.exit_code}): {result.output}")
    return elapsed


def shell_alone(wrap: list[str] | None) -> float:
    started = time.perf_counter()
    subprocess.run([*(wrap or []), "/bin/sh", "-c", "true"], check=True)
    return time.perf_counter() - started


def guarded_start(root: Path, box, guard: Guard | None) -> float:  # type: ignore[no-untyped-def]
    """The shell in the sandbox as the chat starts a command: the guard found, its read-only
    binds, the filtered environment; `guard=None` is the sandbox as it was before them."""
    started = time.perf_counter()
    if guard is None:
        subprocess.run([*box.wrap(root), "/bin/sh", "-c", "true"], check=True)
    else:
        guard.refresh()  # the chat walks again after each command (a new repository is named)
        wrap = box.wrap(root, read_only=guard.read_only())
        subprocess.run([*wrap, "/bin/sh", "-c", "true"], check=True, env=child_environ())
    return time.perf_counter() - started


def guarded_project(root: Path) -> None:
    """A project as people have them: a repository with a nested one, agent settings, hooks
    naming a script, and 200 source files in 20 folders for the walk to pass."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "init", "-q", str(root / "vendor" / "lib")], check=True)
    (root / ".claude" / "hooks").mkdir(parents=True)
    (root / ".claude" / "settings.json").write_text("{}")
    (root / ".mcp.json").write_text("{}")
    for folder in range(20):
        (root / "src" / f"m{folder}").mkdir(parents=True)
        for n in range(10):
            (root / "src" / f"m{folder}" / f"f{n}.py").write_text("x = 1\n")


def report(
    label: str, inside: list[float], outside: list[float], kind: str, names: tuple[str, str] = ("inside", "outside")
) -> None:
    ratios = [a / b for a, b in zip(inside, outside, strict=True)]
    print(label)
    for name, times in zip(names, (inside, outside), strict=True):
        print(
            f"  {name:8} {statistics.median(times) * 1000:6.1f} ms  ({min(times) * 1000:.1f}-{max(times) * 1000:.1f})"
        )
    ratio = statistics.median(inside) / statistics.median(outside)
    extra = (statistics.median(inside) - statistics.median(outside)) * 1000
    print(f"  ratio    {ratio:.2f}x  (pairs {min(ratios):.2f}-{max(ratios):.2f}); {extra:+.1f} ms a command ({kind})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    box = find()
    if not box.available:
        print(f"no sandbox here: {box.problem}")
        return 1
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        wrap = box.wrap(root)
        timed(root, wrap), timed(root, None)  # warm the page cache for both
        runner: dict[str, list[float]] = {"inside": [], "outside": []}
        shell: dict[str, list[float]] = {"inside": [], "outside": []}
        for run in range(args.runs):
            order = [("inside", wrap), ("outside", None)]
            for name, wrapped in order if run % 2 == 0 else reversed(order):
                runner[name].append(timed(root, wrapped))
                shell[name].append(shell_alone(wrapped))
        guarded = Path(folder) / "project"
        guarded_project(guarded)
        guard = Guard(guarded, named=[guarded / ".claude" / "hooks" / "guard.py"])
        timings: dict[str, list[float]] = {"guarded": [], "bare": []}
        for run in range(args.runs):
            pair = [("guarded", guard), ("bare", None)]
            for name, which in pair if run % 2 == 0 else reversed(pair):
                timings[name].append(guarded_start(guarded, box, which))
        shown = len(guard.read_only())
    report("run_command (the chat's runner, `true`):", runner["inside"], runner["outside"], box.kind)
    report("the shell alone (`/bin/sh -c true`):", shell["inside"], shell["outside"], box.kind)
    report(
        f"guarded ({shown} read-only places, filtered environment) against the bare sandbox:",
        timings["guarded"],
        timings["bare"],
        box.kind,
        ("guarded", "bare"),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
