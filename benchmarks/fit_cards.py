"""`dspine fit qwen3.8-27b` for 12, 16, 24 and 32 GB cards, on generated
headers with Qwen3.8-27B's shape (FACTS) served by a hub on 127.0.0.1.

The hub lists each file at its full size but holds only the header, so fit
reads the headers over HTTP Range exactly as it would from huggingface.co,
and llama.cpp's dry run measures the target's compute buffer on the sparse
copy. The drafters' architectures (dspine, dflash) are not in this
llama.cpp, so their compute buffers are dspine's estimate.

    .venv/bin/python benchmarks/fit_cards.py [--show 24]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.fit.shape import shape_from_header  # noqa: E402
from backends.gguf_header import read_local  # noqa: E402
from tests.support.fake_hub import FakeHub  # noqa: E402
from tests.support.gguf_models import (  # noqa: E402
    K_QUANT_MIXES,
    QTYPE,
    qwen38_27b_drafter,
    qwen38_27b_quant,
    write_header_only,
)

TARGET = "unsloth/Qwen3.8-27B-GGUF"
DSPINE = "aj9o9/Qwen3.8-27B-DSpine-b16-GGUF"
DFLASH = "incoai/Qwen3.8-27B-DFlash2-GGUF"


def serve(folder: Path) -> FakeHub:
    hub = FakeHub()
    files = {TARGET: {}, DSPINE: {}, DFLASH: {}}
    for quant in K_QUANT_MIXES:
        files[TARGET][f"Qwen3.8-27B-{quant}.gguf"] = write_header_only(
            folder / f"{quant}.gguf", qwen38_27b_quant(quant)
        )
    files[DSPINE]["Qwen3.8-27B-DSpine-b16-Q4_K_M.gguf"] = write_header_only(
        folder / "dq4.gguf", qwen38_27b_drafter(QTYPE.Q4_K, "dspine")
    )
    files[DSPINE]["Qwen3.8-27B-DSpine-b16-BF16.gguf"] = write_header_only(
        folder / "dbf16.gguf", qwen38_27b_drafter(QTYPE.BF16, "dspine")
    )
    files[DFLASH]["Qwen3.8-27B-DFlash2-Q4_K_M.gguf"] = write_header_only(
        folder / "df.gguf", qwen38_27b_drafter(QTYPE.Q4_K, "dflash")
    )
    for repo, named in files.items():
        hub.add_repo(repo, {name: path.read_bytes() for name, path in named.items()})
        for name, path in named.items():
            hub.misbehave.listed_size[name] = shape_from_header(read_local(path)).total_weight_bytes + 16 * 2**20
    return hub.start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--show", type=int, default=24, help="print the full table for this card")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="dspine-fit-cards-"))
    hub = serve(folder)
    (folder / "config.toml").write_text("")  # default settings, not the user's (a missing file is an error)
    env = {
        **os.environ,
        "HF_ENDPOINT": hub.url,
        "XDG_CACHE_HOME": str(folder / "cache"),
        "DSPINE_MODELS_DIR": str(folder / "models"),
        "DSPINE_CONFIG": str(folder / "config.toml"),
        "COLUMNS": "110",
    }
    env.pop("HF_HUB_OFFLINE", None)
    command = [sys.executable, "-m", "app", "fit", "qwen3.8-27b"]
    print(
        f"{'card':>6}  {'target':8} {'drafter':12} {'context':>8} {'KV':5} {'GPU layers':>10} {'total GiB':>9}"
        f" {'headroom MiB':>12}"
    )
    for gib in (12, 16, 24, 32):
        result = subprocess.run(command + ["--vram", f"{gib}GiB", "--json"], env=env, capture_output=True, text=True)
        if result.returncode not in (0, 10):
            raise SystemExit(result.stderr)
        plan = json.loads(result.stdout)
        s = plan["settings"]
        print(
            f"{gib:>4}GB  {s['target_quant']:8} {s['drafter'] or 'none':12} {s['context']:>8} {s['kv_type']:5} "
            f"{s['gpu_layers']:>10} {plan['memory']['total'] / 2**30:>9.2f} {plan['headroom'] / 2**20:>12.0f}"
        )
    print()
    shown = subprocess.run(command + ["--vram", f"{args.show}GiB"], env=env, capture_output=True, text=True)
    print(f"$ dspine fit qwen3.8-27b --vram {args.show}GiB")
    print(shown.stdout)
    hub.stop()


if __name__ == "__main__":
    main()
