"""A model's shape for memory planning, from its GGUF header. Pure.

What a memory estimate needs: bytes of weights per block and outside blocks,
which blocks keep a KV cache (all of a dense model; the full-attention ones of
a qwen35 hybrid; a window's worth in sliding-window blocks), the recurrent
state of Gated-DeltaNet blocks, and the heads and head sizes behind each.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from backends.drafter_files import has_mtp_head, kind_of_header
from backends.gguf_header import ArrayInfo, GgufError, GgufHeader

# Hybrids whose non-attention blocks are Gated DeltaNet (a fixed recurrent state).
GDN_HYBRIDS = ("qwen35", "qwen35moe", "qwen3next", "qwen4exp")
_BLOCK = re.compile(r"^blk\.(\d+)\.")


@dataclass(frozen=True)
class ModelShape:
    source: str
    arch: str
    name: str
    weight_type: str  # the most common matrix type: Q4_K, Q8_0, BF16 ...
    n_layer: int  # trunk blocks, without MTP (nextn) blocks
    n_layer_nextn: int
    n_embd: int
    n_ff: int
    n_vocab: int
    n_ctx_train: int
    n_head: tuple[int, ...]  # per trunk block
    n_head_kv: tuple[int, ...]
    key_length: int
    value_length: int
    kv_layers: tuple[int, ...]  # blocks with a KV cache
    swa_layers: tuple[int, ...]  # of those, the ones with a sliding window
    sliding_window: int | None
    recurrent_layers: tuple[int, ...]
    rs_bytes_per_row: int  # recurrent state of all recurrent blocks, one sequence row, f32
    block_bytes: tuple[int, ...]  # weights per trunk block
    nextn_bytes: int  # weights of MTP blocks (loaded only for MTP drafting)
    token_embd_bytes: int
    output_bytes: int  # output.weight + output_norm (the tied embedding when no output.weight)
    tied_output: bool
    other_bytes: int  # tensors in no block and not embd/output (rope factors, ...)
    # What the file is as a drafter, read from its tensors and keys (backends/drafter_files.py):
    # dspine, dflash, dspark for the DFlash family, mtp for a file whose last block is an MTP head.
    drafter_kind: str = "draft"
    mtp_head: bool = False  # its last block holds nextn.eh_proj: upstream drafts with it (draft-mtp)
    # DSpine's code table (read by token id): in host memory unless the code_table_device setting
    # puts it on the GPU (memory.weights)
    code_table_bytes: int = 0

    @property
    def total_weight_bytes(self) -> int:
        """Bytes of weights in the file (a tied output is counted once)."""
        output_in_file = self.output_bytes - (self.token_embd_bytes if self.tied_output else 0)
        blocks = sum(self.block_bytes) + self.nextn_bytes
        return blocks + self.token_embd_bytes + output_in_file + self.other_bytes + self.code_table_bytes

    @property
    def has_mtp(self) -> bool:
        """An MTP head llama-server drafts with; its weights and KV are what fit counts for it."""
        return self.mtp_head and self.nextn_bytes > 0

    def kv_width(self, layer: int) -> tuple[int, int]:
        """Values per token for K and V in one block (heads x head size)."""
        return self.n_head_kv[layer] * self.key_length, self.n_head_kv[layer] * self.value_length


def drafter_kind(shape: ModelShape) -> str:
    """A drafter file's kind from what it holds (dspine, dflash, dspark, mtp), else a plain draft model."""
    return shape.drafter_kind


def _per_layer(value, n_layer: int, what: str, source: str) -> tuple[int, ...]:
    if isinstance(value, ArrayInfo):
        raise GgufError(f"{source}: {what} has {value.length} entries", "the file is damaged")
    if isinstance(value, list):
        if len(value) < n_layer:
            raise GgufError(f"{source}: {what} has {len(value)} entries for {n_layer} blocks", "the file is damaged")
        return tuple(int(v) for v in value[:n_layer])
    return (int(value),) * n_layer


def _require(header: GgufHeader, suffix: str):
    value = header.arch_key(suffix)
    if value is None:
        raise GgufError(
            f"{header.source} lacks {header.architecture}.{suffix}",
            "this is not a complete language-model GGUF",
        )
    return value


@dataclass(frozen=True)
class _Weights:
    """Bytes of weights by where llama.cpp places them, and the file's most common matrix type."""

    weight_type: str
    block_bytes: tuple[int, ...]
    nextn_bytes: int
    token_embd_bytes: int
    output_bytes: int
    tied_output: bool
    other_bytes: int
    code_table_bytes: int


