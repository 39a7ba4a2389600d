"""Pull throughput: `dspine pull` (sha256 verified) next to `hf download`
(not verified) of the same file from the same hub on 127.0.0.1, alternating
runs, in one process. Prints both rates and their ratio (goal: >= 0.95).

    .venv/bin/python benchmarks/pull_throughput.py --mib 1024 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.fake_hub import FakeHub  # noqa: E402

REPO = "bench/Bench-GGUF"
FILE = "Bench-Q4_K_M.gguf"


def timed(cmd: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed:\n{result.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=1024, help="file size in MiB")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    size = args.mib * 1024 * 1024
    hub = FakeHub()
    hub.add_repo(REPO, {FILE: os.urandom(size)})
    hub.start()
    bindir = Path(sys.executable).parent
    work = Path(tempfile.mkdtemp(prefix="dspine-bench-"))
    base_env = {
        **os.environ,
        "HF_ENDPOINT": hub.url,
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }
    base_env.pop("HF_HUB_OFFLINE", None)
    rates: dict[str, list[float]] = {"hf download": [], "dspine pull": []}
    try:
        for run in range(args.repeat):
            for tool in rates:
                scratch = work / f"{tool.split()[0]}-{run}"
                env = {
                    **base_env,
                    "HF_HOME": str(scratch / "hf"),
                    "DSPINE_MODELS_DIR": str(scratch / "models"),
                    "DSPINE_CONFIG": str(scratch / "config.toml"),
                }
                if tool == "hf download":
                    cmd = [str(bindir / "hf"), "download", REPO, FILE, "--local-dir", str(scratch / "out")]
                else:
                    cmd = [sys.executable, "-m", "app", "pull", f"{REPO}:Q4_K_M"]
                seconds = timed(cmd, env)
                rates[tool].append(size / seconds / 2**20)
                shutil.rmtree(scratch, ignore_errors=True)
    finally:
        hub.stop()
        shutil.rmtree(work, ignore_errors=True)
    hf = statistics.median(rates["hf download"])
    ds = statistics.median(rates["dspine pull"])
    print(f"file {args.mib} MiB from a hub on 127.0.0.1, {args.repeat} runs each, median, process start included")
    for tool, values in rates.items():
        shown = ", ".join(f"{v:.0f}" for v in values)
        print(f"  {tool:12} {statistics.median(values):7.0f} MiB/s   (runs: {shown})")
    print(f"  ratio dspine/hf: {ds / hf:.2f}  (dspine verifies sha256, hf download does not)")


if __name__ == "__main__":
    main()
