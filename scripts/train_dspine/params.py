"""A new drafter's parameters, under the reference's state-dict names ([out, in]).

- The transfer space (the authors' `initialize_transfer_space`, written from its
  description): the target head's rows L2-normalised, centred, PCA; the codes are the rows
  projected on the top r eigenvectors and whitened (divided by sqrt(eigenvalue)), then
  L2-normalised; every layer's readout starts at the eigenvector matrix transposed. The
  codes are fixed: they are saved beside the weights and never trained.
- The injection as the reference starts it: writes and predecessor_gate zero (a new DSpine
  drafter computes what its DFlash twin computes), bias zero, message and receiver_gate
  uniform in +-1/sqrt(r) (PyTorch's Linear default).
- The backbone: a warm start from the target's last blocks (Q/K un-permuted from llama.cpp's
  rope layout to NeoX order; `fc` picks the deepest tap), as the earlier trainer did: with
  a CPU budget of hours a random backbone learns too little. `from_target=False` is random."""

from __future__ import annotations

import numpy as np

from .drafter import DrafterShape


def transfer_space(head: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes [V, r], readout [r, H], eigenvalues of all H directions, descending)."""
    rows = head.astype(np.float64)
    rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    mean = rows.mean(0)
    centred = rows - mean
    cov = centred.T @ centred
    values, vectors = np.linalg.eigh(cov)  # ascending
    values, vectors = values[::-1], vectors[:, ::-1]
    top, lam = vectors[:, :rank], values[:rank]
    codes = centred @ top / np.sqrt(lam)
    codes /= np.maximum(np.linalg.norm(codes, axis=1, keepdims=True), 1e-12)
    return codes.astype(np.float32), top.T.astype(np.float32).copy(), values


def gguf_qk_to_neox(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's converter permutation of a llama Q/K weight (its NORM rope pairs
    adjacent values) so a NeoX-rope layer attends as the target's block does."""
    hd = w.shape[0] // n_head
    return w.reshape(n_head, hd // 2, 2, -1).swapaxes(1, 2).reshape(w.shape)


def init_params(
    shape: DrafterShape, n_target_layers: int, tw: dict, readout: np.ndarray, rng: np.random.Generator, from_target=True
) -> dict[str, np.ndarray]:
    def normal(*dims: int, std: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(dims) * std).astype(np.float32)

    def uniform(out: int, inp: int) -> np.ndarray:
        bound = 1.0 / np.sqrt(inp)
        return rng.uniform(-bound, bound, (out, inp)).astype(np.float32)

    d, hd = shape.n_embd, shape.head_dim
    p: dict[str, np.ndarray] = {"fc.weight": normal(d, shape.n_taps * d), "hidden_norm.weight": np.ones(d, np.float32),
                                "norm.weight": np.ones(d, np.float32)}  # fmt: skip
    if from_target:
        p["fc.weight"][:, (shape.n_taps - 1) * d :] += np.eye(d, dtype=np.float32)
        p["norm.weight"] = tw["output_norm.weight"].copy()
    first = n_target_layers - shape.n_layer
    for i in range(shape.n_layer):
        pre, t = f"layers.{i}.", f"blk.{first + i}."
        if from_target:
            p[pre + "input_layernorm.weight"] = tw[t + "attn_norm.weight"].copy()
            p[pre + "self_attn.q_proj.weight"] = gguf_qk_to_neox(tw[t + "attn_q.weight"], shape.n_head)
            p[pre + "self_attn.k_proj.weight"] = gguf_qk_to_neox(tw[t + "attn_k.weight"], shape.n_head_kv)
            p[pre + "self_attn.v_proj.weight"] = tw[t + "attn_v.weight"].copy()
            p[pre + "self_attn.o_proj.weight"] = tw[t + "attn_output.weight"].copy()
            p[pre + "post_attention_layernorm.weight"] = tw[t + "ffn_norm.weight"].copy()
            p[pre + "mlp.gate_proj.weight"] = tw[t + "ffn_gate.weight"].copy()
            p[pre + "mlp.up_proj.weight"] = tw[t + "ffn_up.weight"].copy()
            p[pre + "mlp.down_proj.weight"] = tw[t + "ffn_down.weight"].copy()
            if i == 0:
                p["hidden_norm.weight"] = tw[t + "attn_norm.weight"].copy()
        else:
            p[pre + "input_layernorm.weight"] = np.ones(d, np.float32)
            p[pre + "self_attn.q_proj.weight"] = normal(shape.n_head * hd, d)
            p[pre + "self_attn.k_proj.weight"] = normal(shape.n_head_kv * hd, d)
            p[pre + "self_attn.v_proj.weight"] = normal(shape.n_head_kv * hd, d)
            p[pre + "self_attn.o_proj.weight"] = normal(d, shape.n_head * hd)
            p[pre + "post_attention_layernorm.weight"] = np.ones(d, np.float32)
            p[pre + "mlp.gate_proj.weight"] = normal(shape.n_ff, d)
            p[pre + "mlp.up_proj.weight"] = normal(shape.n_ff, d)
            p[pre + "mlp.down_proj.weight"] = normal(d, shape.n_ff)
        p[pre + "self_attn.q_norm.weight"] = np.ones(hd, np.float32)
        p[pre + "self_attn.k_norm.weight"] = np.ones(hd, np.float32)
        if shape.injection:
            p[f"injection.readouts.{i}.weight"] = readout.copy()
            p[f"injection.writes.{i}.weight"] = np.zeros((d, shape.message_size), np.float32)
    if shape.injection:
        r, s = shape.transfer_rank, shape.message_size
        p["injection.message.weight"] = uniform(s, r)
        p["injection.receiver_gate.weight"] = uniform(s, r)
        p["injection.predecessor_gate.weight"] = np.zeros((s, r), np.float32)
        p["injection.bias"] = np.zeros(s, np.float32)
    return p