def shape_from_header(header: GgufHeader) -> ModelShape:
    arch = header.architecture
    if not arch:
        raise GgufError(f"{header.source} has no general.architecture", "this is not a language-model GGUF")
    n_layer, n_nextn = _block_counts(header)
    n_embd = int(_require(header, "embedding_length"))
    n_head = _per_layer(_require(header, "attention.head_count"), n_layer, "head_count", header.source)
    n_head_kv = _per_layer(
        header.arch_key("attention.head_count_kv", n_head[0]), n_layer, "head_count_kv", header.source
    )
    first_heads = next((h for h in n_head if h), 1)
    key_length = int(header.arch_key("attention.key_length", n_embd // first_heads))
    value_length = int(header.arch_key("attention.value_length", key_length))
    n_ff_raw = header.arch_key("feed_forward_length", 0)
    n_ff = max(n_ff_raw) if isinstance(n_ff_raw, list) else int(n_ff_raw or 0)

    tokens = header.get("tokenizer.ggml.tokens")
    n_vocab = int(header.arch_key("vocab_size", 0) or (len(tokens) if tokens is not None else 0))

    recurrent, rs_per_row = _recurrent(header, arch, n_layer)
    kv_layers = tuple(i for i in range(n_layer) if i not in set(recurrent) and n_head_kv[i] > 0)
    window = header.arch_key("attention.sliding_window")
    swa = _sliding_layers(header, kv_layers) if window else ()
    kind = kind_of_header(header)
    weights = _weights(header, n_layer, block_drafter=kind in ("dflash", "dspark", "dspine"))
    return ModelShape(
        source=header.source,
        arch=arch,
        name=str(header.get("general.name", "")),
        weight_type=weights.weight_type,
        n_layer=n_layer,
        n_layer_nextn=n_nextn,
        n_embd=n_embd,
        n_ff=n_ff,
        n_vocab=n_vocab,
        n_ctx_train=int(header.arch_key("context_length", 0) or 0),
        n_head=n_head,
        n_head_kv=n_head_kv,
        key_length=key_length,
        value_length=value_length,
        kv_layers=kv_layers,
        swa_layers=swa,
        sliding_window=int(window) if window else None,
        recurrent_layers=recurrent,
        rs_bytes_per_row=rs_per_row,
        block_bytes=weights.block_bytes,
        nextn_bytes=weights.nextn_bytes,
        token_embd_bytes=weights.token_embd_bytes,
        output_bytes=weights.output_bytes,
        tied_output=weights.tied_output,
        other_bytes=weights.other_bytes,
        code_table_bytes=weights.code_table_bytes,
        drafter_kind=kind,
        mtp_head=has_mtp_head(header),
    )


def _block_counts(header: GgufHeader) -> tuple[int, int]:
    """Trunk blocks and MTP (nextn) blocks, refused when the trunk count is no model's."""
    n_blocks = int(_require(header, "block_count"))
    n_nextn = int(header.arch_key("nextn_predict_layers", 0) or 0)
    n_layer = n_blocks - n_nextn
    if not 0 < n_layer <= 100_000:
        raise GgufError(f"{header.source} claims {n_layer} blocks", "the file is damaged")
    return n_layer, n_nextn


def _recurrent(header: GgufHeader, arch: str, n_layer: int) -> tuple[tuple[int, ...], int]:
    """The Gated-DeltaNet blocks of a hybrid, and their recurrent state in bytes for one
    sequence row (f32); none in any other model."""
    if arch not in GDN_HYBRIDS:
        return (), 0
    pattern = header.arch_key("attention.recurrent_layers")
    if isinstance(pattern, list):
        recurrent = tuple(i for i in range(n_layer) if pattern[i])
    else:
        interval = int(header.arch_key("full_attention_interval", 4) or 4)
        recurrent = tuple(i for i in range(n_layer) if (i + 1) % interval != 0)
    conv_kernel = int(_require(header, "ssm.conv_kernel"))
    state = int(_require(header, "ssm.state_size"))
    groups = int(_require(header, "ssm.group_count"))
    inner = int(_require(header, "ssm.inner_size"))
    return recurrent, recurrent_state_bytes(conv_kernel, state, groups, inner) * len(recurrent)


def recurrent_state_bytes(conv_kernel: int, state: int, groups: int, inner: int) -> int:
    """One Gated-DeltaNet block's state for one sequence row, in f32: its convolution's last
    kernel-1 inputs and its delta-rule state."""
    conv = 4 * (conv_kernel - 1) * (inner + 2 * groups * state)
    return conv + 4 * state * inner


def _sliding_layers(header: GgufHeader, kv_layers: tuple[int, ...]) -> tuple[int, ...]:
    """Of the KV-cache blocks, those with a sliding window (the file has a window): as its
    pattern lists them, every `pattern`-th block full, or all of them when no pattern says."""
    pattern = header.arch_key("attention.sliding_window_pattern")
    if isinstance(pattern, list):
        return tuple(i for i in kv_layers if i < len(pattern) and pattern[i])
    if isinstance(pattern, int) and pattern > 0:
        return tuple(i for i in kv_layers if i % pattern < pattern - 1)
    return kv_layers


def _weights(header: GgufHeader, n_layer: int, block_drafter: bool) -> _Weights:
    """The file's tensors summed by where they go: trunk blocks, MTP blocks, the embedding,
    the output, a block drafter's code table, and the rest."""
    block_bytes = [0] * n_layer
    nextn_bytes = token_embd = output = other = code_table = 0
    has_output = False
    matrix_types: Counter[str] = Counter()
    for tensor in header.tensors:
        size = tensor.n_bytes
        if len(tensor.dims) >= 2:
            matrix_types[tensor.type_name] += size
        m = _BLOCK.match(tensor.name)
        if m:
            index = int(m.group(1))
            if index < n_layer:
                block_bytes[index] += size
            else:
                nextn_bytes += size
        elif tensor.name.startswith("token_embd."):
            token_embd += size
        elif tensor.name.startswith("output.") or tensor.name.startswith("output_norm."):
            output += size
            has_output = has_output or tensor.name.startswith("output.")
        elif block_drafter and tensor.name.startswith("dspine_codes."):
            code_table += size  # read by token id: llama.cpp's input layer, host memory by default
        elif block_drafter:
            # fc, its norm, DSpine's shared message and gates: llama.cpp's output-layer tensors,
            # on the GPU with the head
            output += size
        else:
            other += size
    tied = not has_output
    if tied:
        output += token_embd  # llama.cpp duplicates the embedding as the output matrix
    return _Weights(
        weight_type=matrix_types.most_common(1)[0][0] if matrix_types else "?",
        block_bytes=tuple(block_bytes),
        nextn_bytes=nextn_bytes,
        token_embd_bytes=token_embd,
        output_bytes=output,
        tied_output=tied,
        other_bytes=other,
        code_table_bytes=code_table,
    )
