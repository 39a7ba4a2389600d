"""The memory model: bytes per device for one model at one context. Pure.

Weights, KV cache and recurrent state follow llama.cpp's own arithmetic
exactly (checked against its logs in tests/engines/test_memory_vs_llama.py). The
compute buffer is the one estimate: llama.cpp's graph allocator reuses memory,
so it is modelled by its dominant terms (the logits of one ubatch, the
attention mask, one block's activations, the KQ matrix without flash
attention), unless a curve measured by llama.cpp itself is at hand
(see dryrun.py).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import get_args

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from ..choices import KvType
from .shape import GDN_HYBRIDS, ModelShape

KV_TYPES: tuple[KvType, ...] = get_args(KvType)
CTX_PAD = 256  # llama.cpp pads n_ctx to a multiple of this
DEFAULT_UBATCH = 512


def row_bytes(type_name: str, n_values: int) -> int:
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name.upper()]]
    return n_values // block * size


def padded(n: int, to: int = CTX_PAD) -> int:
    return -(-n // to) * to


@dataclass(frozen=True)
class Runtime:
    """How a model is run: what llama.cpp's context parameters will be."""

    n_ctx: int
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: bool = True
    n_ubatch: int = DEFAULT_UBATCH
    n_seq: int = 1
    n_rs_seq: int = 0  # recurrent-state snapshots for speculative rollback
    gpu_layers: int | None = None  # None: every block and the output layer
    load_mtp: bool = False
    window: int | None = None  # force a sliding window on every KV block (DSpine's 8,192)
    code_table_on_gpu: bool = False  # a DSpine code table placed on the device (setting code_table_device)
    # Rows of logits reserved per ubatch. llama-server asks for 1 + the draft length
    # (1 without a drafter); None is the whole ubatch, llama-cpp-python's default.
    n_outputs: int | None = None

    @property
    def outputs(self) -> int:
        return min(self.n_outputs or self.n_ubatch, self.n_ubatch)


@dataclass(frozen=True)
class Split:
    gpu: int = 0
    cpu: int = 0

    def __add__(self, other: Split) -> Split:
        return Split(self.gpu + other.gpu, self.cpu + other.cpu)


def gpu_block_start(shape: ModelShape, runtime: Runtime) -> int:
    """First block on the GPU: llama.cpp offloads the last `-ngl` of blocks + output."""
    ngl = shape.n_layer + 1 if runtime.gpu_layers is None else runtime.gpu_layers
    return max(shape.n_layer + 1 - ngl, 0)


def _on_gpu(shape: ModelShape, runtime: Runtime, block: int) -> bool:
    return block >= gpu_block_start(shape, runtime)


def weights(shape: ModelShape, runtime: Runtime) -> Split:
    start = gpu_block_start(shape, runtime)
    gpu = sum(shape.block_bytes[start:])
    cpu = sum(shape.block_bytes[:start]) + shape.token_embd_bytes + shape.other_bytes
    # The output layer counts as block n_layer; MTP blocks sit with it, and a code table moved
    # to the device (llama-server's -otd names the drafter's GPU)
    tail = shape.output_bytes + (shape.nextn_bytes if runtime.load_mtp else 0)
    if runtime.code_table_on_gpu:
        tail += shape.code_table_bytes
    else:
        cpu += shape.code_table_bytes
    if start <= shape.n_layer:
        gpu += tail
    else:
        cpu += tail
    return Split(gpu, cpu)


def kv_cells(shape: ModelShape, runtime: Runtime, block: int) -> int:
    n_ctx = padded(runtime.n_ctx)
    window = runtime.window or (shape.sliding_window if block in shape.swa_layers else None)
    if window:
        return min(n_ctx, padded(window * runtime.n_seq + runtime.n_ubatch))
    return n_ctx


def kv_bytes_per_cell(shape: ModelShape, runtime: Runtime, block: int) -> int:
    k_width, v_width = shape.kv_width(block)
    return row_bytes(runtime.type_k, k_width) + row_bytes(runtime.type_v, v_width)


def kv_cache(shape: ModelShape, runtime: Runtime) -> Split:
    split = Split()
    for block in shape.kv_layers:
        size = kv_cells(shape, runtime, block) * kv_bytes_per_cell(shape, runtime, block)
        split += Split(size, 0) if _on_gpu(shape, runtime, block) else Split(0, size)
    return split


def recurrent_state(shape: ModelShape, runtime: Runtime) -> Split:
    if not shape.recurrent_layers:
        return Split()
    rows = max(1, runtime.n_seq) * (1 + runtime.n_rs_seq)
    per_block = shape.rs_bytes_per_row // len(shape.recurrent_layers) * rows
    on_gpu = sum(1 for block in shape.recurrent_layers if _on_gpu(shape, runtime, block))
    return Split(per_block * on_gpu, per_block * (len(shape.recurrent_layers) - on_gpu))


