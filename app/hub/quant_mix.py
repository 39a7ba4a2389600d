"""The type llama-quantize gives each tensor of a converted drafter, so that `dspine fit` can
size a checkpoint before it is pulled and converted. Pure.

llama.cpp's rules (src/llama-quant.cpp, llama_tensor_get_type) for the quants dspine converts
to, on a dense model: only 2-D tensors named `*.weight` that are not norms are quantized; a
tensor whose rows do not divide into the quant's blocks falls back (Q4_K to Q5_0, Q6_K to
Q8_0, and to F16 where even those do not fit); Q4_K_M puts `attn_v` and `ffn_down` at Q6_K on
the layers `use_more_bits` picks (the first and last eighth, and every third between). What
dspine keeps finer on top (`--tensor-type`) is KEPT. Checked against llama-quantize's own
output (tests/engines/test_fit_from_config.py)."""

from __future__ import annotations

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

# Tensors dspine keeps at a type of its own whatever the quant: DSpine's code table is fixed
# (the drafter was trained against these very codes) and read by token id; Q8_0 keeps every
# code within about a percent, at half of BF16's size.
KEPT = {"dspine_codes.weight": "Q8_0"}
UNQUANTIZED = ("F32", "F16", "BF16")
_BASE = {"Q4_K_M": "Q4_K", "Q8_0": "Q8_0"}  # the quants `dspine convert` is asked for most
_FALLBACK = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0", "Q2_K": "Q4_0", "Q3_K": "Q4_0"}


def base_type(quant: str) -> str:
    """The matrix type a quant's name stands for (Q4_K_M: Q4_K; Q5_0: itself)."""
    upper = quant.upper()
    return _BASE.get(upper, upper.removesuffix("_M").removesuffix("_S").removesuffix("_L"))


def _block(type_name: str) -> int:
    return GGML_QUANT_SIZES[GGMLQuantizationType[type_name]][0]


def _more_bits(index: int, count: int) -> bool:
    return index < count // 8 or index >= 7 * count // 8 or (index - count // 8) % 3 == 2


def quantized_types(tensors: dict[str, tuple[int, ...]], quant: str, half: str = "BF16") -> dict[str, str]:
    """Each tensor's type after conversion to `quant`: `tensors` maps GGUF names to ggml dims
    (rows first), in the file's order; `half`: the type the converter stages weights in."""
    upper = quant.upper()
    types: dict[str, str] = {}
    counts = {part: sum(name.endswith(part) for name in tensors) for part in ("attn_v.weight", "ffn_down.weight")}
    seen = dict.fromkeys(counts, 0)
    for name, dims in tensors.items():
        if len(dims) < 2 or not name.endswith("weight") or name.endswith("_norm.weight"):
            types[name] = "F32"
            continue
        if upper in UNQUANTIZED:
            types[name] = half if upper == "BF16" else upper
            continue
        wanted = KEPT.get(name) or base_type(upper)
        for part in counts:
            if name.endswith(part) and name not in KEPT:
                if upper == "Q4_K_M" and _more_bits(seen[part], counts[part]):
                    wanted = "Q6_K"
                seen[part] += 1
        types[name] = _fitting(wanted, dims[0])
    return types


def _fitting(wanted: str, row: int) -> str:
    """`wanted`, or what llama-quantize falls back to for rows of `row` values."""
    if row % _block(wanted) == 0:
        return wanted
    fallback = _FALLBACK.get(wanted, wanted)
    return fallback if row % _block(fallback) == 0 else "F16"


def tensor_bytes(dims: tuple[int, ...], type_name: str) -> int:
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name]]
    count = 1
    for dim in dims:
        count *= dim
    return count // block * size
