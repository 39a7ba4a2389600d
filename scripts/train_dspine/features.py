"""The target's tapped hidden states (the drafter's context) and its final-normed hidden (the
teacher distribution of the L1 terms: softmax(head . h)) for every generated sequence, and
the check that this JAX target is the server's: its greedy token at every continuation
position must be the token the server generated there.

Written in shards of `SHARD` sequences, in the order of `sequences.jsonl`: `shards/NNNN.npy`
(float16, [tokens, (taps + 1) x n_embd], the taps then the final hidden) with `NNNN.json`
beside it (each sequence's offset, length, prompt length, family, split, and the greedy
agreement). A shard is written whole then renamed, so extraction can run while generation
goes on (only full shards, unless `final`) and resumes where it stopped; training reads
whatever shards exist."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .target import load_target, target_forward

SHARD = 64


def _bucket(n: int) -> int:
    return max(64, -(-n // 64) * 64)


def extract(sequences: Path, target: Path, out: Path, taps: tuple[int, ...], final: bool = False) -> dict:
    records = [json.loads(line) for line in sequences.read_text().splitlines() if line.strip()]
    shards = out / "shards"
    shards.mkdir(parents=True, exist_ok=True)
    todo = [k for k in range(-(-len(records) // SHARD)) if not (shards / f"{k:04d}.json").exists()]
    todo = [k for k in todo if final or (k + 1) * SHARD <= len(records)]
    print(f"features: {len(records)} sequences, {len(todo)} shards to write", flush=True)
    if not todo:
        return summary(out)
    shape, weights = load_target(target)
    w = {k: jnp.asarray(v) for k, v in weights.items()}
    # weights as an argument, not closed-over constants: XLA would try to fold them
    forward = jax.jit(lambda w, toks: target_forward(shape, w, toks, taps))
    start = time.monotonic()
    for done, k in enumerate(todo, 1):
        part = records[k * SHARD : (k + 1) * SHARD]
        total = sum(len(r["prompt"]) + len(r["continuation"]) for r in part)
        feats = np.zeros((total, (len(taps) + 1) * shape.n_embd), np.float16)
        index, offset = [], 0
        for r in part:
            tokens = r["prompt"] + r["continuation"]
            n, p = len(tokens), len(r["prompt"])
            padded = np.zeros((1, _bucket(n)), dtype=np.int32)
            padded[0, :n] = tokens
            logits, tapped, normed = forward(w, jnp.asarray(padded))
            greedy = np.asarray(jnp.argmax(logits[0, :n], axis=-1))
            # logits at position j predict token j + 1: the continuation starts at p
            same = int(np.sum(greedy[p - 1 : n - 1] == np.asarray(tokens[p:])))
            feats[offset : offset + n] = np.concatenate([np.asarray(tapped[0, :n]), np.asarray(normed[0, :n])], -1)
            index.append({"offset": offset, "length": n, "prompt": p, "category": r["category"],
                          "family": r.get("family", r["category"]), "held_out": r["held_out"], "tokens": tokens,
                          "agree": same, "checked": n - p})  # fmt: skip
            offset += n
        # temporary names of this process's own: two extractions (data's last pass, drive.sh's
        # loop) may write one shard at once, the same content, and the last rename wins
        tmp = f"{k:04d}.{os.getpid()}.tmp"
        np.save(shards / f"{tmp}.npy", feats)
        (shards / f"{tmp}.npy").rename(shards / f"{k:04d}.npy")
        meta = {"taps": list(taps), "n_embd": shape.n_embd, "sequences": index}
        (shards / f"{tmp}.json").write_text(json.dumps(meta))
        (shards / f"{tmp}.json").rename(shards / f"{k:04d}.json")
        rate = done / (time.monotonic() - start)
        print(f"  shard {k} ({len(part)} sequences), {(len(todo) - done) / rate:.0f} s left for this pass", flush=True)
    return summary(out)


def summary(out: Path) -> dict:
    """Greedy agreement with the server over every shard written, overall and per category."""
    agree, checked, per = 0, 0, {}
    for path in sorted((out / "shards").glob("[0-9][0-9][0-9][0-9].json")):
        for s in json.loads(path.read_text())["sequences"]:
            agree, checked = agree + s["agree"], checked + s["checked"]
            a = per.setdefault(s["category"], [0, 0])
            a[0], a[1] = a[0] + s["agree"], a[1] + s["checked"]
    report = {"greedy_agreement": agree / max(checked, 1), "positions_checked": checked,
              "greedy_agreement_per_category": {c: a / max(n, 1) for c, (a, n) in sorted(per.items())}}  # fmt: skip
    (out / "agreement.json").write_text(json.dumps(report, indent=2) + "\n")
    return report
