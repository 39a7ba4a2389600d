"""Kill -9 `dspine pull` at random bytes, again and again, and resume: how many bytes
are fetched twice, and does any file come out corrupt?

A fake hub on 127.0.0.1 (tests/support/fake_hub.py) serves one random file, throttled so a
kill lands mid-download. Each cycle starts from nothing, kills the pull `--kills`
times at a random byte of what is left (polling the `.part` file), checks that the
`.part` on disk is an exact prefix of the file after each kill, then lets a last
pull finish and checks the sha256. Prints the bytes the hub sent beyond the file's
size (re-fetched), as a share of the file size, and the corrupt files (must be 0).

    .venv/bin/python benchmarks/pull_kill_loop.py --cycles 4 --kills 5 --mib 32 --rate 16
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import signal
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


def part_size(part: Path) -> int:
    try:
        return part.stat().st_size
    except FileNotFoundError:
        return 0


def kill_at(cmd: list[str], env: dict[str, str], part: Path, target: int, deadline_s: float = 60) -> int:
    """Start a pull, kill -9 it once its .part holds `target` bytes; the bytes then on disk."""
    process = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    deadline = time.monotonic() + deadline_s
    try:
        while part_size(part) < target and process.poll() is None:
            if time.monotonic() > deadline:
                raise SystemExit(f"the pull did not reach byte {target} in {deadline_s:.0f} s")
            time.sleep(0.002)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.wait()
    return part_size(part)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=4, help="downloads from nothing to done")
    parser.add_argument("--kills", type=int, default=5, help="kill -9 per cycle")
    parser.add_argument("--mib", type=int, default=32, help="file size in MiB")
    parser.add_argument("--rate", type=float, default=16, help="hub throttle, MiB/s")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    data = rng.randbytes(args.mib * 2**20)
    size = len(data)
    want = hashlib.sha256(data).hexdigest()
    hub = FakeHub()
    hub.add_repo(REPO, {FILE: data})
    hub.misbehave.bytes_per_second = args.rate * 2**20
    hub.start()
    work = Path(tempfile.mkdtemp(prefix="dspine-kill-loop-"))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(work / "hf"),
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "DSPINE_MODELS_DIR": str(work / "models"),
        "XDG_CONFIG_HOME": str(work / "config"),
    }
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("DSPINE_CONFIG", None)
    cmd = [sys.executable, "-m", "app", "pull", f"{REPO}:Q4_K_M"]
    final = work / "models" / REPO / FILE
    part = final.with_name(FILE + ".part")
    kills = bad_parts = corrupt = 0
    refetched = 0
    try:
        for cycle in range(args.cycles):
            shutil.rmtree(work / "models", ignore_errors=True)
            hub.reset_counts()
            for _ in range(args.kills):
                have = part_size(part)
                target = have + int(rng.uniform(0.02, 0.3) * (size - have))
                on_disk = kill_at(cmd, env, part, target)
                kills += 1
                with part.open("rb") as handle:
                    if handle.read() != data[:on_disk]:
                        bad_parts += 1
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
            if done.returncode != 0:
                raise SystemExit(f"the last pull failed:\n{done.stderr[-2000:]}")
            if hashlib.sha256(final.read_bytes()).hexdigest() != want:
                corrupt += 1
            corrupt += len(list((work / "models").rglob("*.corrupt")))
            sent = hub.served_bytes()
            refetched += sent - size
            print(f"cycle {cycle + 1}: {args.kills} kills, hub sent {sent:,} bytes for a {size:,}-byte file")
    finally:
        hub.stop()
        shutil.rmtree(work, ignore_errors=True)
    total = size * args.cycles
    print(
        f"{kills} kill -9 over {args.cycles} downloads of {args.mib} MiB: re-fetched {refetched:,} bytes "
        f"= {refetched / total:.4%} of the bytes needed; .part not a prefix after a kill: {bad_parts}; "
        f"corrupt files: {corrupt}"
    )
    if bad_parts or corrupt:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
