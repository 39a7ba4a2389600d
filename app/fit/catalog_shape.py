"""A model's shape from the catalog's figures and a file size, for a plan before
anything is pulled (offline too). Pure.

Heads, KV blocks and recurrent state follow from the figures exactly as from a
header (the same GGUF keys). The weights are the file's size: the embedding and
the output matrix at the quant's own bits per weight, the rest shared evenly by
the blocks (the MTP block among them). A whole-GPU plan counts the same bytes
either way; a split across GPU and RAM is off by how unevenly blocks really weigh.
"""

from __future__ import annotations

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from ..models.figures import Figures
from .shape import GDN_HYBRIDS, ModelShape, recurrent_state_bytes

# The matrix type a quant's name stands for (K-quant mixes keep some tensors finer).
_QUANT_TYPE = {"Q4_K_M": "Q4_K", "Q4_K_S": "Q4_K", "Q5_K_M": "Q5_K", "Q5_K_S": "Q5_K", "Q6_K": "Q6_K", "Q8_0": "Q8_0"}


def weight_type(label: str) -> str:
    upper = label.upper()
    for name, kind in _QUANT_TYPE.items():
        if name in upper:
            return kind
    return "BF16" if "BF16" in upper else "F16" if "F16" in upper else "Q4_K" if "Q4" in upper else "Q8_0"


def _bytes_per_weight(type_name: str) -> float:
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name]]
    return size / block


def shape_from_figures(figures: Figures, size: int, label: str, source: str) -> ModelShape:
    """`label`: the quant or variant name (Q4_K_M, dspine-bf16) that says the weights' type."""
    arch = figures.architecture
    n_nextn = figures.get("nextn_predict_layers")
    n_layer = figures.get("block_count") - n_nextn
    n_embd = figures.get("embedding_length")
    n_head = figures.get("attention.head_count")
    n_head_kv = figures.get("attention.head_count_kv", n_head)
    key_length = figures.get("attention.key_length", n_embd // max(n_head, 1))
    value_length = figures.get("attention.value_length", key_length)
    n_vocab = figures.get("vocab_size")

    recurrent, rs_per_row = _recurrent(figures, n_layer)
    kv_layers = tuple(i for i in range(n_layer) if i not in set(recurrent))

    matrix_type = weight_type(label)
    # Block drafters (upstream's `dflash` architecture; a fork's GGUF may say `dspine`) share the
    # target's embedding as their output; a plain draft model carries its own.
    tied = arch in ("dflash", "dspine")
    embd = int(n_vocab * n_embd * _bytes_per_weight(matrix_type))
    output_in_file = 0 if tied else embd
    per_block = max(size - embd - output_in_file, 0) // (n_layer + n_nextn)
    return ModelShape(
        source=source,
        arch=arch,
        name=label,
        weight_type=matrix_type,
        n_layer=n_layer,
        n_layer_nextn=n_nextn,
        n_embd=n_embd,
        n_ff=figures.get("feed_forward_length"),
        n_vocab=n_vocab,
        n_ctx_train=figures.get("context_length"),
        n_head=(n_head,) * n_layer,
        n_head_kv=tuple(0 if i in recurrent else n_head_kv for i in range(n_layer)),
        key_length=key_length,
        value_length=value_length,
        kv_layers=kv_layers,
        swa_layers=(),
        sliding_window=None,
        recurrent_layers=recurrent,
        rs_bytes_per_row=rs_per_row,
        block_bytes=(per_block,) * n_layer,
        nextn_bytes=per_block * n_nextn,
        token_embd_bytes=embd,
        output_bytes=embd,  # tied: llama.cpp uses the embedding as the output matrix too
        tied_output=tied,
        other_bytes=0,
        # The catalog lists nextn layers only for files that carry the head (the pull checks it).
        mtp_head=n_nextn > 0,
    )


def _recurrent(figures: Figures, n_layer: int) -> tuple[tuple[int, ...], int]:
    """The Gated-DeltaNet blocks of a hybrid, and their recurrent state in bytes for one
    sequence row (f32), as shape.py reads them from a header; none in any other model."""
    if figures.architecture not in GDN_HYBRIDS:
        return (), 0
    interval = figures.get("full_attention_interval", 4)
    recurrent = tuple(i for i in range(n_layer) if (i + 1) % interval != 0)
    per_block = recurrent_state_bytes(
        figures.get("ssm.conv_kernel"), figures.get("ssm.state_size"), figures.get("ssm.group_count"),
        figures.get("ssm.inner_size"),
    )  # fmt: skip
    return recurrent, per_block * len(recurrent)