def block_activations(shape: ModelShape, n_ubatch: int) -> int:
    """Peak activations inside one block for one ubatch (fitted to llama.cpp's
    reservations for dense and Gated-DeltaNet models)."""
    if shape.arch in GDN_HYBRIDS:
        return int(n_ubatch * (9.32 * shape.n_ff + 12 * shape.n_embd + 55_000))
    return n_ubatch * 4 * (3 * shape.n_ff + 4 * shape.n_embd)


def compute_estimate(shape: ModelShape, runtime: Runtime) -> int:
    n_ctx, n_ub, n_out = padded(runtime.n_ctx), runtime.n_ubatch, runtime.outputs
    # The logits of every output row, and the last hidden states still alive beside them.
    logits = shape.n_vocab * n_out * 4 + 3 * shape.n_embd * n_out * 4
    mask = n_ctx * n_ub * (2 if runtime.flash_attn else 4)
    kq = 0 if runtime.flash_attn else n_ctx * n_ub * max(shape.n_head) * 4
    if shape.drafter_kind == "dspine":
        # Measured on dspine's patched llama-server (drafters of 2-5 layers, hidden 576-2304): a
        # reserve runs every layer over the ubatch but the head and the refinement over one block
        # a sequence, so nothing grows with the vocabulary but the block's logits; the peak is the
        # feed-forward's with the injection's features beside it.
        activations = n_ub * 4 * (11 * shape.n_ff // 3 + shape.n_embd)
        return max(logits, activations + kq + mask)
    if shape.arch in GDN_HYBRIDS:
        # Measured on qwen35: the mask is still alive when the logits are made.
        return max(logits, block_activations(shape, n_ub) + kq) + mask
    # Dense models free the mask before the output: the larger of the two peaks.
    return max(logits, block_activations(shape, n_ub) + kq + mask)


@dataclass(frozen=True)
class ComputeCurve:
    """Compute buffer sizes llama.cpp reported at some contexts, for one ubatch,
    output count and flash-attention setting; read between points on straight
    lines, past them on the steeper of the last segment and the mask's growth."""

    points: tuple[tuple[int, int], ...]  # (n_ctx, bytes), sorted
    n_ubatch: int
    flash_attn: bool
    n_outputs: int

    def matches(self, runtime: Runtime) -> bool:
        return (self.n_ubatch, self.flash_attn, self.n_outputs) == (
            runtime.n_ubatch,
            runtime.flash_attn,
            runtime.outputs,
        )

    def at(self, n_ctx: int) -> int:
        xs = [x for x, _ in self.points]
        ys = [y for _, y in self.points]
        if len(xs) == 1 or n_ctx <= xs[0]:
            return ys[0]
        i = bisect.bisect_left(xs, n_ctx)
        if i < len(xs) and xs[i] == n_ctx:
            return ys[i]
        if i >= len(xs):
            slope = max((ys[-1] - ys[-2]) / (xs[-1] - xs[-2]), self.n_ubatch * (2 if self.flash_attn else 4))
            return int(ys[-1] + slope * (n_ctx - xs[-1]))
        x0, y0, x1, y1 = xs[i - 1], ys[i - 1], xs[i], ys[i]
        return int(y0 + (y1 - y0) * (n_ctx - x0) / (x1 - x0))


Curves = tuple[ComputeCurve, ...]


def compute_buffer(shape: ModelShape, runtime: Runtime, curves: Curves = ()) -> int:
    for curve in curves:
        if curve.matches(runtime):
            return curve.at(padded(runtime.n_ctx))
    return compute_estimate(shape, runtime)


def is_measured(runtime: Runtime, curves: Curves) -> bool:
    return any(curve.matches(runtime) for curve in curves)


@dataclass(frozen=True)
class Footprint:
    """One model's memory at one runtime, by component."""

    weights: Split
    kv: Split
    recurrent: Split
    compute: int  # on the GPU when any block is there, else in RAM

    def gpu_total(self, on_gpu: bool) -> int:
        return self.weights.gpu + self.kv.gpu + self.recurrent.gpu + (self.compute if on_gpu else 0)


def footprint(shape: ModelShape, runtime: Runtime, curves: Curves = ()) -> Footprint:
    return Footprint(
        weights=weights(shape, runtime),
        kv=kv_cache(shape, runtime),
        recurrent=recurrent_state(shape, runtime),
        compute=compute_buffer(shape, runtime, curves),
    )
