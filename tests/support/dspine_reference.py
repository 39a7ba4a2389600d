"""A NumPy reference of the DSpine draft pass (docs/dspine-variant.md), read from the GGUF that
tests/support/block_drafters.py writes, for comparison with llama-server's drafts.

What it computes is what the definition says, written plainly: the target's tapped hidden
states through `fc` and `enc.output_norm` into every layer's K/V; the block `[last token,
MASK x n]` at positions pos0 .. pos0+n through the DFlash layers (causal or not, sliding
window or not), with DSpine's adjacent causal injection after every listed layer; the head;
and the drafts: the top token at each drafting position, or DFlash2's lattice walk where the
file carries the selector. f64 throughout, so where it and the server disagree the server's
f32 is what moved; `margin` says how close a position's call was.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
from gguf.quants import dequantize


def _read(path: Path) -> tuple[dict[str, object], dict[str, np.ndarray]]:
    reader = gguf.GGUFReader(str(path))
    keys: dict[str, object] = {}
    for f in reader.fields.values():
        if not f.types:
            continue
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            if f.types[-1] == gguf.GGUFValueType.STRING:
                continue
            keys[f.name] = [f.parts[i][0].item() for i in f.data]
        elif f.types[0] == gguf.GGUFValueType.STRING:
            keys[f.name] = bytes(f.parts[f.data[0]]).decode()
        else:
            keys[f.name] = f.parts[f.data[0]][0].item()
    weights = {}
    for t in reader.tensors:
        shape = tuple(int(n) for n in reversed(t.shape))
        # a shipped drafter is quantised (Q8_0): its values as llama.cpp dequantises them
        weights[t.name] = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float64).reshape(shape)
    return keys, weights


def rms_norm(x: np.ndarray, weight: np.ndarray | None, eps: float) -> np.ndarray:
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * weight if weight is not None else y


def rope_neox(x: np.ndarray, pos: np.ndarray, base: float) -> np.ndarray:
    """x: (n, heads, head_dim); NeoX pairs dims i and i + head_dim/2 (upstream's DFlash rope)."""
    half = x.shape[-1] // 2
    freq = base ** (-np.arange(half) * 2.0 / x.shape[-1])
    angle = pos[:, None, None] * freq[None, None, :]
    cos, sin = np.cos(angle), np.sin(angle)
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # sigmoid, without overflow


@dataclass
class Draft:
    tokens: list[int]
    margin: list[float]  # per drafted position: top score minus the runner-up's
    logits: np.ndarray  # (n_block, n_vocab), the head's output at every block position


class DSpineReference:
    """One drafter file; `draft(...)` is one draft step."""

    def __init__(
        self, drafter: Path, target_features: np.ndarray | None, shared: dict[str, np.ndarray] | None = None
    ) -> None:
        """`target_features[token]`: the target's tapped hidden states for a token, concatenated
        over the tapped layers (the tap at layer 0 is the target's token embedding: a lookup).
        None: a real target, whose features `forward` is given per context. `shared`: the
        target's `token_embd.weight` (and `output.weight`) for a drafter file that carries
        none and uses the target's, as llama.cpp then does."""
        self.keys, self.w = _read(drafter)
        for name, tensor in (shared or {}).items():
            self.w.setdefault(name, np.asarray(tensor, dtype=np.float64))
        if "output.weight" not in self.w:
            self.w["output.weight"] = self.w["token_embd.weight"]  # a tied head
        k = self.keys
        self.n_layer = int(k["dflash.block_count"])
        self.n_head = int(k["dflash.attention.head_count"])
        self.n_head_kv = int(k["dflash.attention.head_count_kv"])
        self.head_dim = int(k["dflash.attention.key_length"])
        self.eps = float(k["dflash.attention.layer_norm_rms_epsilon"])
        self.rope_base = float(k.get("dflash.rope.freq_base", 10000.0))
        self.mask_token = int(k["tokenizer.ggml.mask_token_id"])
        self.features = target_features
        self.injecting = self._injection_layers()
        self.dspine = bool(self.injecting) or any(n.endswith("inj_read.weight") for n in self.w)
        causal_default = self.dspine
        self.causal = bool(k.get("dflash.attention.causal", causal_default))
        self.causal_full = bool(k.get("dflash.attention.causal_full_layers", True))
        window = k.get("dflash.attention.sliding_window", 8192 if self.dspine else 0)
        self.window = int(window)
        pattern = k.get("dflash.attention.sliding_window_pattern")
        if self.window and pattern is None:
            pattern = [True] * self.n_layer if self.dspine else None
        self.swa = [bool(p) for p in pattern] if pattern is not None else [False] * self.n_layer
        # upstream reads the anchor-first layout for DSpark only; the patch, for DSpine too
        self.anchor_first = self.dspine and bool(k.get("dflash.sample_from_anchor", False))
        self.gate = str(k.get("dflash.injection.gate", "sigmoid"))
        self.activation = str(k.get("dflash.injection.activation", "identity"))
        self.top_k = int(k.get("dflash.selector_top_k", 0)) if "selector_hidden.weight" in self.w else 0

    def _injection_layers(self) -> list[int]:
        carrying = [il for il in range(int(self.keys["dflash.block_count"])) if f"blk.{il}.inj_read.weight" in self.w]
        listed = self.keys.get("dflash.injection.layers")
        return [int(il) for il in listed] if listed is not None else carrying

    def _causal_for(self, il: int) -> bool:
        if not self.causal:
            return False
        return self.causal_full or self.swa[il]

    def _inject(self, il: int, h: np.ndarray) -> np.ndarray:
        p = f"blk.{il}."
        w = self.w
        x = rms_norm(h, w[p + "inj_norm.weight"], self.eps) if p + "inj_norm.weight" in w else h
        code = x @ w[p + "inj_read.weight"].T  # c_t
        msg = np.zeros_like(code)
        msg[1:] = code[:-1]  # m_t = c_{t-1}; the anchor gets nothing
        if p + "inj_msg.weight" in w:
            msg = msg @ w[p + "inj_msg.weight"].T
        if self.activation == "silu":
            msg = silu(msg)
        elif self.activation == "tanh":
            msg = np.tanh(msg)
        update = msg @ w[p + "inj_write.weight"].T
        if self.gate == "sigmoid":
            gate_w = w[p + "inj_gate.weight"]
            # a scalar gate {n_embd, 1} can come out of a converter as a 1-D {n_embd}
            g = x @ (gate_w[None, :] if gate_w.ndim == 1 else gate_w).T
            if p + "inj_gate.bias" in w:
                g = g + w[p + "inj_gate.bias"]
            update = update * sigmoid(g)
        return h + update

    def forward(
        self,
        context: list[int],
        id_last: int,
        n_block: int,
        inject: bool = True,
        block: list[int] | None = None,
        features: np.ndarray | None = None,
    ) -> np.ndarray:
        """The head's logits at every block position: `context` (positions 0 .. pos0-1) is what
        the target has read, `id_last` sits at pos0, then MASK x (n_block - 1) (or `block`,
        the block's inputs themselves). `features`: the target's tapped hidden states of the
        context, one row a position (else looked up per token)."""
        w, eps, hd = self.w, self.eps, self.head_dim
        pos0 = len(context)
        if features is None:
            assert self.features is not None, "a real target's features come with each context"
            features = self.features[np.asarray(context, dtype=np.int64).reshape(-1)]
        feats = np.asarray(features, dtype=np.float64)[:pos0]
        g = rms_norm(feats @ w["fc.weight"].T, w["enc.output_norm.weight"], eps)
        ctx_pos = np.arange(pos0, dtype=np.float64)
        blk_pos = np.arange(pos0, pos0 + n_block, dtype=np.float64)
        tokens = block if block is not None else [id_last] + [self.mask_token] * (n_block - 1)
        h = w["token_embd.weight"][tokens]
        group = self.n_head // self.n_head_kv
        for il in range(self.n_layer):
            p = f"blk.{il}."
            x = rms_norm(h, w[p + "attn_norm.weight"], eps)
            q = (x @ w[p + "attn_q.weight"].T).reshape(n_block, self.n_head, hd)
            k = (x @ w[p + "attn_k.weight"].T).reshape(n_block, self.n_head_kv, hd)
            v = (x @ w[p + "attn_v.weight"].T).reshape(n_block, self.n_head_kv, hd)
            q = rope_neox(rms_norm(q, w[p + "attn_q_norm.weight"], eps), blk_pos, self.rope_base)
            k = rope_neox(rms_norm(k, w[p + "attn_k_norm.weight"], eps), blk_pos, self.rope_base)
            kc = (g @ w[p + "attn_k.weight"].T).reshape(pos0, self.n_head_kv, hd)
            vc = (g @ w[p + "attn_v.weight"].T).reshape(pos0, self.n_head_kv, hd)
            kc = rope_neox(rms_norm(kc, w[p + "attn_k_norm.weight"], eps), ctx_pos, self.rope_base)
            keys = np.concatenate([kc, k])
            values = np.concatenate([vc, v])
            key_pos = np.concatenate([ctx_pos, blk_pos])
            allowed = np.ones((n_block, len(key_pos)), dtype=bool)
            if self._causal_for(il):
                allowed &= key_pos[None, :] <= blk_pos[:, None]
            if self.swa[il] and self.window:
                allowed &= (blk_pos[:, None] - key_pos[None, :]) < self.window
            out = np.empty((n_block, self.n_head, hd))
            for head in range(self.n_head):
                kv = head // group
                scores = q[:, head] @ keys[:, kv].T / np.sqrt(hd)
                scores = np.where(allowed, scores, -np.inf)
                scores = np.exp(scores - scores.max(axis=1, keepdims=True))
                out[:, head] = (scores / scores.sum(axis=1, keepdims=True)) @ values[:, kv]
            ffn_inp = out.reshape(n_block, -1) @ w[p + "attn_output.weight"].T + h
            y = rms_norm(ffn_inp, w[p + "ffn_norm.weight"], eps)
            y = (silu(y @ w[p + "ffn_gate.weight"].T) * (y @ w[p + "ffn_up.weight"].T)) @ w[p + "ffn_down.weight"].T
            h = y + ffn_inp
            if inject and il in self.injecting:
                h = self._inject(il, h)
        self.last_hidden = rms_norm(h, w["output_norm.weight"], eps)
        return self.last_hidden @ w["output.weight"].T

    def draft(
        self,
        context: list[int],
        id_last: int,
        n_max: int,
        bias: dict[int, float] | None = None,
        eog: frozenset[int] = frozenset(),
        inject: bool = True,
        candidates: int = 10,
        features: np.ndarray | None = None,
    ) -> Draft:
        """One draft step at launch length n_max, greedy: what llama-server's DSpine drafts under
        a greedy request with `bias` as its logit_bias. The drafter follows the request's sampler
        over its `candidates` likeliest tokens (llama-server offloads a top-10 of the draft logits
        to the backend by default, --spec-draft-backend-sampling, so the request's bias reaches
        only those); a draft stops after an end-of-generation token. With the selector: the
        lattice walk."""
        n_block = n_max if self.anchor_first else n_max + 1
        logits = self.forward(context, id_last, n_block, inject, features=features)
        if self.top_k:
            return self._walk(logits, id_last)
        first = 0 if self.anchor_first else 1
        tokens: list[int] = []
        margins: list[float] = []
        for t in range(first, n_block):
            order = np.argsort(logits[t])
            kept = order[-candidates:]
            boundary = float(logits[t][order[-candidates]] - logits[t][order[-candidates - 1]])
            row = logits[t][kept] + np.array([(bias or {}).get(int(k), 0.0) for k in kept])
            top2 = np.argsort(row)[-2:]
            tokens.append(int(kept[top2[1]]))
            margins.append(min(float(row[top2[1]] - row[top2[0]]), boundary))
            if tokens[-1] in eog:
                break
        return Draft(tokens, margins, logits)

    def _walk(self, logits: np.ndarray, id_last: int) -> Draft:
        """DFlash2's lattice, as the definition's step 4: each position's top-K candidates, each
        (t-1, t) pair scored as logit_t(b) + sum_r prev[a, r] gate_t[r] next[b, r], walked from the
        anchor, greedy."""
        w = self.w
        gate = self.last_hidden @ w["selector_hidden.weight"].T
        prev, nxt = w["selector_predecessor.weight"], w["selector_successor.weight"]
        tokens: list[int] = []
        margins: list[float] = []
        a = id_last
        for t in range(1, logits.shape[0]):
            candidates = np.argsort(logits[t])[-self.top_k :]
            scores = logits[t][candidates] + (prev[a] * gate[t]) @ nxt[candidates].T
            order = np.argsort(scores)
            a = int(candidates[order[-1]])
            tokens.append(a)
            margins.append(float(scores[order[-1]] - scores[order[-2]]))
        return Draft(tokens, margins, logits)


def accepted(draft: list[int], target_next: list[int]) -> int:
    """How many leading drafts the greedy target keeps: the drafts that equal what it emits."""
    n = 0
    for d, t in zip(draft, target_next, strict=False):
        if d != t:
            break
        n += 1
    return n
