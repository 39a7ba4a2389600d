"""The DSpine trainer's pure parts (scripts/train_dspine, numpy only): the block layout it
trains on (the one llama.cpp drafts with), its feature shards, and a sampler that resumes
exactly. Its prompts: test_train_dspine_corpus.py; its JAX parts: test_train_dspine_golden.py."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from train_dspine.data import Dataset, Sampler, blocks


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
        {"offset": 20 * i, "length": 20, "prompt": 5, "category": "code", "held_out": i == 0, "tokens": list(range(20)),
         "shard": 0}
        for i in range(6)
    ]  # fmt: skip
    return Dataset([np.zeros((120, 4), np.float16)], seqs, 32, 2)


def test_shards_are_read_as_they_appear_and_split_taps_from_the_teachers_hidden(tmp_path):
    import json

    shards = tmp_path / "shards"
    shards.mkdir()
    for k in range(2):
        feats = (np.arange(10 * 6).reshape(10, 6) + 1000 * k).astype(np.float16)
        np.save(shards / f"{k:04d}.npy", feats)
        seq = {
            "offset": 0,
            "length": 10,
            "prompt": 3,
            "category": "math",
            "held_out": k == 1,
            "tokens": list(range(10)),
        }
        (shards / f"{k:04d}.json").write_text(json.dumps({"n_embd": 2, "sequences": [seq]}))
    # a shard still being written (its temporary name) is not read
    (shards / "0002.123.tmp.json").write_text("{")
    data = Dataset.load(tmp_path)
    assert len(data.sequences) == 2 and data.split(held_out=True) == [1]
    taps, final, toks = data.context([1])
    assert taps.shape == (1, 32, 4) and final.shape == (1, 32, 2)
    assert taps[0, 0].tolist() == [1000, 1001, 1002, 1003] and final[0, 0].tolist() == [1004, 1005]
    assert toks[0, :10].tolist() == list(range(10)) and not final[0, 10:].any()


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


def test_category_weights_put_a_categorys_sequences_that_many_times_in_an_epoch():
    data = _dataset()
    for i, s in enumerate(data.sequences):
        s["category"] = "code" if i % 2 else "prose"  # 1, 3, 5 code; 2, 4 prose (0 held out)
    sampler = Sampler(data, seqs_per_step=1, anchors_per_seq=1, seed=3, weights={"code": 3})
    epoch = [sampler.next()[0][0] for _ in range(len(sampler.train))]
    assert sorted(epoch) == [1, 1, 1, 2, 3, 3, 3, 4, 5, 5, 5]
    # a checkpoint of one mix does not go on under another: its order indexes another list
    state = sampler.state()
    other = Sampler(data, seqs_per_step=1, anchors_per_seq=1, seed=3)
    try:
        other.restore(state)
    except ValueError as e:
        assert "category weights" in str(e)
    else:
        raise AssertionError("a checkpoint of another mix was resumed")
    same = Sampler(data, seqs_per_step=1, anchors_per_seq=1, seed=3, weights={"code": 3})
    same.restore(state)
    (ids_a, anchors_a), (ids_b, anchors_b) = same.next(), sampler.next()
    assert ids_a == ids_b and np.array_equal(anchors_a, anchors_b)
    # naming a weight of 1 is the mix of naming none
    Sampler(data, seqs_per_step=1, anchors_per_seq=1, seed=3, weights={"code": 1}).restore(other.state())
