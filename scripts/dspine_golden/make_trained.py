#!/usr/bin/env python3
"""A trained drafter, exported by scripts/train_dspine, drafted by the authors' reference.

For an export folder (SpecForge layout: model.safetensors + config.json, written by
`python -m train_dspine export`) and the held-out prompts its `reference-drafts.json` names
(the trainer's own JAX drafts: the first draft after each prompt's prefill), this runs the
reference class (SpecForge's `DSpineDraftModel`, or `DFlashDraftModel` for the DFlash twin)
on the very target features the trainer used (read from the training data's shards) and
writes `reference-module-drafts.json` beside the export, in the trainer's file's layout:
per prompt the reference's base top-1 draft (`base`, `gaps_base`) and, for DSpine, its
`select_cached` lattice walk (`refined`, `gaps_refined`), with the deciding gaps computed as
scripts/train_dspine/reference.py computes them. It prints how many leading positions agree
with the trainer's drafts up to the first near tie (gap < --margin in either file).

Run with the reference venv's python (torch, transformers, safetensors, numpy); no JAX, no
gguf package: the target's token embedding (= its tied head) is read from the target GGUF
with the small reader below. The reference code is imported from --reference (a folder
holding specforge/modeling/draft/{dspine,dflash,dflash_kernels,registry}.py and empty
__init__.py files; docs/dspine-golden.md says how to make it).

    python make_trained.py --reference REF [--export RUNS/export/dspine --export RUNS/export/dflash]
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from pathlib import Path

import numpy as np
import torch

DEFAULT_EXPORTS = [Path("/work/train-runs/export/dspine"), Path("/work/train-runs/export/dflash")]
TRAINER_MARGIN = 0.05  # `clear_base` / `clear_refined` as reference.py writes them (its default margin)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reference", required=True, help="folder holding specforge/")
    p.add_argument(
        "--export",
        type=Path,
        action="append",
        default=None,
        help="an export folder (repeatable; default: the DSpine and DFlash exports of /work/train-runs)",
    )
    p.add_argument("--data", type=Path, help="the training data folder holding shards/ (default: EXPORT/../../data)")
    p.add_argument("--target", type=Path, help="the target GGUF (default: the one reference-drafts.json names)")
    p.add_argument("--margin", type=float, default=0.2, help="a gap below this is a near tie")
    p.add_argument("--threads", type=int, default=1, help="torch threads (the machine is shared)")
    return p.parse_args(argv)


def import_reference(path: str):
    path = os.path.abspath(path)
    if not os.path.isfile(os.path.join(path, "specforge", "modeling", "draft", "dspine.py")):
        sys.exit(f"--reference {path}: no specforge/modeling/draft/dspine.py there")
    sys.path.insert(0, path)
    from specforge.modeling.draft import dflash, dspine

    return dspine, dflash


# --- the target's token embedding from its GGUF (F32, F16 or Q8_0), without the gguf package ---

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def gguf_tensor(path: Path, name: str) -> np.ndarray:
    """One tensor of a GGUF file as float32, numpy order ([rows, cols] = reversed GGUF dims)."""
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        (v,) = struct.unpack_from(fmt, buf, pos)
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        n = take("<Q")
        s = buf[pos : pos + n].decode("utf-8")
        pos += n
        return s

    def value(kind):
        if kind == 8:
            return string()
        if kind == 9:
            inner, n = take("<I"), take("<Q")
            return [value(inner) for _ in range(n)]
        return take(_SCALARS[kind])

    if buf[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    pos = 4
    version, n_tensors, n_kv = take("<I"), take("<Q"), take("<Q")
    if version < 2:
        raise ValueError(f"{path}: GGUF version {version} is not supported")
    alignment = 32
    for _ in range(n_kv):
        key = string()
        v = value(take("<I"))
        if key == "general.alignment":
            alignment = int(v)
    infos = {}
    for _ in range(n_tensors):
        tname = string()
        dims = [take("<Q") for _ in range(take("<I"))]
        infos[tname] = (dims, take("<I"), take("<Q"))
    start = -(-pos // alignment) * alignment
    dims, kind, offset = infos[name]
    shape = tuple(reversed(dims))
    count = int(np.prod(shape))
    at = start + offset
    if kind == 0:  # F32
        out = np.frombuffer(buf, np.float32, count, at)
    elif kind == 1:  # F16
        out = np.frombuffer(buf, np.float16, count, at).astype(np.float32)
    elif kind == 8:  # Q8_0: blocks of 32 int8 with one float16 scale in front
        blocks = np.frombuffer(buf, np.uint8, count // 32 * 34, at).reshape(-1, 34)
        scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)
        out = blocks[:, 2:].copy().view(np.int8).astype(np.float32) * scale
    else:
        raise ValueError(f"{path}: tensor {name} has GGUF type {kind}; only F32, F16 and Q8_0 are read here")
    return np.ascontiguousarray(out.reshape(shape), np.float32)


# --- the training data: the trainer's shards (scripts/train_dspine/data.py's layout) ---


def load_sequences(data: Path):
    """(shards [tokens, (taps + 1) * n_embd] float16 memory maps, sequences with their shard, n_embd)."""
    shards, seqs, n_embd = [], [], 0
    for path in sorted((data / "shards").glob("[0-9][0-9][0-9][0-9].json")):
        meta = json.loads(path.read_text())
        n_embd = meta["n_embd"]
        for s in meta["sequences"]:
            seqs.append({**s, "shard": len(shards)})
        shards.append(np.load(path.with_suffix(".npy"), mmap_mode="r"))
    if not seqs:
        sys.exit(f"no feature shards in {data / 'shards'}")
    return shards, seqs, n_embd


def find_sequence(seqs: list[dict], prompt: list[int], anchor: int) -> dict:
    """The sequence whose prompt is `prompt` and whose next token is `anchor` (held-out first)."""
    a = len(prompt)
    found = [s for s in seqs if s["prompt"] == a and s["length"] > a and s["tokens"][: a + 1] == [*prompt, anchor]]
    if not found:
        raise LookupError(f"no sequence in the shards starts with this {a}-token prompt and anchor {anchor}")
    found.sort(key=lambda s: not s["held_out"])
    return found[0]


def context_taps(shards, seq: dict, n_embd: int) -> np.ndarray:
    """The tap features of positions 0..prompt-1 (what the trainer's block sees), [prompt, taps * n_embd]."""
    rows = shards[seq["shard"]][seq["offset"] : seq["offset"] + seq["prompt"]]
    return np.asarray(rows[:, : rows.shape[1] - n_embd], np.float32)


# --- the reference ---


def build_model(dspine, dflash, folder: Path):
    from safetensors.torch import load_file
    from transformers import Qwen3Config

    config = json.loads((folder / "config.json").read_text())
    is_dspine = "DSpineDraftModel" in config.get("architectures", [])
    cfg = Qwen3Config(**config)
    cfg._attn_implementation = "eager"
    cls = dspine.DSpineDraftModel if is_dspine else dflash.DFlashDraftModel
    model = cls(cfg).float().eval()
    state = load_file(str(folder / "model.safetensors"))
    if is_dspine:
        # the export leaves out the bool buffer `transfer_ready`: the codes it ships are the table
        state["transfer_ready"] = torch.tensor(True)
    model.load_state_dict(state, strict=True)
    return model, config, is_dspine


def clear(gaps, margin: float) -> int:
    low = [i for i, g in enumerate(gaps) if g < margin]
    return low[0] if low else len(gaps)


@torch.no_grad()
def draft(model, is_dspine: bool, config: dict, embed: torch.Tensor, taps: np.ndarray, anchor: int):
    """One block [anchor, MASK x (n-1)] at positions a..a+n-1 over the context 0..a-1, as
    make_golden.py runs it; the gaps as scripts/train_dspine/reference.py defines them."""
    n = config["block_size"]
    mask_id = config["dflash_config"]["mask_token_id"]
    ctx = taps.shape[0]
    block_ids = torch.full((1, 1, n), mask_id, dtype=torch.long)
    block_ids[0, 0, 0] = anchor
    position_ids = torch.arange(ctx + n, dtype=torch.long)[None, :]
    mask = torch.zeros(1, 1, n, ctx + n, dtype=torch.bool)
    mask[..., :ctx] = True
    mask[..., ctx:] = torch.tril(torch.ones(n, n, dtype=torch.bool))  # causal inside the block (both variants)
    noise = torch.nn.functional.embedding(block_ids.reshape(1, -1), embed)
    target_hidden = torch.from_numpy(taps)[None]
    if is_dspine:
        hidden, pre_injection, _ = model(position_ids=position_ids, attention_mask=mask, noise_embedding=noise,
                                         target_hidden=target_hidden, block_token_ids=block_ids)  # fmt: skip
    else:
        hidden = model(position_ids=position_ids, attention_mask=mask, noise_embedding=noise,
                       target_hidden=target_hidden).reshape(1, 1, n, -1)  # fmt: skip
    base_logits = hidden[..., 1:, :] @ embed.T  # [1, 1, n-1, V]; the head is the tied embedding
    k = config["dspine_config"]["top_k"] if is_dspine else 1
    top = torch.topk(base_logits, k + 1, dim=-1)  # sorted, descending
    top_vals = top.values[0, 0].numpy().astype(np.float64)
    base_gap = top_vals[:, 0] - top_vals[:, 1]
    record = {"base": top.indices[0, 0, :, 0].tolist(), "gaps_base": np.round(base_gap, 4).tolist()}
    record["clear_base"] = clear(record["gaps_base"], TRAINER_MARGIN)
    if is_dspine:
        candidates = top.indices[..., :k]
        scores = model.transition_scores(pre_injection[..., 1:, :], candidates, block_ids[..., 0], embed)
        selected = model.select_cached(scores, candidates)
        s = scores[0, 0].numpy().astype(np.float64)
        gaps, idx = [], 0
        for t in range(s.shape[0]):
            row = np.sort(s[t, idx])[::-1]
            idx = int(np.argmax(s[t, idx]))
            gaps.append(min(row[0] - row[1], top_vals[t, idx] - top_vals[t, k]))
        record["refined"] = selected[0, 0].tolist()
        record["gaps_refined"] = np.round(np.asarray(gaps), 4).tolist()
        record["clear_refined"] = clear(record["gaps_refined"], TRAINER_MARGIN)
    return record


def agreement(mine: list[int], theirs: list[int], gaps_a, gaps_b, margin: float) -> tuple[int, int, int]:
    """(leading positions clear of near ties in both files, of those how many agree, agree over all)."""
    n = min(clear(gaps_a, margin), clear(gaps_b, margin))
    return (
        n,
        sum(x == y for x, y in zip(mine[:n], theirs[:n], strict=True)),
        sum(x == y for x, y in zip(mine, theirs, strict=True)),
    )


def run_export(dspine, dflash, folder: Path, a) -> None:
    trainer_file = folder / "reference-drafts.json"
    if not (folder / "model.safetensors").exists() or not trainer_file.exists():
        print(f"{folder}: no export with reference-drafts.json there; skipped")
        return
    trainer = json.loads(trainer_file.read_text())
    target = a.target or Path(trainer["target"])
    data = a.data or folder.parent.parent / "data"
    model, config, is_dspine = build_model(dspine, dflash, folder)
    embed = torch.from_numpy(gguf_tensor(target, "token_embd.weight"))
    if tuple(embed.shape) != (config["vocab_size"], config["hidden_size"]):
        sys.exit(f"{target}: token_embd {tuple(embed.shape)} does not fit the drafter's vocab and width")
    shards, seqs, n_embd = load_sequences(data)
    width = len(config["dflash_config"]["target_layer_ids"]) * config["hidden_size"]
    kinds = ["refined", "base"] if is_dspine else ["base"]
    out, totals = [], {k: [0, 0, 0] for k in kinds}
    print(f"{folder} ({'DSpineDraftModel' if is_dspine else 'DFlashDraftModel'}), target {target}, data {data}")
    for case in trainer["drafts"]:
        seq = find_sequence(seqs, case["prompt_tokens"], case["anchor"])
        taps = context_taps(shards, seq, n_embd)
        if taps.shape[1] != width:
            sys.exit(f"the shards hold {taps.shape[1]} tap columns, the drafter's fc takes {width}")
        rec = draft(model, is_dspine, config, embed, taps, case["anchor"])
        a_ = seq["prompt"]
        labels = seq["tokens"][a_ + 1 : a_ + config["block_size"]]
        record = {"family": seq.get("family"), "prompt_tokens": case["prompt_tokens"], "anchor": case["anchor"],
                  "target": labels, "held_out": seq["held_out"], **rec}  # fmt: skip
        line = []
        for kind in kinds:
            n, agree, whole = agreement(rec[kind], case[kind], rec[f"gaps_{kind}"], case[f"gaps_{kind}"], a.margin)
            gap_diff = float(np.max(np.abs(np.subtract(rec[f"gaps_{kind}"], case[f"gaps_{kind}"]))))
            record[f"agree_{kind}"] = {"clear": n, "agree_clear": agree, "agree_all": whole, "max_gap_diff": gap_diff}
            for i, v in enumerate((n, agree, whole)):
                totals[kind][i] += v
            line.append(f"{kind} {agree}/{n} clear agree ({whole}/{len(rec[kind])} all, gaps within {gap_diff:.4f})")
        print(f"  {record['family'] or '?':18} prompt {a_:4} anchor {case['anchor']:6}: " + "; ".join(line))
        out.append(record)
    import transformers

    result = {"target": str(target), "data": str(data), "reference": os.path.abspath(a.reference),
              "architecture": "DSpineDraftModel" if is_dspine else "DFlashDraftModel", "margin": a.margin,
              "torch_version": torch.__version__, "transformers_version": transformers.__version__,
              "drafts": out}  # fmt: skip
    path = folder / "reference-module-drafts.json"
    path.write_text(json.dumps(result) + "\n")
    for kind in kinds:
        n, agree, whole = totals[kind]
        print(f"  {kind}: {agree} of {n} clear positions agree with {trainer_file.name} "
              f"({whole} of {sum(len(r[kind]) for r in out)} over all positions)")  # fmt: skip
    print(f"  wrote {path}")


def main(argv=None):
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    dspine, dflash = import_reference(a.reference)
    for folder in a.export or DEFAULT_EXPORTS:
        run_export(dspine, dflash, folder, a)


if __name__ == "__main__":
    main()
