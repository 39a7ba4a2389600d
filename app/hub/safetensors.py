"""Read safetensors files without torch: the header, then one tensor at a time.

The format: 8 bytes (little-endian length N), N bytes of JSON naming each tensor's
dtype, shape and byte range in the data that follows. Tensors are read one by one
into a buffer of their own size, so converting a checkpoint holds at most the tensor
at hand (and its converted copy) in memory, whatever the file's size.
"""

from __future__ import annotations

import json
import math
import stat
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConversionError

# A header is a few hundred KB even for big checkpoints; a larger claim is a broken file.
MAX_HEADER_BYTES = 100 * 2**20

# safetensors dtype -> (numpy dtype holding its bytes, bytes per value). BF16 has no numpy
# type: its values travel as uint16 bit patterns, which the GGUF writer takes raw.
DTYPES: dict[str, tuple[np.dtype, int]] = {
    "F64": (np.dtype("<f8"), 8),
    "F32": (np.dtype("<f4"), 4),
    "F16": (np.dtype("<f2"), 2),
    "BF16": (np.dtype("<u2"), 2),
    "I64": (np.dtype("<i8"), 8),
    "I32": (np.dtype("<i4"), 4),
    "I16": (np.dtype("<i2"), 2),
    "I8": (np.dtype("i1"), 1),
    "U8": (np.dtype("u1"), 1),
    "BOOL": (np.dtype("u1"), 1),
}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str  # the safetensors name: BF16, F32, I64, ...
    shape: tuple[int, ...]  # PyTorch order (outermost first)
    start: int  # absolute byte offset in the file
    nbytes: int
    path: Path

    @property
    def count(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


def _broken(path: Path, what: str) -> ConversionError:
    return ConversionError(
        f"{path} is not a readable safetensors file: {what}",
        "delete it and pull again (the hub's copy is checked by sha256; a local file may be damaged)",
    )


def read_header(path: Path) -> dict[str, TensorInfo]:
    """Every tensor of one safetensors file, checked against the file's size and each other."""
    mode = path.stat().st_mode
    if not stat.S_ISREG(mode):
        # A FIFO would block the read for ever, a device feed it without end.
        raise _broken(path, "it is not a regular file (a pipe, a device or a folder)")
    size = path.stat().st_size
    with path.open("rb") as handle:
        raw = handle.read(8)
        if len(raw) < 8:
            raise _broken(path, "shorter than its 8-byte header length")
        (length,) = struct.unpack("<Q", raw)
        if length > min(MAX_HEADER_BYTES, size - 8):
            raise _broken(path, f"its header claims {length} bytes")
        try:
            header = json.loads(handle.read(length))
        except (UnicodeDecodeError, ValueError) as exc:
            raise _broken(path, f"its header is not JSON ({exc})") from None
        except RecursionError:
            raise _broken(path, "its header is nested too deeply to be one") from None
    if not isinstance(header, dict):
        raise _broken(path, "its header is not a JSON object")
    base = 8 + length
    tensors: dict[str, TensorInfo] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = entry["dtype"], tuple(entry["shape"]), entry["data_offsets"]
        except (TypeError, KeyError, ValueError):
            raise _broken(path, f"tensor {name!r} lacks dtype, shape or data_offsets") from None
        numbers = (*shape, begin, end)
        # Each dimension bounded (2^40 elements is past any drafter's tensor; numpy's product of
        # 2^32 x 2^32 x 4 wraps to 0): what does not fit is refused, never overflows.
        if (
            not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 48 for n in numbers)
            or end < begin
            or math.prod(shape) > 1 << 40
        ):
            raise _broken(path, f"tensor {name!r} has a shape or byte range that is not whole numbers in order")
        if not isinstance(dtype, str) or dtype not in DTYPES:
            raise ConversionError(
                f"{path}: tensor {name!r} has dtype {dtype}, which the converter does not read",
                f"the converter reads {', '.join(DTYPES)}; nothing was written",
            )
        info = TensorInfo(name, dtype, shape, base + int(begin), int(end) - int(begin), path)
        if info.nbytes != info.count * DTYPES[dtype][1] or begin < 0 or info.start + info.nbytes > size:
            raise _broken(path, f"tensor {name!r} ({dtype} {list(shape)}) does not fit its byte range")
        if 0 in shape:
            # A weight with no values: no model's layer has one, and the GGUF it made would not load.
            raise _broken(path, f"tensor {name!r} has no values (shape {list(shape)})")
        tensors[name] = info
    _no_overlap(path, list(tensors.values()))
    return tensors


def _no_overlap(path: Path, tensors: list[TensorInfo]) -> None:
    """Two tensors sharing bytes: one was written over the other, so neither can be trusted."""
    ordered = sorted(tensors, key=lambda t: t.start)
    for before, after in zip(ordered, ordered[1:], strict=False):
        if after.start < before.start + before.nbytes:
            raise _broken(path, f"tensors {before.name!r} and {after.name!r} share bytes")


def read_checkpoint(paths: list[Path]) -> dict[str, TensorInfo]:
    """The tensors of all the checkpoint's files (shards), by name."""
    tensors: dict[str, TensorInfo] = {}
    for path in sorted(paths):
        for name, info in read_header(path).items():
            if name in tensors:
                raise ConversionError(
                    f"tensor {name!r} is in both {tensors[name].path.name} and {path.name}",
                    "the checkpoint's shards overlap; pull it again",
                )
            tensors[name] = info
    return tensors


def load(info: TensorInfo) -> np.ndarray:
    """One tensor's values, read straight into a buffer of its own size (PyTorch order)."""
    return _read_rows(info, 0, info.shape[0] if info.shape else 1).reshape(info.shape)


def row_blocks(info: TensorInfo, max_bytes: int = 16 * 2**20) -> Iterator[np.ndarray]:
    """A tensor's values a block of whole rows at a time (each block flat, at most about
    `max_bytes`): a check of every value that holds one block, not the tensor (DSpine's code
    table is 0.5 GB in BF16, 1 GB as f32)."""
    rows = info.shape[0] if info.shape else 1
    # Sized as f32 rows, whatever the type: two tensors of one shape step alike (compared block by block).
    step = max(max_bytes // max(4 * info.count // max(rows, 1), 1), 1)
    for first in range(0, rows, step):
        yield _read_rows(info, first, min(step, rows - first))


def _read_rows(info: TensorInfo, first: int, count: int) -> np.ndarray:
    rows = info.shape[0] if info.shape else 1
    row_values = info.count // max(rows, 1)
    values = np.empty(count * row_values, dtype=DTYPES[info.dtype][0])
    row_bytes = info.nbytes // max(rows, 1)
    with info.path.open("rb", buffering=0) as handle:
        handle.seek(info.start + first * row_bytes)
        view = memoryview(values.view(np.uint8).data)
        got = 0
        while got < values.nbytes:
            n = handle.readinto(view[got:])
            if not n:
                raise _broken(info.path, f"tensor {info.name!r} is cut short")
            got += n
    return values
