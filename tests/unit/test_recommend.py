"""The one drafter recommendation (issue 35, item 5): the drafter the llama-server found
here runs, from the catalog entry, what is pulled and the server's --spec-type names."""

from __future__ import annotations

from dataclasses import replace

from app.models.catalog import load_catalog, parse_catalog
from app.models.recommend import Pulled, ordered, recommend
from backends.drafter_files import check_file
from backends.gguf_header import read_local
from tests.support.gguf_models import QTYPE, qwen38_27b_drafter, write_header_only

UPSTREAM = ("none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark")
PATCHED = (*UPSTREAM, "draft-dspine")
OLD = ("none", "draft-simple")


def bundle():
    return load_catalog().find("qwen3.8-27b")


def test_upstream_gets_dflash2_not_the_dspine_drafter_it_refuses():
    chosen = recommend(bundle(), UPSTREAM)
    assert chosen.drafter == "dflash2-q4" and chosen.kind == "dflash"
    assert "DFlash2" in chosen.why and "draft-dflash" in chosen.why
    assert any(p.startswith("dspine: ") and "draft-dspine" in p for p in chosen.passed_over)


def test_the_patched_server_gets_the_authors_dspine():
    chosen = recommend(bundle(), PATCHED)
    assert chosen.drafter == "dspine" and chosen.kind == "dspine" and chosen.passed_over == ()


def test_a_pulled_dspine_file_in_a_layout_the_server_refuses_falls_back_and_says_why(tmp_path):
    broken = replace(qwen38_27b_drafter(QTYPE.Q4_K), n_vocab=1000, drop_tensors=("blk.1.dspine_write.weight",))
    check = check_file(read_local(write_header_only(tmp_path / "d.gguf", broken)), PATCHED)
    # The community's GGUF in its fork's layout: the authors' checkpoint (another repository) is
    # what to pull instead (issue 67; it was DFlash2, as if no DSpine could run here).
    chosen = recommend(bundle(), PATCHED, Pulled("dspine-gguf", check))
    assert chosen.drafter == "dspine" and "already pulled" not in chosen.why
    assert any(p.startswith("dspine-gguf: ") and "blk.1.dspine_write.weight" in p for p in chosen.passed_over)
    good = check_file(read_local(write_header_only(tmp_path / "g.gguf", qwen38_27b_drafter(QTYPE.Q4_K))), PATCHED)
    kept = recommend(bundle(), PATCHED, Pulled("dspine-gguf", good))
    assert kept.drafter == "dspine-gguf" and "already pulled" in kept.why  # nothing fetched again
    unread = recommend(bundle(), PATCHED, Pulled("dspine-gguf", None))  # an interrupted pull: not "already"
    assert unread.drafter == "dspine" and "already pulled" not in unread.why
    converted = recommend(bundle(), PATCHED, Pulled("dspine-bf16", good))
    assert converted.drafter == "dspine-bf16" and "already pulled" in converted.why
    # A converted file the server refuses: its sibling from the same checkpoint is passed over too.
    refused = recommend(bundle(), PATCHED, Pulled("dspine-bf16", check))
    assert refused.drafter == "dspine-gguf"
    assert any(p.startswith("dspine: ") and "same repository" in p for p in refused.passed_over)


def test_mtp_needs_a_target_that_carries_the_head():
    only_mtp = ("none", "draft-mtp")
    assert recommend(bundle(), only_mtp, Pulled(target_mtp_head=True)).drafter == "mtp"
    without = recommend(bundle(), only_mtp, Pulled(target_mtp_head=False))
    assert without.drafter == "none" and any("carries no MTP head" in p for p in without.passed_over)
    unknown = recommend(bundle(), only_mtp)
    assert unknown.drafter == "none" and any("once it is pulled" in p for p in unknown.passed_over)


def test_an_old_server_or_none_at_all_gets_what_it_can_run():
    assert recommend(bundle(), OLD).drafter == "none"
    qwen3 = load_catalog().find("qwen3-8b")
    assert recommend(qwen3, OLD).drafter == "qwen3-0.6b"
    alone = recommend(qwen3, None)
    assert alone.drafter == "qwen3-0.6b" and "in-process" in alone.why
    nothing = recommend(bundle(), None)
    assert nothing.drafter == "none" and "install" in nothing.why


CATALOG = """
[bundles.b]
default_drafter = "plain"
[bundles.b.target]
repo = "o/t"
quants = { Q4_K_M = "*Q4_K_M*.gguf" }
[bundles.b.drafters.plain]
kind = "draft"
repo = "o/p"
pattern = "*.gguf"
[bundles.b.drafters.spark]
kind = "dspark"
repo = "o/s"
pattern = "*.gguf"
[bundles.b.drafters.dflash]
kind = "dflash"
repo = "o/d"
pattern = "*.gguf"
"""


def test_a_new_catalog_drafter_joins_the_order_by_its_kind_after_the_default():
    entry = parse_catalog(CATALOG, "test").find("b")
    assert [d.variant for d in ordered(entry)] == ["plain", "dflash", "spark"]
    assert recommend(entry, UPSTREAM).drafter == "plain"  # the catalog's default, where it runs
    assert recommend(entry, ("draft-dspark",)).drafter == "spark"
