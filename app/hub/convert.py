"""Block drafters (DFlash, DFlash2, DSpark, DSpine) from safetensors to GGUF: the pure part.

    config.json -> DrafterSpec (family, GGUF keys)         read_config
    tensor names and shapes -> what to write, under which name   plan_tensors
    the target GGUF's facts -> refusals                   check_target

It follows llama.cpp's own converter (`conversion/qwen.py`: DFlashModel, DSparkModel;
`gguf-py/gguf/tensor_mapping.py` and `constants.py` for the names) so that the file
is the one upstream would write, without torch: the same `dflash` architecture and
keys, `target_layer_ids + 1`, the same tensor names, the same rules for which tensors
stay F32. DSpine is read as its authors define it (SpecForge's `DSpineDraftModel`: a DFlash
backbone plus `injection.*` and `transfer_codes`; the GGUF names are the `dspine_*` table
below, docs/dspine-variant.md). Every name table is data here: a checkpoint that spells a
tensor otherwise is a line to add, not code.

Nothing is guessed: a config field, a tensor or a family this module does not know is
refused with the list of what it does not know, before a byte is written.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConversionError

ARCH = "dflash"  # upstream's one architecture for the whole family

# config.json `architectures` -> family. DFlash2 is told from DFlash by its conv keys too.
FAMILIES = {
    "DFlashDraftModel": "dflash",
    "DFlash2DraftModel": "dflash2",
    "Qwen3DSparkModel": "dspark",
    "DSparkDraftModel": "dspark",
    "DSparkSpeculator": "dspark",
    "DSpineDraftModel": "dspine",  # SpecForge's specforge/modeling/draft/dspine.py
}

# The drafter kind (backends/drafters.py) each family runs as.
KIND_OF_FAMILY = {"dflash": "dflash", "dflash2": "dflash", "dspark": "dspark", "dspine": "dspine"}

# Top-level config fields that change nothing in the GGUF (training and bookkeeping).
IGNORED_FIELDS = frozenset(
    {
        "architectures",
        "model_type",
        "torch_dtype",
        "dtype",
        "transformers_version",
        "attention_bias",
        "attention_dropout",
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
        "initializer_range",
        "use_cache",
        "auto_map",
        "_name_or_path",
        "name_or_path",
        "tie_word_embeddings",
        "max_window_layers",
        "num_target_layers",
        "rope_scaling",
        "hidden_act",
    }
)
# Top-level fields read below.
READ_FIELDS = frozenset(
    {
        "hidden_size",
        "num_hidden_layers",
        "intermediate_size",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "max_position_embeddings",
        "rms_norm_eps",
        "rope_theta",
        "rope_parameters",
        "vocab_size",
        "draft_vocab_size",
        "block_size",
        "target_layer_ids",
        "mask_token_id",
        "use_sliding_window",
        "sliding_window",
        "layer_types",
        "is_causal",
        "dflash_config",
        "dspine_config",
        "markov_head_type",
        "sample_from_anchor",
        "output_multiplier",
        "final_logit_softcapping",
        "input_embedding_scale",
        "rope_is_neox_style",
        "partial_rotary_factor",
    }
)
DFLASH_CONFIG_FIELDS = frozenset(
    {
        "target_layer_ids",
        "mask_token_id",
        "block_size",
        "use_swa",
        "swa_window_size",
        "causal",
        "conv_kernel_size",
        "conv_group_size",
        "selector_rank",
        "selector_top_k",
        "attention_value_scale",
        "output_multiplier",
        "final_logit_softcapping",
        "input_embedding_scale",
    }
)
# SpecForge's DSpineConfig: the fields the drafter computes with (checked against the tensors;
# top_k becomes `dflash.dspine.top_k`) and those only its training reads (accepted, ignored).
DSPINE_CONFIG_FIELDS = frozenset({"transfer_rank", "message_size", "top_k"})
DSPINE_TRAINING_FIELDS = frozenset(
    {
        "alignment_warmup_steps",
        "alignment_weight",
        "candidate_mass_threshold",
        "ce_weight",
        "replacement_end_ratio",
        "replacement_hold_ratio",
        "replacement_layers",
        "replacement_probability",
    }
)
DSPINE_TOP_K_DEFAULT = 16

# Per-layer tensors: HF name after `layers.N.` -> GGUF name after `blk.N.`.
BLOCK_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "self_attn.sinks": "attn_sinks.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    # DFlash2's causal dynamic convolutions
    "attention_conv.base_kernel": "attn_conv_base",
    "attention_conv.kernel_projection.weight": "attn_conv_proj.weight",
    "mlp_conv.base_kernel": "ffn_conv_base",
    "mlp_conv.kernel_projection.weight": "ffn_conv_proj.weight",
}
# DSpine's per-layer tensors (SpecForge: `injection.readouts.N.weight`, `injection.writes.N.weight`,
# one of each on every layer) -> GGUF name after `blk.N.`.
INJECTION_LISTS = {
    "readouts": "dspine_readout",
    "writes": "dspine_write",
}
# Whole-model tensors.
ROOT_NAMES = {
    "embed_tokens.weight": "token_embd.weight",
    "norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
    "fc.weight": "fc.weight",
    "hidden_norm.weight": "enc.output_norm.weight",
    "markov_head.markov_w1.weight": "markov_w1.weight",
    "markov_head.markov_w2.weight": "markov_w2.weight",
    "confidence_head.proj.weight": "conf_proj.weight",
    "confidence_head.proj.bias": "conf_proj.bias",
    "candidate_selector.predecessor_codebook": "selector_predecessor.weight",
    "candidate_selector.successor_codebook": "selector_successor.weight",
    "candidate_selector.hidden_projection.weight": "selector_hidden.weight",
    "d2t": "d2t",
    # DSpine's shared injection tensors and its fixed code table (SpecForge's names)
    "injection.message.weight": "dspine_message.weight",
    "injection.receiver_gate.weight": "dspine_receiver_gate.weight",
    "injection.predecessor_gate.weight": "dspine_predecessor_gate.weight",
    "injection.bias": "dspine_gate.bias",
    "transfer_codes": "dspine_codes.weight",
}
# DSpine's code table as the independent layout gives it: a safetensors file of its own whose
# one tensor is `codes` (convert_run.py finds it beside config.json).
CODES_FILE_TENSOR = "codes"
# Tensors upstream drops: not used when drafting (DSpine's `transfer_ready` is a bool buffer
# that only says the code table was filled).
DROPPED = ("t2d", "rotary_emb.inv_freq", "transfer_ready")

# What each layer must carry (GGUF names after `blk.N.`), and the whole model.
REQUIRED_BLOCK = (
    "attn_norm.weight",
    "attn_q.weight",
    "attn_k.weight",
    "attn_output.weight",
    "attn_q_norm.weight",
    "attn_k_norm.weight",
    "ffn_norm.weight",
    "ffn_gate.weight",
    "ffn_up.weight",
    "ffn_down.weight",
)
REQUIRED_ROOT = ("fc.weight", "enc.output_norm.weight", "output_norm.weight")
REQUIRED_BY_FAMILY: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "dflash": ((), ()),
    "dflash2": (
        ("selector_predecessor.weight", "selector_successor.weight", "selector_hidden.weight"),
        ("attn_conv_base", "attn_conv_proj.weight", "ffn_conv_base", "ffn_conv_proj.weight"),
    ),
    "dspark": (("markov_w1.weight", "markov_w2.weight"), ()),
    "dspine": (
        (
            "dspine_message.weight",
            "dspine_receiver_gate.weight",
            "dspine_predecessor_gate.weight",
            "dspine_gate.bias",
            "dspine_codes.weight",
        ),
        ("dspine_readout.weight", "dspine_write.weight"),
    ),
}

# Rope tensors a checkpoint with interleaved rope must have permuted to NeoX order.
_ROPE_PERMUTED = ("attn_q.weight", "attn_k.weight", "attn_q_norm.weight", "attn_k_norm.weight")

_LAYER = re.compile(r"^layers\.(\d+)\.(.+)$")
_INJECTION = re.compile(r"^injection\.(\w+)\.(\d+)\.(weight|bias)$")


@dataclass(frozen=True)
class Key:
    """One GGUF metadata entry: `kind` is u32, f32, bool, str or arr (an array of ints or bools)."""

    name: str
    kind: str
    value: Any


@dataclass
class DrafterSpec:
    family: str  # dflash, dflash2, dspark, dspine
    n_layer: int
    hidden: int
    head_dim: int
    vocab: int  # the config's vocab_size: must be the target's
    draft_vocab: int  # rows of the drafter's own output head (a reduced vocabulary with d2t)
    target_layer_ids: list[int]  # HF ids (the GGUF gets them + 1)
    mask_token_id: int | None
    neox_rope: bool
    keys: list[Key] = field(default_factory=list)
    dspine: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return KIND_OF_FAMILY[self.family]


@dataclass(frozen=True)
class TensorPlan:
    source: str  # the checkpoint's name
    name: str  # the GGUF name
    out: str  # "F32", "float" (BF16/F16 as the source is; F32 sources become F16), "d2t" (I64 ids)
    permute_rope: bool = False


@dataclass(frozen=True)
class TargetFacts:
    """What the converter needs from the target GGUF the user already has."""

    path: str
    n_vocab: int
    n_layer: int
    n_embd: int
    mrope: bool  # the target ropes in M-RoPE sections: the drafter gets degenerate ones


def _refuse(cause: str, fix: str) -> ConversionError:
    return ConversionError(cause, fix + "; nothing was written")


# The largest value a shape field may take: far past any drafter (a 27B target has 5,120 wide
# layers and 248k tokens), small enough that nothing sized from it can ask for gigabytes of
# memory. `max_position_embeddings` is a GGUF u32.
LIMITS = {
    "hidden_size": 1 << 16,
    "num_hidden_layers": 1 << 10,
    "num_attention_heads": 1 << 10,
    "num_key_value_heads": 1 << 10,
    "head_dim": 1 << 12,
    "intermediate_size": 1 << 20,
    "vocab_size": 1 << 22,
    "draft_vocab_size": 1 << 22,
    "max_position_embeddings": 1 << 24,
    "block_size": 1 << 8,
}
U32_MAX = (1 << 32) - 1


def _int(table: dict[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        if value is None:
            raise _refuse(f"{where} lacks {key!r}", "the checkpoint is incomplete; check its config.json")
        raise _refuse(f"{where}: {key} is {value!r:.60}, not a whole number", "check the checkpoint's config.json")
    limit = LIMITS.get(key, U32_MAX)
    if value > limit:
        raise _refuse(f"{where}: {key} is {value:.3g}, over {limit:,}", "no drafter is that large; check config.json")
    return value


def _float(value: Any, key: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise _refuse(f"{where}: {key} is {value!r:.60}, not a finite number", "check the checkpoint's config.json")
    return float(value)


def read_config(raw: dict[str, Any], where: str = "config.json") -> DrafterSpec:
    """The drafter's shape and GGUF keys from its config.json, or a refusal naming every
    field the converter does not know, a value of the wrong kind or out of bounds."""
    try:
        return _read_config(raw, where)
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
        if isinstance(exc, ConversionError):
            raise
        # A field of the wrong kind in a place the checks above did not look (a list where an
        # object goes): a refusal all the same, never a crash to report.
        raise _refuse(f"{where} has a value of the wrong kind ({exc})", "check the checkpoint's config.json") from None


def _family(config: dict[str, Any], where: str) -> str:
    names = config.get("architectures") or []
    found = [FAMILIES[n] for n in names if n in FAMILIES]
    if not found:
        raise _refuse(
            f"{where}: architectures {names!r} is no block drafter the converter knows",
            f"it converts {', '.join(FAMILIES)}",
        )
    family = found[0]
    if "dspine_config" in config:
        family = "dspine"
    elif family == "dflash" and "conv_kernel_size" in config.get("dflash_config", {}):
        family = "dflash2"
    return family


def _normalise(config: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """DSpark's two schemas as upstream reads them: an EAGLE3-style export (a nested
    `transformer_layer_config`, `aux_hidden_state_layer_ids`) drafts from a bonus anchor."""
    anchor = config.get(
        "sample_from_anchor", "transformer_layer_config" not in config and "aux_hidden_state_layer_ids" not in config
    )
    if "transformer_layer_config" in config:
        config = {**config, **config["transformer_layer_config"]}
        config.pop("transformer_layer_config")
    if "aux_hidden_state_layer_ids" in config:
        ids = config.pop("aux_hidden_state_layer_ids")
        config.setdefault("dflash_config", {"mask_token_id": config.get("mask_token_id"), "target_layer_ids": ids})
        config["dflash_config"]["target_layer_ids"] = [i - 1 for i in ids]
    return config, bool(anchor)


# Adds one `dflash.*` GGUF key: its name after the prefix, its kind, its value.
AddKey = Callable[[str, str, Any], None]


@dataclass(frozen=True)
class _Shape:
    """The drafter's dimensions as config.json gives them, checked."""

    hidden: int
    n_layer: int
    n_head: int
    head_dim: int
    vocab: int
    draft_vocab: int
    layer_ids: list[int]
    mask: int | None


