#!/usr/bin/env python3
"""Golden data for DSpine from the authors' reference (SpecForge DSpineDraftModel).

Runs the reference's own forward pass, transition_scores and select_cached on a
tiny Qwen3-style DSpine drafter with seeded random weights, and writes
  * an .npz with every weight (reference state-dict names), the inputs and the
    outputs (docs/dspine-golden.md has the schema), and
  * a SpecForge-layout checkpoint folder (save_pretrained: model.safetensors +
    config.json, plus transfer.safetensors holding the code table as `codes`,
    the layout scripts/convert_dspine_checkpoint.py reads).

The reference code is NOT part of this script: it is imported from the folder
given with --reference (a folder holding specforge/modeling/draft/dspine.py,
dflash.py, dflash_kernels.py, registry.py and empty __init__.py files).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reference", required=True, help="folder holding specforge/")
    p.add_argument("--out", required=True, help="output .npz")
    p.add_argument("--ckpt", default=None, help="checkpoint folder (default: <out dir>/ckpt-<out stem>)")
    p.add_argument("--no-ckpt", action="store_true", help="skip the checkpoint folder")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--inputs",
        default=None,
        help="an .npz from make_inputs.py: a real target's embedding, head, prompt taps and anchor "
        "(instead of random ones); --vocab and --ctx then follow it",
    )
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=16)
    p.add_argument("--ffn", type=int, default=128)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--block", type=int, default=16)
    p.add_argument("--ctx", type=int, default=12, help="context positions before the anchor")
    p.add_argument("--taps", type=str, default="0,1", help="dflash target_layer_ids")
    p.add_argument("--mask-token", type=int, default=255)
    p.add_argument("--rank", type=int, default=16, help="dspine transfer_rank")
    p.add_argument("--message", type=int, default=8, help="dspine message_size")
    p.add_argument("--top-k", type=int, default=4)
    p.add_argument(
        "--window",
        type=int,
        default=0,
        help="a sliding window on every layer (0: none): config use_sliding_window, sliding_window and "
        "layer_types as the reference reads them, and the allow-mask cut to it (with eager attention the "
        "reference takes its window from the mask, one for all layers)",
    )
    p.add_argument("--eps", type=float, default=1e-6)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--std", type=float, default=0.2, help="std of random matrices")
    return p.parse_args(argv)


def import_reference(path: str):
    path = os.path.abspath(path)
    if not os.path.isfile(os.path.join(path, "specforge", "modeling", "draft", "dspine.py")):
        sys.exit(f"--reference {path}: no specforge/modeling/draft/dspine.py there")
    sys.path.insert(0, path)
    from specforge.modeling.draft import dspine

    return dspine


def build_config(a):
    from transformers import Qwen3Config

    taps = [int(t) for t in a.taps.split(",") if t.strip() != ""]
    cfg = Qwen3Config(
        vocab_size=a.vocab,
        hidden_size=a.hidden,
        intermediate_size=a.ffn,
        num_hidden_layers=a.layers,
        num_attention_heads=a.heads,
        num_key_value_heads=a.kv_heads,
        head_dim=a.head_dim,
        hidden_act="silu",
        max_position_embeddings=4096,
        rms_norm_eps=a.eps,
        rope_parameters={"rope_type": "default", "rope_theta": a.rope_theta},
        attention_bias=False,
        attention_dropout=0.0,
        use_sliding_window=bool(a.window),
        sliding_window=a.window or None,
        layer_types=[("sliding_attention" if a.window else "full_attention")] * a.layers,
        tie_word_embeddings=False,
    )
    # DFlash / DSpine extras (the same keys SpecForge's configs carry).
    cfg.architectures = ["DSpineDraftModel"]
    cfg.block_size = a.block
    cfg.num_target_layers = max(taps) + 1
    cfg.dflash_config = {"mask_token_id": a.mask_token, "target_layer_ids": taps}
    cfg.dspine_config = {"transfer_rank": a.rank, "message_size": a.message, "top_k": a.top_k}
    cfg._attn_implementation = "eager"
    return cfg, taps


@torch.no_grad()
def randomize(model, gen, std):
    """Seeded random values for every parameter (norm weights: ones + noise)."""
    for name, p in model.named_parameters():
        noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
        if name.endswith("norm.weight") or name.endswith("_norm.weight"):
            p.copy_(1.0 + 0.1 * noise)
        elif name == "injection.bias":
            p.copy_(0.5 * noise)
        else:
            p.copy_(std * noise)


def block_inputs(a, gen, taps):
    H, n, ctx = a.hidden, a.block, a.ctx
    target_hidden = torch.randn(1, ctx, len(taps) * H, generator=gen)
    anchor = int(torch.randint(0, a.vocab, (1,), generator=gen))
    if anchor == a.mask_token:  # keep the anchor distinguishable from the mask
        anchor = (anchor + 1) % a.vocab
    block_ids = torch.full((1, 1, n), a.mask_token, dtype=torch.long)
    block_ids[0, 0, 0] = anchor
    # Positions: context 0..ctx-1, block ctx..ctx+n-1 (anchor at ctx). DFlash's
    # attention rotates keys with all ctx+n positions, queries with the last n.
    position_ids = torch.arange(ctx + n, dtype=torch.long)[None, :]
    # Boolean allow-mask [batch, 1, q=n, kv=ctx+n]: every context key, and the
    # block keys at offsets <= the query's (causal inside the block).
    mask = torch.zeros(1, 1, n, ctx + n, dtype=torch.bool)
    mask[..., :ctx] = True
    mask[..., ctx:] = torch.tril(torch.ones(n, n, dtype=torch.bool))
    if a.window:
        # A sliding window over the context features and the block alike, by absolute position:
        # the query at ctx+i sees the key at p where (ctx+i) - p < window.
        query = torch.arange(ctx, ctx + n)[:, None]
        key = torch.arange(ctx + n)[None, :]
        mask &= (query - key < a.window)[None, None]
    return target_hidden, anchor, block_ids, position_ids, mask


def run_reference(model, embed, head, target_hidden, block_ids, position_ids, mask, top_k):
    """One block through the reference, with per-layer states caught by hooks."""
    layer_out, injected, ctx_out, norm_out = [], [], [], []
    hooks = [
        model.hidden_norm.register_forward_hook(lambda m, i, o: ctx_out.append(o.detach().clone())),
        model.injection.register_forward_hook(lambda m, i, o: injected.append(o.detach().clone())),
        model.norm.register_forward_hook(lambda m, i, o: norm_out.append(o.detach().clone())),
    ]
    for layer in model.layers:
        hooks.append(layer.register_forward_hook(lambda m, i, o: layer_out.append(o.detach().clone())))
    try:
        with torch.no_grad():
            noise_embedding = torch.nn.functional.embedding(block_ids.reshape(1, -1), embed)
            out = model(
                position_ids=position_ids,
                attention_mask=mask,
                noise_embedding=noise_embedding,
                target_hidden=target_hidden,
                block_token_ids=block_ids,
            )
            hidden, pre_injection, layer_features = out
            base_logits = hidden[..., 1:, :] @ head.T  # [1, 1, n-1, V]
            candidates = torch.topk(base_logits, top_k, dim=-1).indices  # sorted, descending
            anchor_ids = block_ids[..., 0]  # [1, 1]
            norm_out.clear()
            scores = model.transition_scores(pre_injection[..., 1:, :], candidates, anchor_ids, head)
            refined = norm_out[-1]
            selected = model.select_cached(scores, candidates)
    finally:
        for h in hooks:
            h.remove()
    L = len(model.layers)
    assert len(layer_out) == L and len(injected) == L and len(ctx_out) == 1
    return {
        "noise_embedding": noise_embedding[0],
        "context": ctx_out[0][0],
        "layer_out": torch.stack([t.reshape(-1, t.shape[-1]) for t in layer_out]),
        "layer_injected": torch.stack([t.reshape(-1, t.shape[-1]) for t in injected]),
        "final_hidden": hidden[0, 0],
        "pre_injection_last": pre_injection[0, 0],
        "layer_features": layer_features[:, 0, 0],
        "base_logits": base_logits[0, 0],
        "candidates": candidates[0, 0],
        "refined": refined[0, 0],
        "scores": scores[0, 0],
        "selected": selected[0, 0],
    }


def main(argv=None):
    a = parse_args(argv)
    if a.inputs:
        with np.load(a.inputs) as given_shape:
            a.vocab, a.hidden = given_shape["embed"].shape
            a.ctx = given_shape["target_hidden"].shape[0]
    dspine = import_reference(a.reference)
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    cfg, taps = build_config(a)

    model = dspine.DSpineDraftModel(cfg).float().eval()
    randomize(model, gen, a.std)
    embed = torch.randn(a.vocab, a.hidden, generator=gen)
    head = a.std * torch.randn(a.vocab, a.hidden, generator=gen)
    given = dict(np.load(a.inputs)) if a.inputs else None
    if given is not None:
        # the target's own embedding and head: the drafter shares them, the codes come from this head
        embed = torch.from_numpy(given["embed"]).float()
        head = torch.from_numpy(given["head"]).float()
    # Codes and readouts from the head, the reference's own way ...
    model.initialize_transfer_space(head)
    pca_readouts = [r.weight.detach().clone() for r in model.injection.readouts]
    # ... then readouts random again (as if trained), codes kept from the head.
    with torch.no_grad():
        for r in model.injection.readouts:
            r.weight.copy_(a.std * torch.randn(r.weight.shape, generator=gen))
    for name in ("injection.bias", "injection.predecessor_gate.weight"):
        assert model.state_dict()[name].abs().min() > 0, name
    for w in model.injection.writes:
        assert w.weight.abs().min() > 0

    target_hidden, anchor, block_ids, position_ids, mask = block_inputs(a, gen, taps)
    if given is not None:
        # what the patched llama-server hands the drafter after the prompt: its taps, the target's next token
        target_hidden = torch.from_numpy(given["target_hidden"]).float()[None]
        anchor = int(given["anchor"])
        block_ids[0, 0, 0] = anchor
    res = run_reference(model, embed, head, target_hidden, block_ids, position_ids, mask, a.top_k)

    # Sanity: the same block with the injection writes zeroed (injection = identity).
    saved = [w.weight.detach().clone() for w in model.injection.writes]
    with torch.no_grad():
        for w in model.injection.writes:
            w.weight.zero_()
    res0 = run_reference(model, embed, head, target_hidden, block_ids, position_ids, mask, a.top_k)
    with torch.no_grad():
        for w, s in zip(model.injection.writes, saved, strict=False):
            w.weight.copy_(s)
    # Re-run once more to prove the restore (and determinism).
    res_again = run_reference(model, embed, head, target_hidden, block_ids, position_ids, mask, a.top_k)
    assert torch.equal(res_again["selected"], res["selected"])
    assert torch.equal(res_again["scores"], res["scores"])

    dcfg = asdict(model.dspine_config)
    config = {
        "architectures": ["DSpineDraftModel"],
        "hidden_size": a.hidden,
        "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads,
        "head_dim": a.head_dim,
        "intermediate_size": a.ffn,
        "vocab_size": a.vocab,
        "block_size": a.block,
        "rms_norm_eps": a.eps,
        "rope_theta": a.rope_theta,
        "hidden_act": "silu",
        "attention_bias": False,
        "layer_types": list(cfg.layer_types),
        "sliding_window": a.window or None,
        "dflash_config": {"mask_token_id": a.mask_token, "target_layer_ids": taps},
        "dspine_config": dcfg,
        "ctx_len": a.ctx,
        "prompt": [int(t) for t in given["prompt"]] if given is not None else None,
        "anchor_id": anchor,
        "seed": a.seed,
        "std": a.std,
        "torch_version": torch.__version__,
    }
    import transformers

    config["transformers_version"] = transformers.__version__

    def f32(t):
        return t.detach().cpu().to(torch.float32).numpy()

    arrays = {}
    for name, t in model.state_dict().items():
        if name == "transfer_ready":
            continue
        arrays[name] = f32(t)
    arrays.update(
        embed=f32(embed),
        head=f32(head),
        pca_readouts=np.stack([f32(t) for t in pca_readouts]),
        target_hidden=f32(target_hidden[0]),
        block_ids=block_ids[0, 0].numpy().astype(np.int64),
        position_ids=position_ids[0].numpy().astype(np.int64),
        attention_mask=mask[0, 0].numpy(),
        config_json=np.array(json.dumps(config, sort_keys=True)),
    )
    for k in (
        "noise_embedding",
        "context",
        "layer_out",
        "layer_injected",
        "final_hidden",
        "pre_injection_last",
        "layer_features",
        "base_logits",
        "refined",
        "scores",
    ):
        arrays[k] = f32(res[k])
    arrays["candidates"] = res["candidates"].numpy().astype(np.int64)
    arrays["selected"] = res["selected"].numpy().astype(np.int64)
    arrays["selected_zero_writes"] = res0["selected"].numpy().astype(np.int64)
    arrays["candidates_zero_writes"] = res0["candidates"].numpy().astype(np.int64)

    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out, **arrays)

    if not a.no_ckpt:
        ckpt = Path(a.ckpt) if a.ckpt else out.parent / f"ckpt-{out.stem}"
        ckpt.mkdir(parents=True, exist_ok=True)
        model.config.dspine_config = dcfg
        model.save_pretrained(str(ckpt), safe_serialization=True)
        # transformers 5 writes rope_parameters only; SpecForge's own configs
        # (written with transformers 4) carry a top-level rope_theta: add it.
        cj = json.loads((ckpt / "config.json").read_text())
        cj.setdefault("rope_theta", a.rope_theta)
        (ckpt / "config.json").write_text(json.dumps(cj, indent=2, sort_keys=True) + "\n")
        from safetensors.torch import save_file

        save_file({"codes": model.transfer_codes.detach().clone().contiguous()}, str(ckpt / "transfer.safetensors"))
        # Prove the folder round-trips through the reference class, strictly.
        from safetensors.torch import load_file

        state = load_file(str(ckpt / "model.safetensors"))
        m2 = dspine.DSpineDraftModel(cfg).float().eval()
        m2.load_state_dict(state, strict=True)
        r2 = run_reference(m2, embed, head, target_hidden, block_ids, position_ids, mask, a.top_k)
        assert torch.equal(r2["selected"], res["selected"]) and torch.equal(r2["scores"], res["scores"])

    differ = not torch.equal(res0["selected"], res["selected"])
    n_diff = int((res0["selected"] != res["selected"]).sum())
    n_cand_diff = int((res0["candidates"] != res["candidates"]).any(-1).sum())
    refine_changes = int((res["selected"] != res["candidates"][..., 0]).sum())
    print(f"seed {a.seed} block {a.block}: anchor {anchor}")
    print("  selected            ", res["selected"].tolist())
    print("  top-1 base          ", res["candidates"][..., 0].tolist())
    print("  selected zero-writes", res0["selected"].tolist())
    print(
        f"  zero writes changes selection: {differ} ({n_diff}/{a.block - 1} positions; "
        f"candidate sets differ at {n_cand_diff}); refinement != base top-1 at {refine_changes}"
    )
    print(f"  wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
