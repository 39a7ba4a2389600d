"""The planner on Qwen3.8-27B's shape with DSpine, DFlash2 and MTP drafters,
for the cards people have: 12, 16, 24 and 32 GB."""

from dataclasses import replace

import pytest

from app.fit.planner import AUTO, GPU_DEVICE, MEMORY_KEYS, Option, Wishes, assess, max_context, plan
from app.fit.shape import shape_from_header
from backends.gguf_header import read_local
from tests.support.gguf_models import QTYPE, qwen38_27b, qwen38_27b_drafter, write_header_only

GiB = 2**30


def scaled(shape, factor):
    return replace(
        shape,
        block_bytes=tuple(int(b * factor) for b in shape.block_bytes),
        token_embd_bytes=int(shape.token_embd_bytes * factor),
        output_bytes=int(shape.output_bytes * factor),
    )


@pytest.fixture(scope="module")
def options(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plan")
    q4 = shape_from_header(read_local(write_header_only(folder / "t.gguf", qwen38_27b(QTYPE.Q4_K))))
    # Bits per weight relative to Q4_K (4.5): Q5_K 5.5, Q6_K 6.5625, Q8_0 8.5.
    targets = [
        Option("Q4_K_M", "/m/q4.gguf", q4),
        Option("Q5_K_M", "/m/q5.gguf", scaled(q4, 5.5 / 4.5)),
        Option("Q6_K", "/m/q6.gguf", scaled(q4, 6.5625 / 4.5)),
        Option("Q8_0", "/m/q8.gguf", scaled(q4, 8.5 / 4.5)),
    ]
    bf16 = shape_from_header(read_local(write_header_only(folder / "d.gguf", qwen38_27b_drafter(QTYPE.BF16))))
    drafters = [
        Option("dspine-q4", "/m/dq4.gguf", scaled(bf16, 4.5 / 16), kind="dspine"),
        Option("dspine-bf16", "/m/dbf16.gguf", bf16, kind="dspine"),
        Option("dflash2-q4", "/m/df.gguf", replace(scaled(bf16, 4.5 / 16), arch="dflash"), kind="dflash"),
        Option("mtp", "/m/q4.gguf", None, kind="mtp"),
    ]
    return targets, drafters


def test_24gb_speed_takes_the_best_drafter_then_the_longest_context(options):
    targets, drafters = options
    chosen = plan(targets, drafters, Wishes(budget=24 * GiB))
    assert chosen.fits and chosen.target.label == "Q4_K_M" and chosen.drafter.label == "dspine-bf16"
    assert chosen.n_ctx >= 16384 and chosen.total <= chosen.budget
    # Maximal: one more step of context no longer fits.
    assert not assess(chosen.target, chosen.drafter, chosen.n_ctx + 1024, chosen.kv, Wishes(budget=24 * GiB)).fits
    trade = next(r for r in chosen.reasons if r.startswith("With Q4_K_M"))
    assert "dspine-bf16 leaves" in trade and "dspine-q4 leaves" in trade and "no drafter leaves" in trade
    q4_ctx = max_context(targets[0], drafters[0], "f16", Wishes(budget=24 * GiB))
    assert q4_ctx > chosen.n_ctx  # the smaller drafter leaves more context
    assert set(MEMORY_KEYS) <= set(chosen.memory)
    assert chosen.memory["drafter_kv"] == (8192 + 512) * 5 * 2 * 8 * 128 * 2  # capped by DSpine's window


def test_16gb_cannot_afford_dspine_bf16(options):
    targets, drafters = options
    chosen = plan(targets, drafters, Wishes(budget=16 * GiB))
    assert chosen.fits and chosen.gpu_layers == 65
    assert chosen.drafter is None or chosen.drafter.label != "dspine-bf16"


def test_12gb_spills_layers_and_drops_the_drafter(options):
    targets, drafters = options
    chosen = plan(targets, drafters, Wishes(budget=12 * GiB))
    assert chosen.drafter is None and 0 < chosen.gpu_layers < 65
    assert chosen.ram["target_weights"] > targets[0].shape.token_embd_bytes
    assert any("does not fit whole" in r for r in chosen.reasons)
    # The target alone is what does not fit ("no drafter does not fit" read as a drafter).
    trade = next(r for r in chosen.reasons if r.startswith("With Q4_K_M"))
    assert "the target alone does not fit, even at 1K" in trade and "no drafter does not fit" not in trade


def test_32gb_goal_context_reaches_the_trained_context(options):
    targets, drafters = options
    speed = plan(targets, drafters, Wishes(budget=32 * GiB))
    longest = plan(targets, drafters, Wishes(budget=32 * GiB, goal="context"))
    assert longest.n_ctx >= speed.n_ctx
    assert longest.n_ctx == 262144


def test_fixed_context_picks_the_best_drafter_that_fits_it(options):
    targets, drafters = options
    chosen = plan(targets, drafters, Wishes(budget=24 * GiB, ctx=100 * 1024))
    assert chosen.n_ctx == 100 * 1024 and chosen.fits
    # The drafter counts for more than KV precision: BF16 stays, with a q8_0 KV cache.
    assert chosen.drafter.label == "dspine-bf16" and chosen.kv == "q8_0"
    longer = plan(targets, drafters, Wishes(budget=24 * GiB, ctx=160 * 1024))
    assert longer.n_ctx == 160 * 1024 and longer.fits and longer.drafter.label == "dspine-q4"


def test_no_gpu_is_a_cpu_plan(options):
    targets, drafters = options
    chosen = plan(targets, drafters, Wishes(budget=0))
    assert chosen.gpu_layers == 0 and chosen.drafter is None and chosen.total == 0
    assert "No NVIDIA GPU found" in chosen.reasons[0]


def test_plan_maps_onto_llama_server_flags(options):
    targets, drafters = options
    chosen = plan(targets, drafters, Wishes(budget=24 * GiB, kv="q8_0"))
    args = chosen.server_args()
    assert args[args.index("-c") + 1] == str(chosen.n_ctx)
    assert args[args.index("-ctk") + 1] == "q8_0" and args[args.index("-ctv") + 1] == "q8_0"
    assert args[args.index("-md") + 1] == chosen.drafter.path and args[args.index("-ngld") + 1] == "6"
    data = chosen.to_json()
    assert set(data) >= {"settings", "memory", "budget", "fits", "reasons"}
    assert data["memory"]["total"] == sum(chosen.memory.values())
    assert data["settings"]["kv_type"] == "q8_0" and data["settings"]["drafter"] == chosen.drafter.label


def test_hybrid_target_counts_a_state_copy_per_drafted_token(options):
    """llama-server gives a hybrid target 1 + n_max copies of its recurrent state for the
    kinds it snapshots for; fit counts them, and says so."""
    targets, drafters = options
    per_copy = targets[0].shape.rs_bytes_per_row
    by_label = {d.label: d for d in drafters}
    wishes = Wishes(budget=32 * GiB)
    for label, n_max in (("dspine-bf16", 15), ("dflash2-q4", 7), ("mtp", 2)):
        assessed = assess(targets[0], by_label[label], 32768, "f16", wishes)
        assert assessed.draft_n_max == n_max and assessed.state_copies == 1 + n_max
        assert assessed.memory["recurrent_state"] == (1 + n_max) * per_copy
    alone = assess(targets[0], None, 32768, "f16", wishes)
    assert alone.memory["recurrent_state"] == per_copy and alone.state_copies == 1
    chosen = plan(targets, [by_label["dflash2-q4"]], wishes)
    assert any("8 copies of that state" in r for r in chosen.reasons)
    # A plain draft model (draft-simple) keeps no snapshots.
    plain = replace(by_label["dflash2-q4"], kind="draft", label="small")
    assert assess(targets[0], plain, 32768, "f16", wishes).memory["recurrent_state"] == per_copy
    # The in-process engine keeps two sequences of 1 + (n_max + 1) copies each.
    inproc = assess(targets[0], plain, 32768, "f16", replace(wishes, in_process=True))
    assert inproc.draft_n_max == 3 and inproc.memory["recurrent_state"] == 2 * (1 + 4) * per_copy


def test_short_memory_trades_draft_length_for_context(options):
    """On 20 GB DSpine BF16 at 16 leaves no room; each step shorter frees one state copy,
    and the plan takes the longest length that leaves the context asked for, and says so."""
    targets, drafters = options
    bf16 = next(d for d in drafters if d.label == "dspine-bf16")
    wishes = Wishes(budget=20 * GiB)
    assert max_context(targets[0], bf16, "f16", wishes) < 16384
    chosen = plan(targets[:1], [bf16], wishes)
    assert chosen.fits and chosen.drafter is bf16 and chosen.n_ctx >= 16384
    assert 1 <= chosen.draft_n_max < 15
    # The longest such: one step more no longer leaves 16K.
    assert max_context(targets[0], bf16, chosen.kv, wishes, n_max=chosen.draft_n_max + 1) < 16384
    assert any(r.startswith(f"Draft length {chosen.draft_n_max}, not dspine's 15") for r in chosen.reasons)
    args = chosen.server_args()
    assert args[args.index("--spec-draft-n-max") + 1] == str(chosen.draft_n_max)
    # A length the user fixed is counted as asked, never shortened.
    fixed = plan(targets[:1], [bf16], replace(wishes, n_max=16))
    assert fixed.drafter is None or fixed.draft_n_max == 16


def test_mtp_counts_the_heads_weights_and_its_kv_block(options):
    """Issue 35, item 4: drafting with the target's own head costs its nextn weights and one
    more full-attention KV block (the snapshots' rows are the planner's own part)."""
    targets, drafters = options
    mtp = next(d for d in drafters if d.kind == "mtp")
    shape = targets[0].shape
    assert shape.has_mtp and shape.nextn_bytes > 0
    plan = assess(targets[0], mtp, 16384, "f16", Wishes(budget=32 * GiB))
    assert plan.memory["drafter_weights"] == shape.nextn_bytes
    assert plan.memory["drafter_kv"] == 16384 * 2 * 4 * 256 * 2  # one block: K and V, 4 heads x 256, f16
    plain = assess(targets[0], None, 16384, "f16", Wishes(budget=32 * GiB))
    assert plan.total > plain.total + shape.nextn_bytes


def test_auto_puts_the_dspine_code_table_on_the_gpu_where_it_costs_little_context(options):
    targets, drafters = options
    host = plan(targets, drafters, Wishes(budget=24 * GiB))  # the setting says host
    auto = plan(targets, drafters, Wishes(budget=24 * GiB, code_table_device=AUTO))
    table = auto.drafter.shape.code_table_bytes
    assert table > 0 and host.code_table_device is None
    assert auto.code_table_device == GPU_DEVICE and auto.fits
    assert (auto.target.label, auto.drafter.label, auto.kv) == (host.target.label, host.drafter.label, host.kv)
    assert auto.memory["drafter_weights"] == host.memory["drafter_weights"] + table
    assert host.n_ctx - 4096 <= auto.n_ctx <= host.n_ctx  # the table's bytes, a step or two of context
    said = next(r for r in auto.reasons if "code table" in r)
    assert "goes on the GPU (CUDA0)" in said and ("tokens of context" in said) == (auto.n_ctx < host.n_ctx)
    assert r"dspine_codes\.weight=CUDA0" in auto.server_args()


def test_auto_keeps_the_code_table_on_the_host_where_the_gpu_has_no_room_for_it(options):
    targets, drafters = options
    host = plan(targets, drafters, Wishes(budget=24 * GiB, ctx=32768))
    # The budget that leaves this plan just under the table's bytes of headroom.
    tight = host.total - host.memory["margin"] + 512 * 2**20 + host.drafter.shape.code_table_bytes // 2
    wishes = Wishes(budget=tight, ctx=32768, code_table_device=AUTO)
    chosen = plan(targets, [d for d in drafters if d.label == host.drafter.label], wishes)
    assert chosen.fits and chosen.drafter.label == host.drafter.label and chosen.code_table_device is None
    said = next(r for r in chosen.reasons if "code table" in r)
    # At this context the table only fits beside a smaller KV cache, which the host plan keeps.
    assert f"stays in host memory (there, the plan would give up the {host.kv} KV cache)" in said
    assert "--override-tensor-draft" not in chosen.server_args()


def test_no_gpu_or_no_dspine_drafter_says_nothing_of_a_code_table(options):
    targets, drafters = options
    for chosen in (
        plan(targets, drafters, Wishes(budget=0, code_table_device=AUTO)),
        plan(targets, [d for d in drafters if d.kind != "dspine"], Wishes(budget=24 * GiB, code_table_device=AUTO)),
    ):
        assert chosen.code_table_device is None and not any("code table" in r for r in chosen.reasons)


def test_the_code_table_stays_on_the_host_where_the_plan_would_give_something_up_for_it(options):
    targets, drafters = options
    # The authors' table (248,320 x rank 1,024 at Q8_0: about 270 MB), more than a step of context.
    bf16 = next(d for d in drafters if d.label == "dspine-bf16")
    dspine_only = [replace(bf16, shape=replace(bf16.shape, code_table_bytes=270 * 2**20))]
    longest = plan(targets, dspine_only, Wishes(budget=24 * GiB))
    wishes = Wishes(budget=24 * GiB, min_ctx=longest.n_ctx, code_table_device=AUTO)  # no context to spare
    device = plan(targets, dspine_only, replace(wishes, code_table_device=GPU_DEVICE))
    chosen = plan(targets, dspine_only, wishes)
    # With the table there, the minimum context takes a smaller KV cache: the host keeps it.
    assert device.fits and device.kv != longest.kv
    assert chosen.code_table_device is None and chosen.drafter.label == "dspine-bf16"
    assert (chosen.kv, chosen.n_ctx) == (longest.kv, longest.n_ctx)
    said = next(r for r in chosen.reasons if "code table" in r)
    assert f"stays in host memory (there, the plan would give up the {longest.kv} KV cache)" in said