def _read_config(raw: dict[str, Any], where: str) -> DrafterSpec:
    if not isinstance(raw, dict):
        raise _refuse(f"{where} is not a JSON object", "check the checkpoint's config.json")
    family = _family(raw, where)
    config, sample_from_anchor = _normalise(dict(raw))
    dflash, dspine = _known_sections(config, where)
    shape = _shape(config, dflash, where)

    keys: list[Key] = []

    def add(name: str, kind: str, value: Any) -> None:
        keys.append(Key(f"{ARCH}.{name}", kind, value))

    _attention_keys(config, dflash, shape, where, add)
    _block_keys(config, dflash, where, add)
    add("target_layers", "arr", [i + 1 for i in shape.layer_ids])  # upstream taps layer *inputs*
    _sliding_keys(config, dflash, shape.n_layer, where, add)
    _causal_key(config, dflash, family, shape.mask, where, add)
    if family == "dspark":
        add("sample_from_anchor", "bool", sample_from_anchor)
    dspine_values = _dspine_keys(dspine, where, add, shape.hidden, shape.vocab) if family == "dspine" else {}
    return DrafterSpec(
        family=family,
        n_layer=shape.n_layer,
        hidden=shape.hidden,
        head_dim=shape.head_dim,
        vocab=shape.vocab,
        draft_vocab=shape.draft_vocab,
        target_layer_ids=list(shape.layer_ids),
        mask_token_id=shape.mask,
        neox_rope=bool(config.get("rope_is_neox_style", True)),
        keys=keys,
        dspine=dspine_values,
    )


