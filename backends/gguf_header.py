"""Read a GGUF header (metadata and tensor table) without reading the weights.

From a local file, or from a remote one through HTTP Range requests so that
`dspine fit` works before `dspine pull` (as gguf-parser does). The parser
trusts nothing: every count and length is bounded before anything is
allocated, and a short read says where the file ended.

It lives with the engines because they read GGUF metadata too (the vocabulary a
drafter must share with its target, the chat template); `app/fit` reads shapes
from the same headers.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from .errors import GgufError

MAGIC = b"GGUF"
MAX_TENSORS = 1 << 20
MAX_KV = 1 << 16
MAX_STRING = 64 << 20
MAX_ARRAY = 1 << 26
MAX_DIMS = 4
KEEP_ARRAY = 4096  # longer arrays (tokens, merges) are counted, not kept

_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9


def items_sha256(items: Iterable[Any]) -> str:
    """A digest of an array's items (the vocabulary's token texts, say), the same whether
    the array was kept or only counted."""
    digest = hashlib.sha256()
    for item in items:
        digest.update(str(item).encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()


@dataclass(frozen=True)
class ArrayInfo:
    """A metadata array too long to keep (the vocabulary): its type, length and a digest of
    its items (what comparing two vocabularies needs)."""

    item_type: int
    length: int
    sha256: str = ""

    def __len__(self) -> int:
        return self.length


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dims: tuple[int, ...]  # ne0, ne1, ... as ggml orders them
    type: int
    offset: int

    @property
    def n_elements(self) -> int:
        count = 1
        for dim in self.dims:
            count *= dim
        return count

    @property
    def n_bytes(self) -> int:
        block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(self.type)]
        return self.n_elements // block * type_size

    @property
    def type_name(self) -> str:
        return GGMLQuantizationType(self.type).name


@dataclass(frozen=True)
class RawValue:
    """A metadata value as the file holds it, whole, to be written again unchanged (the
    converter copies the target's tokenizer): its GGUF value type, an array's item type, and
    the value, strings as their raw bytes (a tokenizer's tokens need not all be UTF-8)."""

    value_type: int
    item_type: int | None
    value: Any


@dataclass
class GgufHeader:
    source: str
    version: int
    metadata: dict[str, Any]
    tensors: list[TensorInfo]
    header_bytes: int  # where the tensor data starts
    file_size: int | None = None
    notes: list[str] = field(default_factory=list)
    copied: dict[str, RawValue] = field(default_factory=dict)  # the keys asked for whole (parse_header's `copy`)

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def arch_key(self, suffix: str, default: Any = None) -> Any:
        return self.metadata.get(f"{self.architecture}.{suffix}", default)


class ByteSource(Protocol):
    name: str

    def read_at(self, offset: int, size: int) -> bytes: ...
    def size(self) -> int | None: ...


class FileSource:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = str(path)
        try:
            self._handle = path.open("rb")
        except OSError as exc:
            raise GgufError(f"cannot open {path}: {exc.strerror}", "check the path") from exc

    def read_at(self, offset: int, size: int) -> bytes:
        self._handle.seek(offset)
        return self._handle.read(size)

    def size(self) -> int | None:
        return self.path.stat().st_size

    def close(self) -> None:
        self._handle.close()


class RangeSource:
    """Bytes of a remote file through a fetch(offset, size) callable (HTTP Range),
    remembering what it fetched so the header can be saved for later."""

    def __init__(self, name: str, total: int | None, fetch: Callable[[int, int], bytes]) -> None:
        self.name = name
        self._total = total
        self._fetch = fetch
        self.fetched = bytearray()  # a prefix of the file, grown as the parser reads on

    def read_at(self, offset: int, size: int) -> bytes:
        end = offset + size
        if end > len(self.fetched):
            start = len(self.fetched)
            if self._total is not None:
                end = min(end, self._total)
            if end > start:
                self.fetched += self._fetch(start, end - start)
        return bytes(self.fetched[offset : offset + size])

    def size(self) -> int | None:
        return self._total


class _Cursor:
    """Sequential reads over a ByteSource, fetched in blocks (few requests when remote)."""

    def __init__(self, source: ByteSource, block: int = 1 << 20) -> None:
        self.source = source
        self.block = block
        self.pos = 0
        self._buf = b""
        self._buf_start = 0

    def take(self, size: int, what: str) -> bytes:
        end = self.pos + size
        buf_end = self._buf_start + len(self._buf)
        if self.pos < self._buf_start or end > buf_end:
            want = max(size, self.block)
            self._buf = self.source.read_at(self.pos, want)
            self._buf_start = self.pos
            self.block = min(self.block * 2, 16 << 20)  # big vocabularies: fewer round trips
        start = self.pos - self._buf_start
        data = self._buf[start : start + size]
        if len(data) < size:
            raise GgufError(
                f"{self.source.name} is truncated: it ends at byte {self.pos + len(data)} while reading {what}",
                "download it again (dspine pull resumes and verifies it)",
            )
        self.pos = end
        return data

    def unpack(self, fmt: str, what: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def string(self, what: str) -> str:
        length = self.unpack("<Q", what)
        if length > MAX_STRING:
            raise _absurd(self.source.name, f"a string of {length} bytes in {what}")
        return self.take(length, what).decode("utf-8", errors="replace")


def _absurd(name: str, what: str) -> GgufError:
    return GgufError(f"{name} is not a sane GGUF file: it claims {what}", "the file is damaged or not a GGUF model")


def _value(cursor: _Cursor, value_type: int, key: str) -> Any:
    if value_type in _SCALARS:
        return cursor.unpack(_SCALARS[value_type], key)
    if value_type == _STRING:
        return cursor.string(key)
    if value_type == _ARRAY:
        item_type = cursor.unpack("<I", key)
        length = cursor.unpack("<Q", key)
        if length > MAX_ARRAY:
            raise _absurd(cursor.source.name, f"an array of {length} items in {key}")
        if item_type == _ARRAY:
            raise _absurd(cursor.source.name, f"nested arrays in {key}")
        if item_type in _SCALARS:
            fmt = _SCALARS[item_type]
            raw = cursor.take(struct.calcsize(fmt) * length, key)
            values = list(struct.unpack("<" + fmt[1:] * length, raw))
            return ArrayInfo(item_type, length, items_sha256(values)) if length > KEEP_ARRAY else values
        if item_type == _STRING:
            items = [cursor.string(key) for _ in range(length)]
            return ArrayInfo(item_type, length, items_sha256(items)) if length > KEEP_ARRAY else items
        raise _absurd(cursor.source.name, f"array item type {item_type} in {key}")
    raise _absurd(cursor.source.name, f"value type {value_type} for {key}")


def _raw_value(cursor: _Cursor, value_type: int, key: str) -> RawValue:
    """One value kept whole, with its types; strings stay bytes."""
    if value_type in _SCALARS:
        return RawValue(value_type, None, cursor.unpack(_SCALARS[value_type], key))
    if value_type == _STRING:
        return RawValue(value_type, None, cursor.take(_string_length(cursor, key), key))
    if value_type != _ARRAY:
        raise _absurd(cursor.source.name, f"value type {value_type} for {key}")
    item_type = cursor.unpack("<I", key)
    length = cursor.unpack("<Q", key)
    if length > MAX_ARRAY:
        raise _absurd(cursor.source.name, f"an array of {length} items in {key}")
    if item_type in _SCALARS:
        fmt = _SCALARS[item_type]
        raw = cursor.take(struct.calcsize(fmt) * length, key)
        return RawValue(value_type, item_type, list(struct.unpack("<" + fmt[1:] * length, raw)))
    if item_type == _STRING:
        return RawValue(value_type, item_type, [cursor.take(_string_length(cursor, key), key) for _ in range(length)])
    raise _absurd(cursor.source.name, f"array item type {item_type} in {key}")


def _string_length(cursor: _Cursor, key: str) -> int:
    length = int(cursor.unpack("<Q", key))
    if length > MAX_STRING:
        raise _absurd(cursor.source.name, f"a string of {length} bytes in {key}")
    return length


def _as_metadata(raw: RawValue) -> Any:
    """What `metadata` holds for a value read whole: the same as for any other."""
    if raw.value_type == _STRING:
        return raw.value.decode("utf-8", errors="replace")
    if raw.value_type != _ARRAY:
        return raw.value
    items = [v.decode("utf-8", errors="replace") for v in raw.value] if raw.item_type == _STRING else raw.value
    assert raw.item_type is not None
    return ArrayInfo(raw.item_type, len(items), items_sha256(items)) if len(items) > KEEP_ARRAY else items


def _nothing(key: str) -> bool:
    return False


def parse_header(source: ByteSource, copy: Callable[[str], bool] = _nothing) -> GgufHeader:
    """The header; the values of the keys `copy` picks are also kept whole in `copied`."""
    cursor = _Cursor(source)
    magic = cursor.take(4, "the magic number")
    if magic != MAGIC:
        raise GgufError(
            f"{source.name} is not a GGUF file (a GGUF file starts with the letters GGUF; this one does not)",
            "give a .gguf model file",
        )
    version = cursor.unpack("<I", "the version")
    if version not in (2, 3):
        raise GgufError(f"{source.name} is GGUF version {version}; dspine reads versions 2 and 3", "convert it again")
    n_tensors = cursor.unpack("<Q", "the tensor count")
    n_kv = cursor.unpack("<Q", "the metadata count")
    if n_tensors > MAX_TENSORS:
        raise _absurd(source.name, f"{n_tensors} tensors")
    if n_kv > MAX_KV:
        raise _absurd(source.name, f"{n_kv} metadata entries")
    metadata: dict[str, Any] = {}
    copied: dict[str, RawValue] = {}
    for _ in range(n_kv):
        key = cursor.string("a metadata key")
        if copy(key):
            copied[key] = _raw_value(cursor, cursor.unpack("<I", key), key)
            metadata[key] = _as_metadata(copied[key])
        else:
            metadata[key] = _value(cursor, cursor.unpack("<I", key), key)
    tensors = []
    for _ in range(n_tensors):
        name = cursor.string("a tensor name")
        n_dims = cursor.unpack("<I", name)
        if not 1 <= n_dims <= MAX_DIMS:
            raise _absurd(source.name, f"{n_dims} dimensions for tensor {name}")
        dims = tuple(cursor.unpack("<Q", name) for _ in range(n_dims))
        ggml_type = cursor.unpack("<I", name)
        offset = cursor.unpack("<Q", name)
        try:
            GGMLQuantizationType(ggml_type)
        except ValueError:
            raise _absurd(source.name, f"tensor type {ggml_type} for {name}") from None
        info = TensorInfo(name, dims, ggml_type, offset)
        if info.n_elements > 1 << 40:
            raise _absurd(source.name, f"{info.n_elements} elements in tensor {name}")
        tensors.append(info)
    alignment = int(metadata.get("general.alignment", 32) or 32)
    header_bytes = (cursor.pos + alignment - 1) // alignment * alignment
    header = GgufHeader(source.name, version, metadata, tensors, header_bytes, source.size(), copied=copied)
    if header.file_size is not None:
        data_end = header_bytes + max((t.offset + t.n_bytes for t in tensors), default=0)
        if data_end > header.file_size:
            header.notes.append(
                f"the file holds {header.file_size} bytes but its tensors need {data_end}: "
                "weights are missing (a header-only or partial file)"
            )
    return header


def read_local(path: Path, copy: Callable[[str], bool] = _nothing) -> GgufHeader:
    source = FileSource(path)
    try:
        return parse_header(source, copy)
    finally:
        source.close()
