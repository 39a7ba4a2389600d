"""Tiny GGUF models that llama.cpp really loads, written in well under a second.

Dense llama (with or without GQA) and the qwen35 hybrid (Gated DeltaNet +
full attention), random weights, a byte-level BPE vocabulary with ChatML
control tokens. `header_only=True` writes the header and tensor table of a
model of any size (Qwen3.8-27B's shape) without the weights, which is all the
memory planner reads.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import gguf
import numpy as np

QTYPE = gguf.GGMLQuantizationType


@dataclass
class Shape:
    arch: str = "llama"
    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    n_head_kv: int = 4
    head_dim: int = 16
    n_ff: int = 128
    n_vocab: int = 300  # at least the 256 byte tokens + specials
    n_ctx_train: int = 4096
    weight_type: int = QTYPE.F16
    tied_output: bool = False
    # qwen35 only
    full_attention_interval: int = 2
    ssm_conv_kernel: int = 4
    ssm_state_size: int = 16
    ssm_group_count: int = 2
    ssm_time_step_rank: int = 4
    nextn_layers: int = 0
    sliding_window: int | None = None
    extra_kv: dict = field(default_factory=dict)
    # Tensors whose name contains a key get that type instead (K-quant mixes: Q4_K_M keeps
    # ffn_down and the output in Q6_K).
    type_overrides: dict = field(default_factory=dict)
    # qwen2 only: an output bias that keeps generation to printable ASCII (random
    # weights otherwise emit invalid UTF-8, which stalls streaming).
    printable_only: bool = False
    chat_template: str | None = None
    # Same count, same tokenizer model, other spellings of the padding tokens: a drafter
    # whose ids mean other texts than the target's.
    respelled: bool = False
    # Extra USER_DEFINED tokens after the specials: whole strings the tokenizer keeps as one
    # token and detokenizing prints (a script model's tool-call tags).
    user_tokens: tuple[str, ...] = ()
    # arch "dflash" only: which member of the DFlash family the file is (dflash, dflash2, dspark,
    # dspine), the target layers it taps, and tensors left out or added (a damaged or forked file).
    variant: str = "dflash2"
    target_layers: tuple[int, ...] = (2, 17, 32, 47, 62)
    drop_tensors: tuple[str, ...] = ()
    extra_tensors: tuple[str, ...] = ()

    @property
    def ssm_inner_size(self) -> int:
        return self.ssm_state_size * self.ssm_time_step_rank


def _bytes_to_unicode() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs), strict=True))


def vocabulary(n_vocab: int, user_tokens: tuple[str, ...] = ()) -> tuple[list[str], list[int], list[str]]:
    byte_chars = _bytes_to_unicode()
    tokens = [byte_chars[b] for b in range(256)]
    types = [gguf.TokenType.NORMAL] * 256
    merges = []
    for a, b in (("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a")):
        merges.append(f"{a} {b}")
        tokens.append(a + b)
        types.append(gguf.TokenType.NORMAL)
    specials = [
        ("<|endoftext|>", gguf.TokenType.CONTROL),
        ("<|im_start|>", gguf.TokenType.CONTROL),
        ("<|im_end|>", gguf.TokenType.CONTROL),
        ("<think>", gguf.TokenType.USER_DEFINED),
        ("</think>", gguf.TokenType.USER_DEFINED),
    ]
    specials += [(text, gguf.TokenType.USER_DEFINED) for text in user_tokens]
    for text, kind in specials:
        tokens.append(text)
        types.append(kind)
    while len(tokens) < n_vocab:
        tokens.append(f"[PAD{len(tokens)}]")
        types.append(gguf.TokenType.UNUSED)
    return tokens, [int(t) for t in types], merges


def tensor_table(shape: Shape) -> list[tuple[str, tuple[int, ...], int]]:
    """(name, ggml dims ne0..neN, ggml type) for every tensor of the model."""
    e, v, w = shape.n_embd, shape.n_vocab, shape.weight_type
    hd, nh, nkv = shape.head_dim, shape.n_head, shape.n_head_kv
    f32 = QTYPE.F32
    table = [("token_embd.weight", (e, v), w), ("output_norm.weight", (e,), f32)]
    if not shape.tied_output:
        table.append(("output.weight", (e, v), w))
    if shape.printable_only:
        table.append(("output.bias", (v,), f32))
    if shape.arch == "dflash":
        return _dflash_table(shape, table)
    total_layers = shape.n_layer + shape.nextn_layers
    for il in range(total_layers):
        p = f"blk.{il}."
        is_nextn = il >= shape.n_layer
        if shape.arch == "qwen35":
            table += [(p + "attn_norm.weight", (e,), f32), (p + "post_attention_norm.weight", (e,), f32)]
            recurrent = not is_nextn and (il + 1) % shape.full_attention_interval != 0
            if recurrent:
                key_dim = shape.ssm_state_size * shape.ssm_group_count
                value_dim = shape.ssm_inner_size
                conv_dim = key_dim * 2 + value_dim
                table += [
                    (p + "attn_qkv.weight", (e, conv_dim), w),
                    (p + "attn_gate.weight", (e, value_dim), w),
                    (p + "ssm_conv1d.weight", (shape.ssm_conv_kernel, conv_dim), f32),
                    (p + "ssm_dt.bias", (shape.ssm_time_step_rank,), f32),
                    (p + "ssm_a", (shape.ssm_time_step_rank,), f32),
                    (p + "ssm_beta.weight", (e, shape.ssm_time_step_rank), w),
                    (p + "ssm_alpha.weight", (e, shape.ssm_time_step_rank), w),
                    (p + "ssm_norm.weight", (shape.ssm_state_size,), f32),
                    (p + "ssm_out.weight", (value_dim, e), w),
                ]
            else:
                table += [
                    (p + "attn_q.weight", (e, hd * nh * 2), w),
                    (p + "attn_k.weight", (e, hd * nkv), w),
                    (p + "attn_v.weight", (e, hd * nkv), w),
                    (p + "attn_output.weight", (hd * nh, e), w),
                    (p + "attn_q_norm.weight", (hd,), f32),
                    (p + "attn_k_norm.weight", (hd,), f32),
                ]
            if is_nextn:
                table += [
                    (p + "nextn.eh_proj.weight", (2 * e, e), w),
                    (p + "nextn.enorm.weight", (e,), f32),
                    (p + "nextn.hnorm.weight", (e,), f32),
                    (p + "nextn.shared_head_norm.weight", (e,), f32),
                ]
        else:
            table += [
                (p + "attn_norm.weight", (e,), f32),
                (p + "attn_q.weight", (e, hd * nh), w),
                (p + "attn_k.weight", (e, hd * nkv), w),
                (p + "attn_v.weight", (e, hd * nkv), w),
                (p + "attn_output.weight", (hd * nh, e), w),
                (p + "ffn_norm.weight", (e,), f32),
            ]
            if shape.arch == "qwen3":
                table += [(p + "attn_q_norm.weight", (hd,), f32), (p + "attn_k_norm.weight", (hd,), f32)]
        table += [
            (p + "ffn_gate.weight", (e, shape.n_ff), w),
            (p + "ffn_down.weight", (shape.n_ff, e), w),
            (p + "ffn_up.weight", (e, shape.n_ff), w),
        ]
    if shape.type_overrides:
        table = [
            (
                name,
                ne,
                next((t for key, t in shape.type_overrides.items() if key in name), qtype) if len(ne) > 1 else qtype,
            )
            for name, ne, qtype in table
        ]
    return table


SELECTOR_RANK, CONV_KERNEL, CONV_GROUP, MARKOV_RANK, TRANSFER_RANK, MESSAGE_SIZE = 32, 4, 64, 32, 64, 32


def _dflash_table(
    shape: Shape, table: list[tuple[str, tuple[int, ...], int]]
) -> list[tuple[str, tuple[int, ...], int]]:
    """A DFlash-family drafter's tensors as upstream's dflash loader (and dspine's patch) read them."""
    e, v, w, f32 = shape.n_embd, shape.n_vocab, shape.weight_type, QTYPE.F32
    hd, nh, nkv = shape.head_dim, shape.n_head, shape.n_head_kv
    table += [("fc.weight", (e * len(shape.target_layers), e), w), ("enc.output_norm.weight", (e,), f32)]
    if shape.variant == "dflash2":
        table += [
            ("selector_predecessor.weight", (SELECTOR_RANK, v), w),
            ("selector_successor.weight", (SELECTOR_RANK, v), w),
            ("selector_hidden.weight", (e, SELECTOR_RANK), w),
        ]
    if shape.variant == "dspark":
        table += [("markov_w1.weight", (MARKOV_RANK, v), w), ("markov_w2.weight", (MARKOV_RANK, v), w)]
    if shape.variant == "dspine":  # SpecForge's DSpineDraftModel as app/hub/convert.py writes it
        r, s = TRANSFER_RANK, MESSAGE_SIZE
        table += [
            ("dspine_message.weight", (r, s), w),
            ("dspine_receiver_gate.weight", (r, s), w),
            ("dspine_predecessor_gate.weight", (r, s), w),
            ("dspine_gate.bias", (s,), f32),
            ("dspine_codes.weight", (r, v), w),
        ]
    projected = 2 * CONV_KERNEL * (e // CONV_GROUP)
    for il in range(shape.n_layer):
        p = f"blk.{il}."
        table += [
            (p + "attn_norm.weight", (e,), f32),
            (p + "attn_q.weight", (e, hd * nh), w),
            (p + "attn_k.weight", (e, hd * nkv), w),
            (p + "attn_v.weight", (e, hd * nkv), w),
            (p + "attn_output.weight", (hd * nh, e), w),
            (p + "attn_q_norm.weight", (hd,), f32),
            (p + "attn_k_norm.weight", (hd,), f32),
            (p + "ffn_norm.weight", (e,), f32),
            (p + "ffn_gate.weight", (e, shape.n_ff), w),
            (p + "ffn_down.weight", (shape.n_ff, e), w),
            (p + "ffn_up.weight", (e, shape.n_ff), w),
        ]
        if shape.variant == "dflash2":
            table += [
                (p + "attn_conv_base", (e, CONV_KERNEL, 2), f32),
                (p + "attn_conv_proj.weight", (e, projected), w),
                (p + "ffn_conv_base", (e, CONV_KERNEL, 2), f32),
                (p + "ffn_conv_proj.weight", (e, projected), w),
            ]
        if shape.variant == "dspine":
            table += [
                (p + "dspine_readout.weight", (e, TRANSFER_RANK), w),
                (p + "dspine_write.weight", (MESSAGE_SIZE, e), w),
            ]
    table += [(name, (e,), f32) for name in shape.extra_tensors]
    return [row for row in table if row[0] not in shape.drop_tensors]


def _dflash_metadata(writer: gguf.GGUFWriter, shape: Shape) -> None:
    writer.add_array("dflash.target_layers", [i + 1 for i in shape.target_layers])
    writer.add_uint32("dflash.block_size", 16)
    if shape.variant == "dflash2":
        writer.add_uint32("dflash.selector_rank", SELECTOR_RANK)
        writer.add_uint32("dflash.selector_top_k", 4)
    if shape.variant == "dflash2":
        writer.add_uint32("dflash.conv_kernel_size", CONV_KERNEL)
        writer.add_uint32("dflash.conv_group_size", CONV_GROUP)
    if shape.variant == "dspark":
        writer.add_bool("dflash.sample_from_anchor", True)
    if shape.variant == "dspine":
        writer.add_bool("dflash.attention.causal", True)
        writer.add_uint32("dflash.dspine.top_k", 16)


def metadata(writer: gguf.GGUFWriter, shape: Shape) -> None:
    a = shape.arch
    writer.add_name(f"tiny-{a}")
    writer.add_context_length(shape.n_ctx_train)
    writer.add_embedding_length(shape.n_embd)
    writer.add_block_count(shape.n_layer + shape.nextn_layers)
    writer.add_feed_forward_length(shape.n_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head_kv)
    writer.add_key_length(shape.head_dim)
    writer.add_value_length(shape.head_dim)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_dimension_count(shape.head_dim)
    writer.add_file_type(
        gguf.LlamaFileType.MOSTLY_F16 if shape.weight_type == QTYPE.F16 else gguf.LlamaFileType.MOSTLY_Q8_0
    )
    if a == "qwen35":
        writer.add_ssm_conv_kernel(shape.ssm_conv_kernel)
        writer.add_ssm_state_size(shape.ssm_state_size)
        writer.add_ssm_group_count(shape.ssm_group_count)
        writer.add_ssm_time_step_rank(shape.ssm_time_step_rank)
        writer.add_ssm_inner_size(shape.ssm_inner_size)
        writer.add_full_attention_interval(shape.full_attention_interval)
        writer.add_rope_dimension_sections([shape.head_dim // 4, shape.head_dim // 8, shape.head_dim // 8, 0])
        if shape.nextn_layers:
            writer.add_nextn_predict_layers(shape.nextn_layers)
    if shape.sliding_window:
        writer.add_sliding_window(shape.sliding_window)
    if a == "dflash":
        _dflash_metadata(writer, shape)
    for key, value in shape.extra_kv.items():
        if isinstance(value, int):
            writer.add_uint32(key, value)
        else:
            writer.add_string(key, str(value))
    tokens, types, merges = vocabulary(shape.n_vocab, shape.user_tokens)
    if shape.respelled:
        tokens = [t.replace("[PAD", "[pad") for t in tokens]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_bos_token_id(tokens.index("<|endoftext|>"))
    writer.add_add_bos_token(False)
    if shape.chat_template:
        writer.add_chat_template(shape.chat_template)


def _cast(values: np.ndarray, qtype: int) -> np.ndarray:
    if qtype == QTYPE.F32:
        return values
    if qtype == QTYPE.F16:
        return values.astype(np.float16)
    return gguf.quants.quantize(values, qtype)


def printable_bias(n_vocab: int) -> np.ndarray:
    """0 for tokens that print as plain ASCII (and newline), -30 for every other."""
    tokens, _, _ = vocabulary(n_vocab)
    bias = np.full(n_vocab, -30.0, dtype=np.float32)
    for token_id in range(256):
        if token_id == 10 or 32 <= token_id < 127:
            bias[token_id] = 0.0
    for token_id in range(256, 261):  # the merged tokens ("Ġt", "he", ...)
        bias[token_id] = 0.0
    return bias


def write_model(
    path: Path,
    shape: Shape,
    seed: int = 0,
    noise: float = 0.0,
    noise_seed: int = 1,
    silent_from: int | None = None,
    scale: float = 0.02,
) -> Path:
    """Random weights from `seed`, of standard deviation `scale` (0.02 gives nearly flat
    logits; larger makes the next token depend strongly on the state, which is what
    rollback tests need); `noise` > 0 adds Gaussian noise of that relative size (a
    drafter that agrees with the target only part of the time).
    `silent_from`: blocks from this one on write nothing back to the residual stream
    (zero output projections): they cost full compute but change nothing, so a model
    of only the first blocks, written with the same seed, predicts what this one does."""
    rng = np.random.default_rng(seed)
    noise_rng = np.random.default_rng(noise_seed)
    writer = gguf.GGUFWriter(str(path), shape.arch)
    metadata(writer, shape)
    for name, ne, qtype in tensor_table(shape):
        qtype = qtype if len(ne) > 1 else QTYPE.F32
        if name == "output.bias":
            writer.add_tensor(name, printable_bias(shape.n_vocab), raw_dtype=QTYPE.F32)
            continue
        values = (rng.standard_normal(tuple(reversed(ne))) * scale).astype(np.float32)
        block = int(name.split(".")[1]) if name.startswith("blk.") else -1
        if (
            silent_from is not None
            and block >= silent_from
            and name.endswith(("attn_output.weight", "ffn_down.weight"))
        ):
            values = np.zeros_like(values)
        if noise:
            values = values + (noise_rng.standard_normal(values.shape) * scale * noise).astype(np.float32)
        writer.add_tensor(name, _cast(values, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_header_only(path: Path, shape: Shape) -> Path:
    """Header and tensor table of a model of any size, no weights (a few MB at most)."""
    writer = gguf.GGUFWriter(str(path), shape.arch)
    metadata(writer, shape)
    for name, ne, qtype in tensor_table(shape):
        qtype = qtype if len(ne) > 1 else QTYPE.F32
        block, type_size = gguf.GGML_QUANT_SIZES[qtype]
        nbytes = int(np.prod(ne)) // block * type_size
        if qtype in (QTYPE.F32, QTYPE.F16):
            dtype = np.dtype(np.float32 if qtype == QTYPE.F32 else np.float16)
            writer.add_tensor_info(name, tuple(reversed(ne)), dtype, nbytes, raw_dtype=qtype)
        else:
            byte_shape = tuple(reversed(ne[1:])) + (ne[0] // block * type_size,)
            writer.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    return path


K_QUANT_MIXES = {
    "Q4_K_M": (QTYPE.Q4_K, {"ffn_down": QTYPE.Q6_K, "output.weight": QTYPE.Q6_K}),
    "Q5_K_M": (QTYPE.Q5_K, {"ffn_down": QTYPE.Q6_K, "output.weight": QTYPE.Q6_K}),
    "Q6_K": (QTYPE.Q6_K, {}),
    "Q8_0": (QTYPE.Q8_0, {}),
}


def qwen38_27b_quant(quant: str) -> Shape:
    weight_type, overrides = K_QUANT_MIXES[quant]
    shape = qwen38_27b(weight_type)
    shape.type_overrides = overrides
    return shape


def qwen38_27b(weight_type: int = QTYPE.Q4_K, nextn: int = 1) -> Shape:
    """Qwen3.8-27B's shape from FACTS: 64 blocks, every 4th full attention."""
    return Shape(
        arch="qwen35",
        n_layer=64,
        n_embd=5120,
        n_head=24,
        n_head_kv=4,
        head_dim=256,
        n_ff=17408,
        n_vocab=248320,
        n_ctx_train=262144,
        weight_type=weight_type,
        full_attention_interval=4,
        ssm_conv_kernel=4,
        ssm_state_size=128,
        ssm_group_count=16,
        ssm_time_step_rank=48,
        nextn_layers=nextn,
    )


def qwen38_27b_drafter(weight_type: int = QTYPE.BF16, variant: str = "dspine") -> Shape:
    """Qwen3.8-27B's DSpine (b16) or DFlash2 drafter, in upstream's `dflash` layout (the DSpine
    tensors as app/hub/convert.py writes them): 5 dense blocks over the target's vocabulary,
    tied output; about 2.1B parameters, 4.3 GB in BF16, 1.2 GB in Q4_K."""
    return Shape(
        arch="dflash",
        variant=variant,
        n_layer=5,
        n_embd=5120,
        n_head=32,
        n_head_kv=8,
        head_dim=128,
        n_ff=6144,
        n_vocab=248320,
        n_ctx_train=262144,
        tied_output=True,
        weight_type=weight_type,
    )


def qwen3_8b(weight_type: int = QTYPE.Q4_K) -> Shape:
    """Qwen3-8B: 36 dense blocks, 32 query heads, 8 KV heads, head_dim 128."""
    return Shape(
        arch="qwen3",
        n_layer=36,
        n_embd=4096,
        n_head=32,
        n_head_kv=8,
        head_dim=128,
        n_ff=12288,
        n_vocab=151936,
        n_ctx_train=40960,
        weight_type=weight_type,
    )


def corrupt_header(path: Path, what: str) -> Path:
    data = bytearray(path.read_bytes())
    if what == "magic":
        data[:4] = b"GGML"
    elif what == "tensor_count":
        data[8:16] = struct.pack("<Q", 1 << 62)
    elif what == "truncate":  # inside the header
        data = data[:2000]
    elif what == "truncate_data":  # header whole, weights cut short
        data = data[: len(data) // 2]
    path.write_bytes(bytes(data))
    return path


CHAT_TEMPLATE = (
    "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and not enable_thinking %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}"
    "{% endif %}"
)


def chat_model(n_layer: int = 2, n_embd: int = 128, n_vocab: int = 320) -> Shape:
    """A qwen2 model that speaks printable ASCII and has a Qwen-style thinking switch."""
    return Shape(
        arch="qwen2",
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=4,
        n_head_kv=2,
        head_dim=n_embd // 4,
        n_ff=2 * n_embd,
        n_vocab=n_vocab,
        printable_only=True,
        chat_template=CHAT_TEMPLATE,
    )
