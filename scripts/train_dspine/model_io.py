"""Checkpoints (to stop and go on) and the exported drafter (safetensors + config.json).

A checkpoint is one folder written whole and then renamed into place, so a run killed
mid-write keeps the previous one: params and optimizer leaves (npz), and state.json with
the step, the sampler's position and RNG, the seconds spent and the run's settings."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path

import jax
import numpy as np
from safetensors.numpy import save_file

from .drafter import DrafterShape


def save_checkpoint(folder: Path, params: dict, opt_state, state: dict) -> None:
    tmp = folder / "checkpoint.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    np.savez(tmp / "params.npz", **{k: np.asarray(v) for k, v in params.items()})
    leaves = jax.tree_util.tree_leaves(opt_state)
    np.savez(tmp / "opt.npz", *[np.asarray(x) for x in leaves])
    (tmp / "state.json").write_text(json.dumps(state))
    final = folder / "checkpoint"
    old = folder / "checkpoint.old"
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)


def load_params(folder: Path) -> dict | None:
    """The params of folder/checkpoint alone (to measure or export), or None."""
    path = folder / "checkpoint" / "params.npz"
    if not path.exists():
        return None
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def load_checkpoint(folder: Path, opt_template) -> tuple[dict, object, dict] | None:
    final = folder / "checkpoint"
    if not (final / "state.json").exists():
        return None
    with np.load(final / "params.npz") as f:
        params = {k: f[k] for k in f.files}
    with np.load(final / "opt.npz") as f:
        leaves = [f[f"arr_{i}"] for i in range(len(f.files))]
    treedef = jax.tree_util.tree_structure(opt_template)
    return params, jax.tree_util.tree_unflatten(treedef, leaves), json.loads((final / "state.json").read_text())


def drafter_config(shape: DrafterShape, taps: tuple[int, ...], mask_id: int, vocab: int, objective=None) -> dict:
    """config.json in SpecForge's layout (the reference's own `save_pretrained` writes the same
    fields): DSpineDraftModel with its dspine_config, or the DFlash twin (DFlashDraftModel,
    causal inside the block like DSpine, so the two differ only by the injection)."""
    config: dict = {
        "architectures": ["DSpineDraftModel" if shape.injection else "DFlashDraftModel"],
        "model_type": "qwen3",
        "attention_bias": False,
        "hidden_size": shape.n_embd,
        "intermediate_size": shape.n_ff,
        "num_hidden_layers": shape.n_layer,
        "num_attention_heads": shape.n_head,
        "num_key_value_heads": shape.n_head_kv,
        "head_dim": shape.head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": shape.rms_eps,
        "rope_theta": shape.rope_theta,
        "rope_parameters": {"rope_theta": shape.rope_theta, "rope_type": "default"},
        "max_position_embeddings": 8192,
        "vocab_size": vocab,
        "tie_word_embeddings": False,
        "use_sliding_window": False,
        "sliding_window": None,
        "layer_types": ["full_attention"] * shape.n_layer,
        "num_target_layers": len(taps),
        "block_size": shape.block_size,
        "dflash_config": {"mask_token_id": mask_id, "target_layer_ids": list(taps)},
        "dtype": "float32",
    }
    if shape.injection:
        config["dspine_config"] = {"transfer_rank": shape.transfer_rank, "message_size": shape.message_size,
                                   "top_k": shape.top_k}  # fmt: skip
        if objective is not None:
            config["dspine_config"].update({
                "ce_weight": objective.ce_weight, "alignment_weight": objective.alignment_weight,
                "alignment_warmup_steps": objective.alignment_warmup,
                "replacement_layers": objective.replacement_layers,
                "replacement_probability": objective.replacement_probability,
                "replacement_hold_ratio": objective.replacement_hold,
                "replacement_end_ratio": objective.replacement_end,
                "candidate_mass_threshold": objective.mass_threshold,
            })  # fmt: skip
    else:
        config["dflash_config"]["causal"] = True
    return config


def export(folder: Path, params: dict, config: dict, codes: np.ndarray | None) -> Path:
    """model.safetensors (float32: the weights under the reference's names, plus
    `transfer_codes` for DSpine) + config.json, written beside each other then moved into
    `folder`. `transfer_ready` is left out: a bool buffer the converter drops anyway."""
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tensors = {k: np.ascontiguousarray(np.asarray(v, np.float32)) for k, v in params.items()}
    if codes is not None:
        tensors["transfer_codes"] = np.ascontiguousarray(codes, np.float32)
    save_file(tensors, str(tmp / "model.safetensors"))
    (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder


def shape_json(shape: DrafterShape) -> dict:
    return asdict(shape)