def _known_sections(config: dict[str, Any], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The `dflash_config` and `dspine_config` sections, once every field in the config is one
    the converter knows and its Markov head is one llama.cpp runs."""
    unknown = sorted(set(config) - IGNORED_FIELDS - READ_FIELDS)
    dflash = config.get("dflash_config") or {}
    if not isinstance(dflash, dict):
        raise _refuse(f"{where}: dflash_config is not an object", "check the checkpoint's config.json")
    unknown += [f"dflash_config.{k}" for k in sorted(set(dflash) - DFLASH_CONFIG_FIELDS)]
    dspine = config.get("dspine_config") or {}
    if not isinstance(dspine, dict):
        raise _refuse(f"{where}: dspine_config is not an object", "check the checkpoint's config.json")
    unknown += [f"dspine_config.{k}" for k in sorted(set(dspine) - DSPINE_CONFIG_FIELDS - DSPINE_TRAINING_FIELDS)]
    if unknown:
        raise _refuse(
            f"{where} has fields the converter does not know: {', '.join(unknown)}",
            "a field it does not know may change what the drafter computes, so it converts nothing; "
            "a newer dspine may know them (the tables are in app/hub/convert.py)",
        )
    if config.get("markov_head_type", "vanilla") != "vanilla":
        raise _refuse(
            f"{where}: markov_head_type {config['markov_head_type']!r} is not supported",
            "only 'vanilla' Markov heads run in llama.cpp",
        )
    return dflash, dspine


def _shape(config: dict[str, Any], dflash: dict[str, Any], where: str) -> _Shape:
    hidden = _int(config, "hidden_size", where)
    n_layer = _int(config, "num_hidden_layers", where)
    n_head = _int(config, "num_attention_heads", where)
    head_dim = _int(config, "head_dim", where, hidden // n_head if n_head else None)
    vocab = _int(config, "vocab_size", where)
    draft_vocab = _int(config, "draft_vocab_size", where, vocab) or vocab
    if draft_vocab > vocab:
        raise _refuse(f"{where}: draft_vocab_size {draft_vocab} exceeds vocab_size {vocab}", "check config.json")
    layer_ids = dflash.get("target_layer_ids", config.get("target_layer_ids", []))
    if (
        not isinstance(layer_ids, list)
        or not 0 < len(layer_ids) <= 64
        or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 1 << 10 for i in layer_ids)
    ):
        raise _refuse(
            f"{where}: target_layer_ids is {layer_ids!r}, not a list of target layer numbers",
            "a block drafter reads the target's hidden states at these layers; check config.json",
        )
    mask = dflash.get("mask_token_id", config.get("mask_token_id"))
    if mask is not None and (isinstance(mask, bool) or not isinstance(mask, int)):
        raise _refuse(f"{where}: mask_token_id is {mask!r}", "check config.json")
    return _Shape(hidden, n_layer, n_head, head_dim, vocab, draft_vocab, layer_ids, mask)


def _attention_keys(config: dict[str, Any], dflash: dict[str, Any], shape: _Shape, where: str, add: AddKey) -> None:
    """The transformer's sizes, its attention and its rope."""
    rope = config.get("rope_parameters") or {}
    add("context_length", "u32", _int(config, "max_position_embeddings", where, 262144))
    add("embedding_length", "u32", shape.hidden)
    add("block_count", "u32", shape.n_layer)
    add("feed_forward_length", "u32", _int(config, "intermediate_size", where))
    add("attention.head_count", "u32", shape.n_head)
    add("attention.head_count_kv", "u32", _int(config, "num_key_value_heads", where, shape.n_head))
    theta = rope.get("rope_theta", config.get("rope_theta"))
    if theta is not None:
        add("rope.freq_base", "f32", _float(theta, "rope_theta", where))
    add("attention.layer_norm_rms_epsilon", "f32", _float(config.get("rms_norm_eps", 1e-6), "rms_norm_eps", where))
    add("attention.key_length", "u32", shape.head_dim)
    add("attention.value_length", "u32", shape.head_dim)
    partial = rope.get("partial_rotary_factor", config.get("partial_rotary_factor"))
    if partial is not None:
        add(
            "rope.dimension_count",
            "u32",
            int(shape.head_dim * min(1.0, abs(_float(partial, "partial_rotary_factor", where)))),
        )
    if (value_scale := dflash.get("attention_value_scale")) is not None:
        add("attention.value_scale", "f32", _float(value_scale, "attention_value_scale", where))


def _block_keys(config: dict[str, Any], dflash: dict[str, Any], where: str, add: AddKey) -> None:
    """The block's size, DFlash2's convolutions and selector, and the logit and embedding scales."""
    add("block_size", "u32", _int(dflash, "block_size", where, config.get("block_size", 16)))
    if "conv_kernel_size" in dflash:
        for name in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"):
            add(name, "u32", _int(dflash, name, f"{where}: dflash_config"))
    for name, key in (
        ("output_multiplier", "logit_scale"),
        ("final_logit_softcapping", "final_logit_softcapping"),
        ("input_embedding_scale", "embedding_scale"),
    ):
        value = dflash.get(name, config.get(name))
        if value is not None and (name != "final_logit_softcapping" or _float(value, name, where) > 0):
            add(key, "f32", _float(value, name, where))


def _sliding_keys(config: dict[str, Any], dflash: dict[str, Any], n_layer: int, where: str, add: AddKey) -> None:
    """The sliding window and which layers slide, where the drafter's attention slides."""
    use_swa, window = _sliding(config, dflash, where)
    if use_swa and window:
        if dflash.get("use_swa", False):
            pattern = [True] * n_layer
        else:
            pattern = [t == "sliding_attention" for t in config.get("layer_types") or []]
        add("attention.sliding_window", "u32", _int({"sliding_window": window}, "sliding_window", where))
        add("attention.sliding_window_pattern", "arr", pattern)


def _causal_key(
    config: dict[str, Any], dflash: dict[str, Any], family: str, mask: int | None, where: str, add: AddKey
) -> None:
    """Whether the block attends causally: DSpine always does, and needs its mask token."""
    causal = config.get("is_causal", dflash.get("causal"))
    if family == "dspine":
        if causal is not None and not causal:
            raise _refuse(
                f"{where}: a DSpine drafter with non-causal block attention (is_causal/causal false)",
                "DSpine attends causally inside its block (SpecForge's DSpineDraftModel); check config.json",
            )
        causal = True
        if mask is None:
            raise _refuse(f"{where}: dflash_config lacks mask_token_id", "a DSpine drafter needs its mask token")
    if causal is not None:
        add("attention.causal", "bool", bool(causal))


def _sliding(config: dict[str, Any], dflash: dict[str, Any], where: str) -> tuple[bool, Any]:
    """Whether the drafter's attention slides, and its window. What the reference reads or
    refuses is refused here too, naming the key, so nothing converts that loses its window or
    that llama-server then refuses to load: sliding layers with `use_sliding_window` false (the
    reference refuses it), and a window with no `layer_types` to say which layers slide."""
    use_swa = bool(config.get("use_sliding_window", False) or dflash.get("use_swa", False))
    window = dflash.get("swa_window_size") or config.get("sliding_window")
    if dflash.get("use_swa", False):
        if not window:
            raise _refuse(
                f"{where}: dflash_config.use_swa is true but neither swa_window_size nor sliding_window is set",
                "give the window in tokens (dflash_config.swa_window_size)",
            )
        return use_swa, window
    sliding = [t for t in config.get("layer_types") or [] if t == "sliding_attention"]
    if sliding and not config.get("use_sliding_window", False):
        raise _refuse(
            f"{where}: layer_types names {len(sliding)} sliding_attention layers but use_sliding_window is "
            f"{config.get('use_sliding_window')!r}",
            "the reference refuses this config: set use_sliding_window true (with sliding_window), or make "
            "those layers full_attention",
        )
    if use_swa and window and not config.get("layer_types"):
        raise _refuse(
            f"{where}: use_sliding_window is true with sliding_window {window!r} but layer_types is missing",
            "layer_types says which layers slide (sliding_attention or full_attention, one a layer); add it",
        )
    if use_swa and sliding and not window:
        raise _refuse(
            f"{where}: use_sliding_window is true and layer_types has sliding layers, but sliding_window is not set",
            "give sliding_window (the window in tokens)",
        )
    return use_swa, window


def _dspine_keys(dspine: dict[str, Any], where: str, add: AddKey, hidden: int, vocab: int) -> dict[str, int]:
    """transfer_rank and message_size (the tensors' shapes are checked against them) and top_k
    (`dflash.dspine.top_k`: the candidates per position the refinement keeps), refused where the
    patched server refuses it: the refinement's lattice of top_k x (top_k + 1) scores is laid in
    one hidden-sized row."""
    inner = f"{where}: dspine_config"
    values = {
        "transfer_rank": _int(dspine, "transfer_rank", inner),
        "message_size": _int(dspine, "message_size", inner),
        "top_k": _int(dspine, "top_k", inner, DSPINE_TOP_K_DEFAULT),
    }
    for name, value in values.items():
        if not 0 < value <= 1 << 16:
            raise _refuse(f"{inner}.{name} is {value}, not in 1..65536", "check the checkpoint's config.json")
    top_k = values["top_k"]
    if top_k > vocab or hidden < top_k * (top_k + 1):
        given = "is" if "top_k" in dspine else f"is not given, so the reference's default {DSPINE_TOP_K_DEFAULT},"
        why = (
            f"more than the vocabulary's {vocab} tokens"
            if top_k > vocab
            else f"hidden_size {hidden} is less than top_k x (top_k + 1) = {top_k * (top_k + 1)}"
        )
        raise _refuse(
            f"{inner}.top_k {given} {top_k}: it does not fit the refinement lattice ({why})",
            "dspine's llama-server would refuse to load it; a checkpoint of this size needs a smaller top_k",
        )
    add("dspine.top_k", "u32", top_k)
    return values


def gguf_name(source: str) -> str | None:
    """The GGUF name of a checkpoint tensor ('' for one upstream drops), None when unknown."""
    name = source.removeprefix("model.")
    if name in DROPPED or name.endswith(DROPPED):
        return ""
    if name in ROOT_NAMES:
        return ROOT_NAMES[name]
    if found := _INJECTION.match(name):
        base = INJECTION_LISTS.get(found.group(1))
        return f"blk.{found.group(2)}.{base}.{found.group(3)}" if base and found.group(3) == "weight" else None
    if found := _LAYER.match(name):
        rest = BLOCK_NAMES.get(found.group(2))
        return f"blk.{found.group(1)}.{rest}" if rest else None
    return None


def _out_type(name: str, shape: tuple[int, ...]) -> str:
    """Upstream's rule (conversion/base.py prepare_tensors): 1-D tensors, norms and
    anything not named `.weight` stay F32; weights keep the checkpoint's half type."""
    if name == "d2t":
        return "d2t"
    if len(shape) <= 1 or name.endswith("_norm.weight") or not name.endswith(".weight"):
        return "F32"
    return "float"


def plan_tensors(spec: DrafterSpec, shapes: dict[str, tuple[int, ...]]) -> list[TensorPlan]:
    """What to write for each checkpoint tensor; refuses unknown tensors (all listed),
    missing ones, and shapes that contradict the config."""
    named: dict[str, tuple[str, tuple[int, ...]]] = {}
    unknown = []
    for source, shape in shapes.items():
        name = gguf_name(source)
        if name is None:
            unknown.append(source)
        elif name:
            if name in named:
                raise _refuse(f"tensors {named[name][0]} and {source} are both {name}", "the checkpoint is ambiguous")
            named[name] = (source, shape)
    biases = sorted(n for n in unknown if n.endswith(".bias"))
    if biases:
        raise _refuse(
            f"the checkpoint has bias tensor(s) llama.cpp's dflash graph has no place for: {', '.join(biases[:20])}"
            + (f" and {len(biases) - 20} more" if len(biases) > 20 else ""),
            "its layers are bias-free (attention_bias false); a checkpoint trained with biases does not convert",
        )
    if unknown:
        shown = ", ".join(sorted(unknown)[:20]) + (f" and {len(unknown) - 20} more" if len(unknown) > 20 else "")
        raise _refuse(
            f"the checkpoint has {len(unknown)} tensor(s) the converter's name table does not know: {shown}",
            "converting without them would give a drafter that computes something else; "
            "a newer dspine may know them (the tables are in app/hub/convert.py)",
        )
    if spec.family == "dspark" and spec.draft_vocab == spec.vocab:
        named.pop("output.weight", None)  # upstream: a full-vocabulary DSpark shares the target's head
    _check_present(spec, named)
    _check_shapes(spec, named)
    return [
        TensorPlan(
            source,
            name,
            _out_type(name, shape),
            permute_rope=not spec.neox_rope and name.split(".", 2)[-1] in _ROPE_PERMUTED,
        )
        for name, (source, shape) in named.items()
    ]


def _check_present(spec: DrafterSpec, named: dict[str, Any]) -> None:
    root, block = REQUIRED_BY_FAMILY[spec.family]
    wanted = [*REQUIRED_ROOT, *root]
    for il in range(spec.n_layer):
        wanted += [f"blk.{il}.{n}" for n in (*REQUIRED_BLOCK, *block)]
    if spec.draft_vocab < spec.vocab:
        wanted += ["d2t", "output.weight"]
    missing = [n for n in wanted if n not in named]
    if missing:
        shown = ", ".join(missing[:20]) + (f" and {len(missing) - 20} more" if len(missing) > 20 else "")
        raise _refuse(
            f"the checkpoint lacks {len(missing)} tensor(s) a {spec.family} drafter needs (GGUF names): {shown}",
            "the download may be incomplete (pull again) or the checkpoint is of another kind"
            + (
                " (DSpine's code table: `transfer_codes` in the checkpoint, or a safetensors file beside "
                "config.json whose one tensor is `codes`)"
                if "dspine_codes.weight" in missing
                else ""
            ),
        )
    extra_blocks = sorted({int(n.split(".")[1]) for n in named if n.startswith("blk.")} - set(range(spec.n_layer)))
    if extra_blocks:
        raise _refuse(
            f"the checkpoint has tensors for layer(s) {extra_blocks} but config.json says {spec.n_layer} layers",
            "check the checkpoint",
        )


def _check_shapes(spec: DrafterSpec, named: dict[str, tuple[str, tuple[int, ...]]]) -> None:
    """The shapes that decide whether the file loads against the target (PyTorch order)."""
    taps = len(spec.target_layer_ids)
    expect = {
        "fc.weight": (spec.hidden, taps * spec.hidden),
        "token_embd.weight": (spec.vocab, spec.hidden),
        "output.weight": (spec.draft_vocab, spec.hidden),
    }
    for name, shape in expect.items():
        if name in named and named[name][1] != shape:
            raise _refuse(
                f"tensor {named[name][0]} is {list(named[name][1])}, but config.json makes it {list(shape)}",
                "the checkpoint and its config.json disagree; pull it again",
            )
    for name in ("markov_w1.weight", "selector_predecessor.weight", "selector_successor.weight"):
        if name in named and named[name][1][0] != spec.vocab:
            raise _refuse(
                f"tensor {named[name][0]} has {named[name][1][0]} vocabulary rows, config.json says {spec.vocab}",
                "the checkpoint and its config.json disagree; pull it again",
            )
    if spec.family == "dspine":
        _check_dspine_shapes(spec, named)
    if "d2t" in named and named["d2t"][1] != (spec.draft_vocab,):
        raise _refuse(
            f"d2t is {list(named['d2t'][1])}, but draft_vocab_size is {spec.draft_vocab}",
            "the checkpoint and its config.json disagree",
        )


def _check_dspine_shapes(spec: DrafterSpec, named: dict[str, tuple[str, tuple[int, ...]]]) -> None:
    """SpecForge's shapes (PyTorch [out, in]): readouts [r, H], writes [H, s], the message and
    both gates [s, r], the bias [s], the code table [V, r]."""
    r, s, e = spec.dspine["transfer_rank"], spec.dspine["message_size"], spec.hidden
    expect = {
        "dspine_message.weight": (s, r),
        "dspine_receiver_gate.weight": (s, r),
        "dspine_predecessor_gate.weight": (s, r),
        "dspine_gate.bias": (s,),
        "dspine_codes.weight": (spec.vocab, r),
    }
    for il in range(spec.n_layer):
        expect[f"blk.{il}.dspine_readout.weight"] = (r, e)
        expect[f"blk.{il}.dspine_write.weight"] = (e, s)
    for name, shape in expect.items():
        if named[name][1] != shape:
            raise _refuse(
                f"tensor {named[name][0]} is {list(named[name][1])}, but config.json (hidden_size {e}, "
                f"vocab_size {spec.vocab}, dspine_config transfer_rank {r}, message_size {s}) makes it {list(shape)}",
                "the checkpoint and its config.json disagree; pull it again",
            )


def check_target(spec: DrafterSpec, target: TargetFacts) -> list[Key]:
    """Refuse a drafter whose vocabulary or taps the target does not match; the keys the
    target adds (the mask token, M-RoPE sections)."""
    if spec.vocab != target.n_vocab:
        raise _refuse(
            f"the drafter's vocabulary has {spec.vocab} tokens, the target {target.path} has {target.n_vocab}",
            "a block drafter must share its target's vocabulary: pull the target it was trained for",
        )
    if spec.mask_token_id is not None and not 0 <= spec.mask_token_id < target.n_vocab:
        raise _refuse(
            f"the drafter's mask token {spec.mask_token_id} is outside the target's vocabulary "
            f"(0..{target.n_vocab - 1})",
            "pull the target the drafter was trained for",
        )
    if spec.hidden != target.n_embd:
        raise _refuse(
            f"the drafter's hidden size is {spec.hidden}, the target {target.path}'s {target.n_embd}",
            "a block drafter reads the target's hidden states: pull the target it was trained for",
        )
    # The GGUF's dflash.target_layers (HF id + 1) names a layer *input* llama.cpp taps: 0..n_layer-1.
    # HF id n_layer-1 would be the output of the last layer, which it cannot tap.
    beyond = [i for i in spec.target_layer_ids if i + 1 > target.n_layer - 1]
    if beyond:
        raise _refuse(
            f"dflash_config.target_layer_ids {spec.target_layer_ids} reads target layer(s) {beyond}, but {target.path} "
            f"has {target.n_layer} layers: llama.cpp taps layer inputs, so the last id it can take is "
            f"{target.n_layer - 2} (dflash.target_layers {[i + 1 for i in beyond]} > {target.n_layer - 1})",
            "pull the target the drafter was trained for",
        )
    keys = []
    if spec.mask_token_id is not None:
        keys.append(Key("tokenizer.ggml.mask_token_id", "u32", spec.mask_token_id))
    if target.mrope:
        # The draft ropes on the temporal sections only (upstream writes [n_rot/2, 0, 0, 0]).
        keys.append(Key(f"{ARCH}.rope.dimension_sections", "arr", [spec.head_dim // 2, 0, 0, 0]))
    return keys


def check_d2t(d2t_offsets: Any, n_vocab: int) -> Any:
    """Upstream stores d2t as offsets (target id - draft id); the GGUF holds absolute target ids.
    Refuses ids outside the target's vocabulary and duplicates. numpy in, numpy out."""
    import numpy as np

    ids = np.asarray(d2t_offsets, dtype=np.int64).reshape(-1) + np.arange(np.size(d2t_offsets), dtype=np.int64)
    outside = (ids < 0) | (ids >= n_vocab)
    if outside.any():
        raise _refuse(
            f"d2t maps {int(outside.sum())} draft token(s) beyond the target's vocabulary of {n_vocab}",
            "the drafter was made for another target: pull the target it was trained for",
        )
    if np.unique(ids).size != ids.size:
        raise _refuse("d2t maps two draft tokens to one target token", "the checkpoint is damaged; pull it again")
    return ids


def has_confidence_head(plans: list[TensorPlan]) -> bool:
    return any(p.name == "conf_proj.weight" for p in plans)
