"""Accepted tokens by draft length, in-process against llama-server, on the same
pairs in one run: a generated hybrid (qwen35) pair and a generated dense pair
(drafter = target weights + noise), and the real SmolLM2 pair (Q8_0 target, Q4_1
drafter). Greedy, think on, one prompt. With exact rollback the in-process
counts follow llama-server's as the draft grows; a drafter whose state is not
rolled back exactly loses acceptance as k grows.

    .venv/bin/python benchmarks/draft_length_acceptance.py [--tokens 96]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.events import End  # noqa: E402
from backends.inproc import InprocEngine  # noqa: E402
from backends.llama_server import LlamaServerEngine, ServerConfig  # noqa: E402
from backends.sampling import Sampling  # noqa: E402
from tests.support.engine_models import write_family  # noqa: E402
from tests.support.real_models import smollm2_pair  # noqa: E402

LENGTHS = (1, 2, 3, 4, 6, 8)
MESSAGES = [{"role": "user", "content": "Write a Python function that returns the n-th Fibonacci number."}]


def accepted(engine, tokens: int, k: int) -> tuple[int, int]:
    end = list(engine.stream(MESSAGES, think=True, sampling=Sampling(temperature=0, max_tokens=tokens), n_max=k))[-1]
    assert isinstance(end, End), end
    return end.stats.accepted, end.stats.drafted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=96)
    args = parser.parse_args()
    from benchmarks.machine import settle_repacking

    settle_repacking()  # as dspine's engines do: no AMX crash on such a CPU
    folder = Path(tempfile.mkdtemp(prefix="dspine-draft-length-"))
    pairs = {}
    for family in ("sharp-hybrid", "sharp-dense"):  # weights sharp enough that the state matters
        files = write_family(folder, family)
        pairs[family] = (files["target"], files["noisy"])
    real = smollm2_pair(Path(tempfile.gettempdir()) / "dspine-smollm2")
    pairs["smollm2"] = (real["target"], real["q4"])
    print(f"accepted / drafted tokens over {args.tokens} generated, greedy, think on")
    print("pair          engine        " + "  ".join(f"k={k:<7}" for k in LENGTHS))
    for name, (target, drafter) in pairs.items():
        inproc = InprocEngine(str(target), draft_path=str(drafter), n_ctx=2048, n_max=max(LENGTHS)).load()
        try:
            ours = [accepted(inproc, args.tokens, k) for k in LENGTHS]
        finally:
            inproc.close()
        theirs = []
        for k in LENGTHS:  # llama-server drafts at its launch length (see FACTS), so one launch per k
            config = ServerConfig(
                model=str(target),
                draft_model=str(drafter),
                drafter_kind="draft",
                n_ctx=2048,
                gpu_layers=0,
                draft_gpu_layers=0,
                n_max=k,
                draft_p_min=0.0,  # like for like: the in-process engine has no floor
            )
            server = LlamaServerEngine(config, log_dir=folder).start()
            try:
                theirs.append(accepted(server, args.tokens, k))
            finally:
                server.close()
        for label, rows in (("in-process", ours), ("llama-server", theirs)):
            print(f"{name:<13} {label:<13} " + "  ".join(f"{a:>3}/{d:<5}" for a, d in rows))


if __name__ == "__main__":
    main()
