"""A NumPy forward pass of a llama-architecture target (SmolLM2) read from its GGUF: the
residual stream after the blocks a block drafter taps, which is what llama.cpp hands a
`dflash`-family drafter as context (`dflash.target_layers` = HF id + 1 names a block's input,
the output of block HF id). Weights dequantised from the very file the server runs; llama.cpp's
converter permutes Q and K for its NORM rope (adjacent pairs), so this ropes adjacent pairs.

llama.cpp's CPU matmuls quantise activations to 8 bits against Q8_0 weights and this does
not: the features agree to about a percent, enough that a drafter's calls agree except near ties."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
from gguf.quants import dequantize


def _key(reader: gguf.GGUFReader, name: str, default: float | None = None) -> float:
    if default is not None and name not in reader.fields:
        return default
    field = reader.fields[name]
    return field.parts[field.data[0]][0].item()


@dataclass
class LlamaReference:
    path: Path

    def __post_init__(self) -> None:
        reader = gguf.GGUFReader(str(self.path))
        self.n_layer = int(_key(reader, "llama.block_count"))
        self.n_embd = int(_key(reader, "llama.embedding_length"))
        self.n_head = int(_key(reader, "llama.attention.head_count"))
        self.n_head_kv = int(_key(reader, "llama.attention.head_count_kv"))
        self.theta = float(_key(reader, "llama.rope.freq_base", 10000.0))  # llama.cpp's default
        # kept as float32 in the file: 1e-05 reads back as 9.99999974e-06
        self.eps = float(np.float32(_key(reader, "llama.attention.layer_norm_rms_epsilon")))
        self.w = {t.name: dequantize(t.data, t.tensor_type).astype(np.float32) for t in reader.tensors}
        self.head_dim = self.n_embd // self.n_head

    @staticmethod
    def _norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight

    def _rope(self, x: np.ndarray) -> np.ndarray:
        """llama.cpp's NORM rope: adjacent pairs; x (T, H, D)."""
        t, _, d = x.shape
        inv = self.theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        angle = np.arange(t)[:, None] * inv
        cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return np.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], axis=-1).reshape(x.shape)

    def forward(self, tokens: list[int], taps: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(logits (T, V), tapped residual streams (T, len(taps) * n_embd)); `taps` are HF ids."""
        w, eps, hd = self.w, self.eps, self.head_dim
        t = len(tokens)
        h = w["token_embd.weight"][tokens].astype(np.float64)
        causal = np.tril(np.ones((t, t), dtype=bool))
        group = self.n_head // self.n_head_kv
        tapped: dict[int, np.ndarray] = {}
        for il in range(self.n_layer):
            p = f"blk.{il}."
            x = self._norm(h, w[p + "attn_norm.weight"], eps)
            q = self._rope((x @ w[p + "attn_q.weight"].T).reshape(t, self.n_head, hd))
            k = self._rope((x @ w[p + "attn_k.weight"].T).reshape(t, self.n_head_kv, hd))
            v = (x @ w[p + "attn_v.weight"].T).reshape(t, self.n_head_kv, hd)
            out = np.empty((t, self.n_head, hd))
            for head in range(self.n_head):
                scores = q[:, head] @ k[:, head // group].T / np.sqrt(hd)
                scores = np.where(causal, scores, -np.inf)
                scores = np.exp(scores - scores.max(axis=1, keepdims=True))
                out[:, head] = (scores / scores.sum(axis=1, keepdims=True)) @ v[:, head // group]
            h = h + out.reshape(t, -1) @ w[p + "attn_output.weight"].T
            x = self._norm(h, w[p + "ffn_norm.weight"], eps)
            gate = x @ w[p + "ffn_gate.weight"].T
            h = h + (gate / (1.0 + np.exp(-gate)) * (x @ w[p + "ffn_up.weight"].T)) @ w[p + "ffn_down.weight"].T
            if il in taps:
                tapped[il] = h
        head_w = w.get("output.weight", w["token_embd.weight"])
        logits = self._norm(h, w["output_norm.weight"], eps) @ head_w.T
        return logits, np.concatenate([tapped[i] for i in taps], axis=-1)
