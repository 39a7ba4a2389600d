"""DSpine as its authors define it (SpecForge's `DSpineDraftModel`), in NumPy, from the
equations in docs/dspine-golden.md: one block of the drafter over the target's tapped
features, its base candidates, the last-write refinement's lattice and the greedy walk.

This is dspine's own reading, checked against the reference's own forward pass by
tests/unit/test_dspine_published.py (golden data in tests/engines/golden/dspine/, made by
scripts/dspine_golden/). It exists to prove the plumbing of what reads the same weights
elsewhere (the converter, the llama.cpp patch) against a reading that is proven itself.

`Parts` switches off one part at a time (the code table, the gate, the write's rms scale,
the shared message, the refinement): the golden cases are chosen so that each one matters.
float32, as the reference runs on these files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

GOLDEN = Path(__file__).resolve().parents[1] / "engines" / "golden" / "dspine"


@dataclass(frozen=True)
class Parts:
    """Which of DSpine's parts run (all, by default); a mutant drops one."""

    codes: bool = True  # the anchor's message from its code (else zero, as the old variant had)
    gate: bool = True  # sigmoid(G_recv f + G_pred p + b) (else 1)
    rms_scale: bool = True  # the write scaled by rms(h) (else 1)
    shared_message: bool = True  # M p (else p's first s values: no message projection)
    refinement: bool = True  # the lattice walk (else the base top-1 at each position)


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    x = x.astype(np.float32)
    return (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)) * weight


