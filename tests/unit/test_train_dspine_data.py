"""The DSpine trainer's pure parts (scripts/train_dspine, numpy only): its prompt split, the
block layout it trains on (the one llama.cpp drafts with), and a sampler that resumes exactly.
The JAX parts check themselves: `python -m train_dspine check` in the trainer's venv."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from train_dspine.data import Dataset, Sampler, blocks
from train_dspine.prompts import CATEGORIES, build_prompts, chatml


def test_prompts_are_distinct_and_every_category_keeps_a_fixed_held_out_split():
    prompts = build_prompts(per_category=100, held_out=16, seed=0)
    assert len({p.text for p in prompts}) == len(prompts) == 400
    for category in CATEGORIES:
        mine = [p for p in prompts if p.category == category]
        assert len(mine) == 100 and sum(p.held_out for p in mine) == 16
    assert [p.text for p in build_prompts(seed=0) if p.held_out] == [p.text for p in prompts if p.held_out]
    assert chatml("hi").endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")


def test_a_block_is_the_anchor_then_masks_and_its_labels_are_the_tokens_after_the_anchor():
    tokens = np.arange(100, 120, dtype=np.int32)[None, :]  # one sequence of 20 tokens
    btoks, labels, mask = blocks(tokens, np.asarray([20]), np.asarray([[3, 16]]), block=6, mask_id=7)
    assert btoks[0, 0].tolist() == [103, 7, 7, 7, 7, 7]
    assert labels[0, 0].tolist() == [103, 104, 105, 106, 107, 108]
    assert mask[0, 0].tolist() == [False, True, True, True, True, True]  # the anchor drafts nothing
    # near the end: positions past the sequence are not trained on
    assert mask[0, 1].tolist() == [False, True, True, True, False, False]


def _dataset() -> Dataset:
    seqs = [
        {"offset": 20 * i, "length": 20, "prompt": 5, "category": "code", "held_out": i == 0, "tokens": list(range(20))}
        for i in range(6)
    ]
    return Dataset(np.zeros((120, 4), np.float16), seqs, 32, {})


def test_the_sampler_resumes_where_its_state_says():
    data = _dataset()
    first = Sampler(data, seqs_per_step=2, anchors_per_seq=3, seed=1)
    for _ in range(3):
        first.next()
    state = first.state()
    expected = [first.next() for _ in range(4)]
    second = Sampler(data, seqs_per_step=2, anchors_per_seq=3, seed=99)
    second.restore(state)
    for (ids_a, anchors_a), (ids_b, anchors_b) in zip(expected, [second.next() for _ in range(4)], strict=True):
        assert ids_a == ids_b and np.array_equal(anchors_a, anchors_b)
    assert all(0 not in ids for ids, _ in expected)  # the held-out sequence is never trained on
    assert all(((a >= 5) & (a < 19)).all() for _, a in expected)  # anchors inside the continuation
