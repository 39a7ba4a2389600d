"""What a drafter GGUF is, read from what it holds, and whether a llama-server runs it.

The kind comes from the file's tensors and keys the way upstream llama.cpp tells them
apart (common/speculative.cpp, common_speculative_types_from_gguf; src/models/dflash.cpp),
not from a word in its architecture: one `dflash` architecture carries DFlash, DFlash2,
DSpark and DSpine, and a target with an MTP head is any architecture whose last block
holds `nextn.eh_proj`. Whether a server runs the file: its --spec-type knows the kind,
it knows every tensor and key the file carries (llama.cpp refuses a file with a tensor
it did not ask for), and the file lacks nothing its kind needs; each name that fails is
named, with what to do. Pure: a header and a list of spec types in, an answer out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .drafters import KINDS, Layout
from .gguf_header import GgufHeader

# The DFlash family in the order its deciding tensors are tried (docs/dspine-variant.md):
# DSpark's Markov head, then DSpine's code table, else DFlash2 or plain DFlash (one kind).
FAMILY = ("dspark", "dspine", "dflash")
FAMILY_ARCH = "dflash"
# DSpine's code table makes a file a DSpine drafter whatever its architecture string says.
DSPINE_MARKER = "dspine_codes.weight"

_BLOCK = re.compile(r"^blk\.(\d+)\.")


def template(name: str) -> str:
    """A tensor name with its block index as `N` (blk.3.attn_q.weight -> blk.N.attn_q.weight)."""
    return _BLOCK.sub("blk.N.", name, count=1)


def _block_count(header: GgufHeader) -> int:
    try:
        return int(header.arch_key("block_count", 0) or 0)
    except (TypeError, ValueError):
        return 0


def has_mtp_head(header: GgufHeader) -> bool:
    """Whether a target file carries an MTP head upstream drafts with: its last block holds
    nextn.eh_proj (the rule of common_speculative_types_from_gguf)."""
    count = _block_count(header)
    if header.architecture == FAMILY_ARCH or count <= 0:
        return False
    wanted = f"blk.{count - 1}.nextn.eh_proj.weight"
    return any(t.name == wanted for t in header.tensors)


def kind_of_header(header: GgufHeader) -> str:
    """dspine, dspark or dflash for a `dflash` file by the tensors that decide it; mtp for a
    file whose last block is an MTP head; else a plain draft model. A file carrying DSpine's
    code table is dspine under any architecture."""
    if any(t.name == DSPINE_MARKER for t in header.tensors):
        return "dspine"
    if header.architecture == FAMILY_ARCH:
        names = {template(t.name) for t in header.tensors}
        for kind in FAMILY:
            layout = KINDS[kind].layout
            if layout is not None and names & set(layout.marker):
                return kind
        return "dflash"
    return "mtp" if has_mtp_head(header) else "draft"


def runs_kind(kind: str, spec_types: tuple[str, ...]) -> str | None:
    """The --spec-type name a server with these spec types knows for the kind, if any."""
    found = KINDS.get(kind)
    return next((name for name in found.spec_types if name in spec_types), None) if found else None


def named(names: list[str]) -> list[str]:
    """Tensor names for people: one line per name, blocks gathered (blk.N.x (N = 0-4))."""
    blocks: dict[str, list[int]] = {}
    for name in names:
        found = _BLOCK.match(name)
        blocks.setdefault(template(name), []).append(int(found.group(1)) if found else -1)
    shown = []
    for name, indexes in blocks.items():
        indexes = sorted(set(indexes))
        if indexes == [-1]:
            shown.append(name)
        elif len(indexes) == 1:
            shown.append(name.replace("blk.N.", f"blk.{indexes[0]}.", 1))
        elif indexes == list(range(indexes[0], indexes[-1] + 1)):
            shown.append(f"{name} (N = {indexes[0]}-{indexes[-1]})")
        else:
            shown.append(f"{name} (N = {', '.join(map(str, indexes))})")
    return shown


def _expand(name: str, blocks: range) -> list[str]:
    return [name.replace("blk.N.", f"blk.{i}.", 1) for i in blocks] if name.startswith("blk.N.") else [name]


def missing_from(layout: Layout, header: GgufHeader) -> tuple[list[str], list[str]]:
    """(tensors, keys) the layout needs that the file lacks."""
    present = {t.name for t in header.tensors}
    templates = {template(n) for n in present}
    blocks = range(_block_count(header))
    needed = [n for name in layout.required for n in _expand(name, blocks)]
    for group in layout.together:
        if all(name.startswith("blk.N.") for name in group):
            for i in blocks:  # block by block: a layer that has one has all
                row = [name.replace("blk.N.", f"blk.{i}.", 1) for name in group]
                if any(n in present for n in row):
                    needed += row
        elif templates & set(group):
            needed += [n for name in group for n in _expand(name, blocks)]
    keys = list(layout.required_keys)
    for trigger, with_keys in layout.keys_with:
        if trigger in templates:
            keys += with_keys
    tensors = [n for n in dict.fromkeys(needed) if n not in present]
    return tensors, [k for k in dict.fromkeys(keys) if k not in header.metadata]


@dataclass(frozen=True)
class FileCheck:
    """One drafter file against one llama-server's spec types."""

    source: str
    kind: str  # what the file holds
    spec_type: str | None  # the server's --spec-type name for that kind; None: it has none
    unknown_tensors: tuple[str, ...] = ()  # in the file, known to no kind this server runs
    unknown_keys: tuple[str, ...] = ()
    missing_tensors: tuple[str, ...] = ()  # needed by the file's kind, not in the file
    missing_keys: tuple[str, ...] = ()

    @property
    def runs(self) -> bool:
        return self.spec_type is not None and not (
            self.unknown_tensors or self.unknown_keys or self.missing_tensors or self.missing_keys
        )

    @property
    def label(self) -> str:
        found = KINDS.get(self.kind)
        return found.label if found and found.label else self.kind

    def problems(self) -> list[str]:
        """What stands in the way, one sentence each, every name spelled out."""
        lines = []
        if self.spec_type is None:
            lines.append(f"this llama-server has no --spec-type for {self.label} drafters")
        if self.unknown_tensors:
            lines.append(
                "tensors this llama-server does not know (it refuses the file): "
                + ", ".join(named(list(self.unknown_tensors)))
            )
        if self.unknown_keys:
            lines.append("keys this llama-server does not read: " + ", ".join(self.unknown_keys))
        if self.missing_tensors:
            lines.append(f"tensors a {self.label} file needs that it lacks: " + ", ".join(self.missing_tensors))
        if self.missing_keys:
            lines.append(f"keys a {self.label} file needs that it lacks: " + ", ".join(self.missing_keys))
        return lines

    def fix(self) -> str:
        if self.runs:
            return ""
        found = KINDS.get(self.kind)
        if self.missing_tensors or self.missing_keys:
            return (
                "the file is incomplete or laid out for another llama.cpp: pull it again, or convert the "
                "checkpoint again (docs/dspine-variant.md names what a DSpine file holds)"
            )
        if self.spec_type is None:
            return found.install_hint if found else "install a llama.cpp that runs it"
        return (
            "the file is laid out for another llama.cpp (a fork): run the llama.cpp it was made for, "
            "or convert the checkpoint again in the layout dspine's llama-server reads"
        )


