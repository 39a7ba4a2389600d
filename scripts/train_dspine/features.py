"""The target's tapped hidden states for every generated sequence, and the check that this
JAX target is the server's: its greedy token at every continuation position must be the
token the server generated there.

Written once to `features.npy` (float16, [total tokens, taps x n_embd]) with `index.json`
(each sequence's offset, length, prompt length, category, split) beside it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .target import load_target, target_forward


def _bucket(n: int) -> int:
    return max(64, -(-n // 64) * 64)


def extract(sequences: Path, target: Path, out: Path, taps: tuple[int, ...]) -> dict:
    records = [json.loads(line) for line in sequences.read_text().splitlines() if line.strip()]
    shape, weights = load_target(target)
    w = {k: jnp.asarray(v) for k, v in weights.items()}
    # weights as an argument, not closed-over constants: XLA would try to fold them
    forward_w = jax.jit(lambda w, toks: target_forward(shape, w, toks, taps))

    def forward(toks):
        return forward_w(w, toks)

    out.mkdir(parents=True, exist_ok=True)
    total = sum(len(r["prompt"]) + len(r["continuation"]) for r in records)
    width = len(taps) * shape.n_embd
    features = np.lib.format.open_memmap(out / "features.npy.tmp", mode="w+", dtype=np.float16, shape=(total, width))
    index, offset, agree, checked = [], 0, 0, 0
    per_category: dict[str, list[int]] = {}
    start = time.monotonic()
    for i, r in enumerate(records):
        tokens = r["prompt"] + r["continuation"]
        n = len(tokens)
        padded = np.zeros((1, _bucket(n)), dtype=np.int32)
        padded[0, :n] = tokens
        logits, tapped = forward(jnp.asarray(padded))
        greedy = np.asarray(jnp.argmax(logits[0, :n], axis=-1))
        p = len(r["prompt"])
        # logits at position j predict token j + 1: the continuation starts at p
        same = int(np.sum(greedy[p - 1 : n - 1] == np.asarray(tokens[p:])))
        agree, checked = agree + same, checked + (n - p)
        counts = per_category.setdefault(r["category"], [0, 0])
        counts[0], counts[1] = counts[0] + same, counts[1] + n - p
        features[offset : offset + n] = np.asarray(tapped[0, :n], dtype=np.float16)
        index.append({"offset": offset, "length": n, "prompt": p, "category": r["category"],
                      "held_out": r["held_out"], "tokens": tokens})  # fmt: skip
        offset += n
        if (i + 1) % 25 == 0 or i + 1 == len(records):
            rate = (i + 1) / (time.monotonic() - start)
            print(f"  features {i + 1}/{len(records)}, greedy agreement {agree / max(checked, 1):.4f}, "
                  f"{(len(records) - i - 1) / rate:.0f} s left", flush=True)  # fmt: skip
    features.flush()
    del features
    (out / "features.npy.tmp").rename(out / "features.npy")
    report = {
        "taps": list(taps),
        "n_embd": shape.n_embd,
        "greedy_agreement": agree / max(checked, 1),
        "greedy_agreement_per_category": {c: a / max(n, 1) for c, (a, n) in per_category.items()},
        "positions_checked": checked,
        "sequences": index,
    }
    (out / "index.json").write_text(json.dumps(report))
    return report
