"""The tiny target the DSpine golden drafts are made against (scripts/dspine_golden/): a llama
GGUF written from a seed, its prompts, and what the patched llama-server hands the drafter for
them (the taps of the prompt's positions and the target's greedy next token, the anchor).

The golden script runs the reference (SpecForge's DSpineDraftModel) on exactly these inputs, so
the server, given the same target and prompt, must draft the reference's tokens. The target is
F32 and the taps come from a float64 NumPy forward of the very file (tests/support/
llama_reference.py): llama.cpp's F32 CPU path agrees to about 1e-6, far inside the golden
data's smallest gaps."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.support.gguf_models import QTYPE, Shape, write_model
from tests.support.llama_reference import LlamaReference

GOLDEN = Path(__file__).resolve().parents[1] / "engines" / "golden" / "dspine" / "server"
SHAPE = Shape(
    arch="llama",
    n_layer=3,
    n_embd=64,
    n_head=4,
    n_head_kv=4,
    head_dim=16,
    n_ff=128,
    n_vocab=300,
    weight_type=QTYPE.F32,
)
TAPS = (0, 1)  # the drafter's HF target_layer_ids: the outputs of blocks 0 and 1 (GGUF target_layers 1, 2)
MASK_TOKEN = 299  # a padding token of the target's vocabulary
CONTEXT = 12  # prompt tokens before the anchor
SEEDS = (0, 1, 2)
TARGET_SEED = 7
SCALE = 0.3  # large enough that the target's next token depends on the prompt


def write_target(path: Path) -> Path:
    return write_model(path, SHAPE, seed=TARGET_SEED, scale=SCALE)


def prompt(seed: int) -> list[int]:
    """Printable byte tokens, different for each seed."""
    return [int(t) for t in np.random.default_rng(100 + seed).integers(32, 127, size=CONTEXT)]


def inputs(target: Path, tokens: list[int]) -> dict[str, np.ndarray]:
    """The drafter's inputs for a block after `tokens`: the target's embedding and head, the
    prompt's taps, the anchor (the target's greedy next token) and that choice's margin."""
    reference = LlamaReference(target)
    logits, taps = reference.forward(tokens, list(TAPS))
    last = np.sort(logits[-1])
    return {
        "embed": reference.w["token_embd.weight"].astype(np.float32),
        "head": reference.w["output.weight"].astype(np.float32),
        "target_hidden": taps.astype(np.float32),
        "prompt": np.array(tokens, np.int64),
        "anchor": np.array(int(np.argmax(logits[-1])), np.int64),
        "anchor_margin": np.array(float(last[-1] - last[-2]), np.float64),
    }