def check_file(header: GgufHeader, spec_types: tuple[str, ...]) -> FileCheck:
    """The file's kind, and what a llama-server with these --spec-type names makes of it."""
    kind = kind_of_header(header)
    spec_type = runs_kind(kind, spec_types)
    found = KINDS[kind]
    if found.layout is None:  # a plain draft model: any llama.cpp model, nothing to compare
        return FileCheck(header.source, kind, spec_type)
    missing, missing_keys = missing_from(found.layout, header)
    unknown: list[str] = []
    unknown_keys: list[str] = []
    if header.architecture == FAMILY_ARCH or kind == "dspine":
        family = [KINDS[k].layout for k in FAMILY]
        served = [KINDS[k].layout for k in FAMILY if runs_kind(k, spec_types)]
        # A server that runs none of the family refuses the file for that alone: naming every
        # tensor would bury the one line that matters.
        if served:
            known = frozenset().union(*(lay.tensors for lay in served if lay))
            known_keys = frozenset().union(*(lay.keys for lay in served if lay))
            family_keys = frozenset().union(*(lay.keys for lay in family if lay))
            unknown = [t.name for t in header.tensors if template(t.name) not in known]
            unknown_keys = [k for k in header.metadata if k in family_keys and k not in known_keys]
    return FileCheck(
        header.source, kind, spec_type, tuple(unknown), tuple(unknown_keys), tuple(missing), tuple(missing_keys)
    )
