"""The memory arithmetic on the shapes of real models, worked out by hand.

Qwen3.8-27B (qwen35 hybrid): 64 blocks, every 4th full attention (16 keep a KV
cache), 4 KV heads of 256; 48 Gated-DeltaNet blocks with 16 QK heads, 48 V
heads of 128, conv kernel 4. Qwen3-8B: 36 dense blocks, 8 KV heads of 128.
Both written as GGUF headers without weights.
"""

import pytest

from app.fit.memory import ComputeCurve, Runtime, compute_estimate, footprint, kv_cache, recurrent_state, weights
from app.fit.shape import shape_from_header
from backends.gguf_header import read_local
from tests.support.gguf_models import qwen3_8b, qwen38_27b, write_header_only

GiB = 2**30


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path = write_header_only(tmp_path_factory.mktemp("h") / "qwen38-27b.gguf", qwen38_27b())
    return shape_from_header(read_local(path))


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    path = write_header_only(tmp_path_factory.mktemp("h") / "qwen3-8b.gguf", qwen3_8b())
    return shape_from_header(read_local(path))


def test_hybrid_shape(big):
    assert big.n_layer == 64 and big.n_layer_nextn == 1 and big.has_mtp
    assert big.kv_layers == tuple(range(3, 64, 4))
    assert len(big.recurrent_layers) == 48
    assert big.n_vocab == 248320 and big.n_ctx_train == 262144


def test_hybrid_kv_cache_per_type(big):
    # 16 blocks x (K + V) x 4 heads x 256 values: f16 2 bytes each = 64 KiB per token.
    assert kv_cache(big, Runtime(n_ctx=32768)).gpu == 32768 * 16 * 2 * 1024 * 2 == 2 * GiB
    # q8_0: 34 bytes per 32 values; q4_0: 18 bytes per 32 values.
    assert kv_cache(big, Runtime(n_ctx=32768, type_k="q8_0", type_v="q8_0")).gpu == 32768 * 16 * 2 * 1024 // 32 * 34
    assert kv_cache(big, Runtime(n_ctx=32768, type_k="q4_0", type_v="q4_0")).gpu == 32768 * 16 * 2 * 1024 // 32 * 18
    # llama.cpp pads the context to 256 cells.
    assert kv_cache(big, Runtime(n_ctx=1000)).gpu == 1024 * 65536


def test_hybrid_recurrent_state_does_not_grow_with_context(big):
    conv = 4 * (4 - 1) * (6144 + 2 * 16 * 128)  # f32, kernel-1 columns of the conv input
    delta = 4 * 128 * 6144  # f32, one 128 x 128 state per V head
    per_row = 48 * (conv + delta)
    assert per_row == 156_893_184
    assert recurrent_state(big, Runtime(n_ctx=4096)).gpu == per_row
    assert recurrent_state(big, Runtime(n_ctx=262144)).gpu == per_row
    # Speculative rollback keeps snapshots: one more row each.
    assert recurrent_state(big, Runtime(n_ctx=4096, n_rs_seq=4)).gpu == 5 * per_row


def test_hybrid_weights_and_placement(big):
    embd = 5120 * 248320 // 256 * 144  # Q4_K: 144 bytes per 256 values
    assert big.token_embd_bytes == embd == 715_161_600
    assert big.output_bytes == embd + 5120 * 4  # output matrix + its f32 norm
    ffn = 3 * 5120 * 17408 // 256 * 144
    attn = (5120 * 24 * 256 * 2 + 2 * 5120 * 4 * 256 + 24 * 256 * 5120) // 256 * 144
    norms = (2 * 5120 + 2 * 256) * 4
    assert big.block_bytes[3] == ffn + attn + norms
    full = weights(big, Runtime(n_ctx=4096))
    assert full.cpu == embd  # the input embedding always stays in RAM
    assert full.gpu == sum(big.block_bytes) + big.output_bytes  # MTP blocks only load for MTP drafting
    assert weights(big, Runtime(n_ctx=4096, load_mtp=True)).gpu == full.gpu + big.nextn_bytes
    # -ngl 33 puts the last 32 blocks and the output layer on the GPU.
    part = Runtime(n_ctx=4096, gpu_layers=33)
    assert weights(big, part).gpu == sum(big.block_bytes[32:]) + big.output_bytes
    assert kv_cache(big, part).gpu == 8 * 4096 * 4096 and kv_cache(big, part).cpu == 8 * 4096 * 4096
    assert recurrent_state(big, part).gpu == 24 * 156_893_184 // 48