def l2_normalise(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def rope(x: np.ndarray, positions: np.ndarray, theta: float) -> np.ndarray:
    """Qwen3's rotary embedding (halves, not interleaved), x: [tokens, heads, head_dim]."""
    dim = x.shape[-1]
    inverse = 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    angles = positions[:, None].astype(np.float32) * inverse[None, :]
    both = np.concatenate([angles, angles], -1)[:, None, :]
    half = dim // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], -1)
    return x * np.cos(both) + rotated * np.sin(both)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def silu(x: np.ndarray) -> np.ndarray:
    return x * sigmoid(x)


class Drafter:
    """A DSpine drafter's weights under the reference's names, and its config."""

    def __init__(self, weights: dict[str, np.ndarray], config: dict) -> None:
        self.w = {k: np.asarray(v, dtype=np.float32) for k, v in weights.items() if np.asarray(v).dtype.kind == "f"}
        self.config = config
        self.hidden = config["hidden_size"]
        self.layers = config["num_hidden_layers"]
        self.heads = config["num_attention_heads"]
        self.kv_heads = config["num_key_value_heads"]
        self.head_dim = config["head_dim"]
        self.eps = config["rms_norm_eps"]
        self.theta = config["rope_theta"]
        self.rank = config["dspine_config"]["transfer_rank"]
        self.top_k = config["dspine_config"]["top_k"]
        self.message_size = config["dspine_config"]["message_size"]

    @classmethod
    def from_golden(cls, path: Path) -> tuple[Drafter, dict[str, np.ndarray]]:
        """The drafter of a golden file, and the file's arrays (inputs and the reference's outputs)."""
        data = dict(np.load(path))
        config = json.loads(str(data["config_json"]))
        return cls(data, config), data

    # -- the injection ------------------------------------------------------------------

    def feature(self, hidden: np.ndarray, layer: int) -> np.ndarray:
        """f = sqrt(r) * the L2-normalised readout of the layer's output."""
        return np.float32(np.sqrt(self.rank)) * l2_normalise(hidden @ self.w[f"injection.readouts.{layer}.weight"].T)

    def code(self, token: int | np.ndarray) -> np.ndarray:
        return np.float32(np.sqrt(self.rank)) * self.w["transfer_codes"][token]

    def write(self, hidden: np.ndarray, receiver: np.ndarray, predecessor: np.ndarray, layer: int, parts: Parts):
        """h + rms(h) * W_l (g * (M p)), g = sigmoid(G_recv f + G_pred p + b)."""
        if parts.gate:
            gate = sigmoid(
                receiver @ self.w["injection.receiver_gate.weight"].T
                + predecessor @ self.w["injection.predecessor_gate.weight"].T
                + self.w["injection.bias"]
            )
        else:
            gate = np.float32(1.0)
        if parts.shared_message:
            message = predecessor @ self.w["injection.message.weight"].T
        else:
            message = predecessor[..., : self.message_size]
        delta = (gate * message) @ self.w[f"injection.writes.{layer}.weight"].T
        scale = np.linalg.norm(hidden, axis=-1, keepdims=True) / np.sqrt(np.float32(self.hidden))
        return hidden + (scale if parts.rms_scale else np.float32(1.0)) * delta

    def inject(self, hidden: np.ndarray, layer: int, anchor: int, parts: Parts) -> np.ndarray:
        """After layer `layer`: every proposal row t >= 1 gets a write from its predecessor (the
        anchor's code for t = 1, the same layer's feature of row t-1 before the write after
        that); the anchor row is untouched."""
        features = self.feature(hidden, layer)
        first = self.code(anchor) if parts.codes else np.zeros(self.rank, np.float32)
        predecessors = np.concatenate([first[None, :], features[1:-1]], 0)
        written = self.write(hidden[1:], features[1:], predecessors, layer, parts)
        return np.concatenate([hidden[:1], written], 0)

    # -- one block ------------------------------------------------------------------------

    def attention(self, layer: int, normed: np.ndarray, context: np.ndarray, positions: np.ndarray) -> np.ndarray:
        p = f"layers.{layer}.self_attn."
        n, d = normed.shape[0], self.head_dim
        ctx = context.shape[0]
        q = (normed @ self.w[p + "q_proj.weight"].T).reshape(n, self.heads, d)
        keys_in = np.concatenate([context, normed], 0)  # the context's keys first, then the block's
        k = (keys_in @ self.w[p + "k_proj.weight"].T).reshape(ctx + n, self.kv_heads, d)
        v = (keys_in @ self.w[p + "v_proj.weight"].T).reshape(ctx + n, self.kv_heads, d)
        q = rope(rms_norm(q, self.w[p + "q_norm.weight"], self.eps), positions[-n:], self.theta)
        k = rope(rms_norm(k, self.w[p + "k_norm.weight"], self.eps), positions, self.theta)
        allowed = np.zeros((n, ctx + n), bool)
        allowed[:, :ctx] = True  # every context position
        allowed[:, ctx:] = np.tril(np.ones((n, n), bool))  # causal inside the block
        group = self.heads // self.kv_heads
        out = []
        for head in range(self.heads):
            scores = (q[:, head] @ k[:, head // group].T) * np.float32(d**-0.5)
            scores = np.where(allowed, scores, -np.inf)
            weights = np.exp(scores - scores.max(-1, keepdims=True))
            out.append((weights / weights.sum(-1, keepdims=True)) @ v[:, head // group])
        return np.concatenate(out, -1) @ self.w[p + "o_proj.weight"].T

    def block(
        self,
        target_hidden: np.ndarray,
        block_ids: np.ndarray,
        positions: np.ndarray,
        embed: np.ndarray,
        head: np.ndarray,
        parts: Parts = Parts(),
    ) -> dict[str, np.ndarray]:
        """One block `[anchor, mask x (n-1)]` over the context's tapped features (positions:
        the context's then the block's): the reference's outputs, and the drafts."""
        context = rms_norm(target_hidden @ self.w["fc.weight"].T, self.w["hidden_norm.weight"], self.eps)
        hidden = embed[block_ids].astype(np.float32)
        anchor = int(block_ids[0])
        layer_out = []
        for layer in range(self.layers):
            p = f"layers.{layer}."
            normed = rms_norm(hidden, self.w[p + "input_layernorm.weight"], self.eps)
            hidden = hidden + self.attention(layer, normed, context, positions)
            mlp_in = rms_norm(hidden, self.w[p + "post_attention_layernorm.weight"], self.eps)
            gate_up = silu(mlp_in @ self.w[p + "mlp.gate_proj.weight"].T) * (
                mlp_in @ self.w[p + "mlp.up_proj.weight"].T
            )
            hidden = hidden + gate_up @ self.w[p + "mlp.down_proj.weight"].T
            layer_out.append(hidden)
            hidden = self.inject(hidden, layer, anchor, parts)
        final = rms_norm(hidden, self.w["norm.weight"], self.eps)
        logits = final[1:] @ head.T
        candidates = np.argsort(-logits, axis=-1, kind="stable")[:, : self.top_k]
        scores = self.lattice(layer_out[-1], candidates, anchor, head, parts)
        selected = walk(scores, candidates) if parts.refinement else candidates[:, 0]
        return {
            "context": context,
            "layer_out": np.stack(layer_out),
            "final_hidden": final,
            "base_logits": logits,
            "candidates": candidates,
            "scores": scores,
            "selected": selected,
        }

    def lattice(
        self, pre_write: np.ndarray, candidates: np.ndarray, anchor: int, head: np.ndarray, parts: Parts
    ) -> np.ndarray:
        """scores[i, a, b]: the last layer's write redone on row i+1's pre-write hidden with the
        true code of predecessor candidate a (the anchor's at i = 0), final-normed, against the
        head row of candidate b."""
        last = self.layers - 1
        positions, k = candidates.shape
        scores = np.zeros((positions, k, k), np.float32)
        for i in range(positions):
            row = pre_write[i + 1]
            receiver = self.feature(row, last)
            before = np.full(k, anchor) if i == 0 else candidates[i - 1]
            refined = np.stack(
                [
                    rms_norm(self.write(row, receiver, self.code(int(a)), last, parts), self.w["norm.weight"], self.eps)
                    for a in before
                ]
            )
            scores[i] = refined @ head[candidates[i]].T
        return scores


def walk(scores: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Greedy from the anchor: at each position the best candidate given the one chosen before."""
    index, chosen = 0, []
    for i in range(candidates.shape[0]):
        index = int(np.argmax(scores[i, index]))
        chosen.append(int(candidates[i, index]))
    return np.array(chosen)
