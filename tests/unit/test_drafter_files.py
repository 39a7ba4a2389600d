"""Drafter kinds read from what a GGUF holds (issue 36, item 3), and whether a llama-server
runs the file, each unknown or missing tensor and key named (item 4). Generated headers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.fit.shape import drafter_kind, shape_from_header
from backends.drafter_files import check_file, has_mtp_head, kind_of_header, named
from backends.drafters import DSPINE_INJECTION, KINDS
from backends.gguf_header import read_local
from tests.support.gguf_models import QTYPE, Shape, qwen38_27b, qwen38_27b_drafter, write_header_only

# The pinned llama-server's --spec-type list, and the same with dspine's DSpine patch.
UPSTREAM = ("none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark", "ngram-simple")
PATCHED = (*UPSTREAM, "draft-dspine")


def drafter(tmp_path, variant: str, **changes):
    shape = replace(qwen38_27b_drafter(QTYPE.Q4_K, variant), n_vocab=1000, **changes)
    return read_local(write_header_only(tmp_path / f"{variant}.gguf", shape))


@pytest.mark.parametrize(
    ("variant", "kind"), [("dflash", "dflash"), ("dflash2", "dflash"), ("dspark", "dspark"), ("dspine", "dspine")]
)
def test_the_dflash_family_is_told_apart_by_its_tensors(tmp_path, variant, kind):
    header = drafter(tmp_path, variant)
    assert header.architecture == "dflash"  # one architecture for all four
    assert kind_of_header(header) == kind
    assert drafter_kind(shape_from_header(header)) == kind


def test_a_target_with_an_mtp_head_reads_as_mtp_and_one_without_as_a_draft_model(tmp_path):
    with_head = read_local(write_header_only(tmp_path / "t.gguf", qwen38_27b(nextn=1)))
    without = read_local(write_header_only(tmp_path / "n.gguf", qwen38_27b(nextn=0)))
    assert has_mtp_head(with_head) and kind_of_header(with_head) == "mtp"
    assert shape_from_header(with_head).has_mtp
    assert not has_mtp_head(without) and kind_of_header(without) == "draft"
    assert not shape_from_header(without).has_mtp
    small = read_local(write_header_only(tmp_path / "s.gguf", Shape(arch="llama")))
    assert kind_of_header(small) == "draft"


def test_the_pinned_server_runs_dflash2_and_dspark_files(tmp_path):
    for variant in ("dflash", "dflash2", "dspark"):
        check = check_file(drafter(tmp_path, variant), UPSTREAM)
        assert check.runs and check.problems() == [] and check.fix() == ""
    assert check_file(drafter(tmp_path, "dspark"), UPSTREAM).spec_type == "draft-dspark"


def test_a_dspine_file_on_upstream_names_every_tensor_and_key_it_does_not_know(tmp_path):
    check = check_file(drafter(tmp_path, "dspine"), UPSTREAM)
    assert check.kind == "dspine" and not check.runs and check.spec_type is None
    assert set(check.unknown_tensors) == {
        *(f"blk.{i}.dspine_{part}.weight" for i in range(5) for part in ("readout", "write")),
        "dspine_message.weight",
        "dspine_receiver_gate.weight",
        "dspine_predecessor_gate.weight",
        "dspine_gate.bias",
        "dspine_codes.weight",
    }
    assert check.unknown_keys == ("dflash.dspine.top_k",)
    text = "\n".join(check.problems())
    assert "no --spec-type for DSpine" in text and "blk.N.dspine_readout.weight (N = 0-4)" in text
    assert "draft-dspine" in check.fix()


def test_a_complete_dspine_file_runs_on_the_patched_server(tmp_path):
    check = check_file(drafter(tmp_path, "dspine"), PATCHED)
    assert check.runs and check.spec_type == "draft-dspine" and check.problems() == []


def test_a_dspine_file_missing_a_tensor_names_it(tmp_path):
    check = check_file(drafter(tmp_path, "dspine", drop_tensors=("blk.2.dspine_write.weight",)), PATCHED)
    assert not check.runs and check.missing_tensors == ("blk.2.dspine_write.weight",)
    assert "blk.2.dspine_write.weight" in check.problems()[0] and "convert" in check.fix()
    shared = check_file(drafter(tmp_path, "dspine", drop_tensors=("dspine_receiver_gate.weight",)), PATCHED)
    assert shared.missing_tensors == ("dspine_receiver_gate.weight",)
    trunk = check_file(drafter(tmp_path, "dspine", drop_tensors=("fc.weight",)), PATCHED)
    assert trunk.missing_tensors == ("fc.weight",)


def test_a_forked_layout_names_the_tensors_no_server_here_reads(tmp_path):
    forked = drafter(tmp_path, "dspine", extra_tensors=("blk.0.spine_bridge.weight",))
    check = check_file(forked, PATCHED)
    assert check.unknown_tensors == ("blk.0.spine_bridge.weight",) and "another llama.cpp" in check.fix()


def test_dflash2_without_its_keys_or_convolutions_is_named(tmp_path):
    check = check_file(drafter(tmp_path, "dflash2", drop_tensors=("blk.4.ffn_conv_proj.weight",)), UPSTREAM)
    assert check.missing_tensors == ("blk.4.ffn_conv_proj.weight",)


def renamed(header, arch: str):
    """The header as if its writer had called the architecture `arch` (its keys with it)."""
    meta = {(arch + k.removeprefix("dflash") if k.startswith("dflash.") else k): v for k, v in header.metadata.items()}
    return replace(header, metadata={**meta, "general.architecture": arch})


def test_a_file_with_dspines_code_table_is_dspine_whatever_its_architecture(tmp_path):
    header = renamed(drafter(tmp_path, "dspine"), "dspine")
    assert header.architecture == "dspine" and kind_of_header(header) == "dspine"
    check = check_file(renamed(drafter(tmp_path, "dspine", drop_tensors=("dspine_gate.bias",)), "dspine"), PATCHED)
    assert check.kind == "dspine" and check.missing_tensors == ("dspine_gate.bias",)
    assert "dspine_gate.bias" in "\n".join(check.problems())


def test_the_dspine_names_mirror_the_variant_doc_and_the_converter():
    from pathlib import Path

    from app.hub.convert import INJECTION_LISTS, ROOT_NAMES

    source = Path(__file__).resolve().parents[2] / "backends" / "drafters.py"
    doc = (Path(__file__).resolve().parents[2] / "docs" / "dspine-variant.md").read_text()
    layout = KINDS["dspine"].layout
    assert layout is not None
    written = {f"blk.N.{n}.weight" for n in INJECTION_LISTS.values()} | set(ROOT_NAMES.values())
    for name in layout.tensors - KINDS["dflash"].layout.tensors:  # type: ignore[union-attr]
        assert f"`{name}`" in doc and name in written
        line = next(x for x in source.read_text().splitlines() if f'"{name}"' in x)
        assert "SpecForge" in line  # the reference's own name beside it
    assert set(DSPINE_INJECTION) <= layout.tensors


def test_names_are_gathered_by_block():
    assert named(["blk.0.a.weight", "blk.1.a.weight", "blk.3.b", "fc.weight"]) == [
        "blk.N.a.weight (N = 0-1)",
        "blk.3.b",
        "fc.weight",
    ]
    assert named(["blk.0.a", "blk.2.a"]) == ["blk.N.a (N = 0, 2)"]
