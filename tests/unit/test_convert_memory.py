"""The converter's checks hold a block of DSpine's code table at a time, not the table: the
authors' is 248,320 x 1,024 (0.5 GB in BF16, 1 GB as f32), and checked whole it made the
checks the pull's peak (2.4 GB, docs/measured.md). Here a sparse 100 MB table; the checks'
peak memory is measured in a process of their own (Linux's VmHWM, reset after the imports)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.safetensors_drafters import Drafter, write_checkpoint
from tests.unit.test_convert import golden_target

CHILD = """
import json, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from app.hub import convert_run
def status(key):
    return int(next(l for l in open("/proc/self/status") if l.startswith(key)).split()[1]) * 1024
ck, target = Path(sys.argv[1]), Path(sys.argv[2])
convert_run.prepare(ck / "config.json", [ck / "model.safetensors"], target)  # the tokenizer, the imports
with open("/proc/self/clear_refs", "w") as handle:
    handle.write("5")
base = status("VmRSS:")
convert_run.prepare(ck / "config.json", [ck / "model.safetensors"], target)
print(json.dumps({{"grew": status("VmHWM:") - base}}))
"""

VOCAB, RANK = 50_000, 1024


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="Linux's peak-memory counter")
def test_the_checks_hold_a_block_of_the_code_table_not_the_table(tmp_path):
    drafter = Drafter(
        family="dspine", hidden=64, vocab=VOCAB, mask_token_id=1000,
        dspine={"transfer_rank": RANK, "message_size": 8, "top_k": 4},
    )  # fmt: skip
    checkpoint = write_checkpoint(tmp_path / "ckpt", drafter, sparse_size=True)
    target = golden_target(tmp_path / "target.gguf", n_vocab=VOCAB, n_embd=64)
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(root=str(ROOT)), str(checkpoint), str(target)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    grew = json.loads(done.stdout.strip().splitlines()[-1])["grew"]
    table_bf16 = VOCAB * RANK * 2  # 100 MB; as f32 200 MB, checked whole 350 MB held at once
    assert grew < table_bf16, f"the checks grew {grew / 2**20:.0f} MiB for a {table_bf16 / 2**20:.0f} MiB table"