def test_dense_kv_cache(dense):
    # 36 blocks x (K + V) x 8 heads x 128 values x 2 bytes = 144 KiB per token.
    assert kv_cache(dense, Runtime(n_ctx=40960)).gpu == 40960 * 36 * 2 * 8 * 128 * 2
    assert recurrent_state(dense, Runtime(n_ctx=40960)).gpu == 0


def test_sliding_window_caps_the_kv_cache(dense):
    windowed = Runtime(n_ctx=65536, window=8192)
    per_cell = 36 * 2 * 8 * 128 * 2
    assert kv_cache(dense, windowed).gpu == (8192 + 512) * per_cell  # window + one ubatch
    assert kv_cache(dense, Runtime(n_ctx=4096, window=8192)).gpu == 4096 * per_cell


def test_compute_estimate_terms(big):
    logits = 248320 * 512 * 4 + 3 * 5120 * 512 * 4  # a whole ubatch of output rows (llama-cpp-python)
    mask = 16384 * 512 * 2
    assert compute_estimate(big, Runtime(n_ctx=16384)) == logits + mask
    # llama-server verifying a 16-token draft keeps 17 rows: one block's activations dominate.
    gdn_block = int(512 * (9.32 * 17408 + 12 * 5120 + 55_000))
    assert compute_estimate(big, Runtime(n_ctx=16384, n_outputs=17)) == gdn_block + mask
    kq = 16384 * 512 * 24 * 4  # without flash attention: the full KQ matrix of one block
    assert compute_estimate(big, Runtime(n_ctx=16384, flash_attn=False)) > kq


def test_compute_curve_interpolates_and_extends():
    curve = ComputeCurve(((4096, 100), (16384, 200)), n_ubatch=512, flash_attn=True, n_outputs=1)
    assert curve.at(1024) == 100
    assert curve.at(10240) == 150
    # Past the last point: at least the mask's growth (2 bytes x ubatch per token).
    assert curve.at(16384 + 1000) == 200 + 1000 * 1024
    big_curve = ComputeCurve(((4096, 0), (8192, 4096 * 2000)), n_ubatch=512, flash_attn=True, n_outputs=1)
    assert big_curve.at(9192) == 4096 * 2000 + 1000 * 2000


def test_footprint_sums(big):
    used = footprint(big, Runtime(n_ctx=8192))
    assert used.gpu_total(True) == used.weights.gpu + used.kv.gpu + used.recurrent.gpu + used.compute


def test_a_dspine_drafters_code_table_stays_on_the_host_and_the_rest_goes_with_its_head(tmp_path):
    """llama.cpp places DSpine's code table as it places token_embd (read by id, host memory)
    and fc, its norm and DSpine's shared message and gates with the output layer (GPU)."""
    from tests.support.gguf_models import qwen38_27b_drafter

    header = read_local(write_header_only(tmp_path / "dspine.gguf", qwen38_27b_drafter()))
    shape = shape_from_header(header)
    assert shape.drafter_kind == "dspine"
    sizes = {t.name: t.n_bytes for t in header.tensors}
    codes, embd = sizes["dspine_codes.weight"], sizes["token_embd.weight"]
    split = weights(shape, Runtime(n_ctx=4096))
    assert split.cpu == codes + embd  # both gathered by id
    # everything else on the GPU, and the embedding again there as the head (this file has no output.weight)
    assert split.gpu == sum(sizes.values()) - codes
    assert sizes["fc.weight"] > 0 and sizes["dspine_message.weight"] > 0  # both counted on the GPU side


def test_a_code_table_placed_on_the_device_counts_on_the_gpu(tmp_path):
    """The code_table_device setting moves DSpine's table next to the drafter's head."""
    from tests.support.gguf_models import qwen38_27b_drafter

    shape = shape_from_header(read_local(write_header_only(tmp_path / "dspine.gguf", qwen38_27b_drafter())))
    host = weights(shape, Runtime(n_ctx=4096))
    device = weights(shape, Runtime(n_ctx=4096, code_table_on_gpu=True))
    assert shape.code_table_bytes > 0
    assert device.gpu == host.gpu + shape.code_table_bytes and device.cpu == host.cpu - shape.code_table_bytes
