"""Blocks to train and measure on, cut from the generated sequences and their target features.

A block starts at an anchor a inside the continuation (a >= prompt length: the anchor is a
token the target produced, as after a real prefill), holds [token a, MASK x (block-1)] at
positions a .. a+block-1, sees the target features of positions < a, and its labels are
the target's greedy tokens a+1 .. a+block-1 (masked past the sequence's end)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class Dataset:
    shards: list[np.ndarray]  # per shard [tokens, (taps + 1) * n_embd], float16, memory-mapped
    sequences: list[dict]
    max_len: int
    n_embd: int

    @classmethod
    def load(cls, folder: Path) -> Dataset:
        """Every shard features.py has finished (a run started while data is still coming
        trains on what is there; the next resume sees more)."""
        shards, seqs, n_embd = [], [], 0
        for path in sorted((folder / "shards").glob("[0-9][0-9][0-9][0-9].json")):
            meta = json.loads(path.read_text())
            n_embd = meta["n_embd"]
            for s in meta["sequences"]:
                seqs.append({**s, "shard": len(shards)})
            shards.append(np.load(path.with_suffix(".npy"), mmap_mode="r"))
        if not seqs:
            raise FileNotFoundError(f"no feature shards in {folder / 'shards'}")
        max_len = max(s["length"] for s in seqs)
        return cls(shards, seqs, -(-max_len // 32) * 32, n_embd)

    def split(self, held_out: bool) -> list[int]:
        return [i for i, s in enumerate(self.sequences) if s["held_out"] == held_out and s["length"] > s["prompt"] + 1]

    def context(self, ids: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Tap features [S, max_len, taps * n_embd], the target's final hidden [S, max_len, n_embd]
        (zeros past each end) and tokens [S, max_len]."""
        width = self.shards[0].shape[1]
        feats = np.zeros((len(ids), self.max_len, width), np.float32)
        toks = np.zeros((len(ids), self.max_len), np.int32)
        for row, i in enumerate(ids):
            s = self.sequences[i]
            feats[row, : s["length"]] = self.shards[s["shard"]][s["offset"] : s["offset"] + s["length"]]
            toks[row, : s["length"]] = s["tokens"]
        return feats[..., : width - self.n_embd], feats[..., width - self.n_embd :], toks


def blocks(
    tokens: np.ndarray, lengths: np.ndarray, anchors: np.ndarray, block: int, mask_id: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """anchors [S, A] -> (block tokens [S, A, block], labels [S, A, block], label mask [S, A, block])."""
    s_idx = np.arange(tokens.shape[0])[:, None, None]
    pos = anchors[..., None] + np.arange(block)
    inside = pos < lengths[:, None, None]
    labels = tokens[s_idx, np.minimum(pos, tokens.shape[1] - 1)]
    block_tokens = np.full(pos.shape, mask_id, np.int32)
    block_tokens[..., 0] = labels[..., 0]
    mask = inside.copy()
    mask[..., 0] = False  # the anchor drafts nothing (in-place layout)
    return block_tokens, labels.astype(np.int32), mask


class Sampler:
    """Training batches in a fixed order given the seed: an epoch is a permutation of the training
    sequences, `cursor` is where in it the next batch starts. Its whole state goes in a checkpoint.

    `weights` (category -> a whole number, 1 where not named) puts a category's sequences that
    many times in each epoch: the corpus has fewer code prompts than math ones, and a coding
    assistant's drafter is judged on code first."""

    def __init__(
        self, data: Dataset, seqs_per_step: int, anchors_per_seq: int, seed: int, weights: dict[str, int] | None = None
    ) -> None:
        self.data, self.s, self.a = data, seqs_per_step, anchors_per_seq
        # a weight of 1 is no weight: {"code": 1} is the mix {} makes, and resumes it
        self.weights = {name: w for name, w in sorted((weights or {}).items()) if w != 1}
        if any(w < 1 for w in self.weights.values()):
            raise ValueError(f"category weights must be whole numbers of at least 1: {self.weights}")
        self.train = [
            i for i in data.split(held_out=False) for _ in range(self.weights.get(data.sequences[i]["category"], 1))
        ]
        self.rng = np.random.default_rng(seed)
        self.epoch, self.cursor = 0, 0
        self.order = self.rng.permutation(len(self.train))

    def state(self) -> dict:
        return {"epoch": self.epoch, "cursor": self.cursor, "order": self.order.tolist(),
                "rng": self.rng.bit_generator.state, "weights": self.weights}  # fmt: skip

    def restore(self, state: dict) -> None:
        # the order indexes this sampler's list, which the weights make: another mix cannot go on from it
        if state.get("weights", {}) != self.weights:
            raise ValueError(f"the checkpoint was trained with category weights {state.get('weights', {})}, "
                             f"not {self.weights}: resume with the same --category-weights")  # fmt: skip
        self.epoch, self.cursor = state["epoch"], state["cursor"]
        self.order = np.asarray(state["order"])
        self.rng.bit_generator.state = state["rng"]

    def next(self) -> tuple[list[int], np.ndarray]:
        if self.cursor + self.s > len(self.order):
            self.epoch, self.cursor = self.epoch + 1, 0
            self.order = self.rng.permutation(len(self.train))
        ids = [self.train[j] for j in self.order[self.cursor : self.cursor + self.s]]
        self.cursor += self.s
        anchors = np.zeros((self.s, self.a), np.int32)
        for row, i in enumerate(ids):
            seq = self.data.sequences[i]
            anchors[row] = self.rng.integers(seq["prompt"], seq["length"] - 1, size=self.a)
        return ids, anchors
