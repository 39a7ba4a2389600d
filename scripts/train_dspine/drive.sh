#!/bin/sh
# The whole run of issues 48 and 70, resumable: rerun it after a stop (or on a new machine, after
# the venv and the target GGUF of docs/training-dspine.md) and it goes on from the checkpoints.
# Continuations in the background, one chunk of 100 prompts at a time, each committed to the
# repository as it finishes (scripts/train_dspine/continuations/: a new machine starts from them,
# never generates them twice; PROMPTS of the corpus's first prompts). Then, until STEPS: the
# feature shards of what is there so far, and both variants CHUNK more steps on the same data and
# seeds; then the last shards, `evaluate` and `export`. One thread each: the machine is shared.
#   RUNS=/work/train-runs SERVER=.../llama-server nohup sh scripts/train_dspine/drive.sh > RUNS/drive.log &
# INIT_FROM=assets/drafters/smollm2-135m-dspine.Q8_0.gguf (a path from the repository's root)
# starts a new run's DSpine variant from the drafter that ships rather than from the target's
# blocks: what an earlier session trained and shipped is where this one goes on.
RUNS=${RUNS:-/work/train-runs}
STEPS=${STEPS:-3000}
CHUNK=${CHUNK:-150}
PYTHON=${PYTHON:-/work/train-venv/bin/python}
cd "$(dirname "$0")/.." || exit 1
export XLA_FLAGS=--xla_cpu_multi_thread_eigen=false OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
run() { nice -n 19 "$PYTHON" -m train_dspine "$@" --runs "$RUNS"; }
init=""
case "$INIT_FROM" in
  "") ;;
  /*) init="--init-from $INIT_FROM" ;;
  *) init="--init-from ../$INIT_FROM" ;;  # from the repository's root; this runs in scripts/
esac
PROMPTS=${PROMPTS:-1000}
if [ -n "$SERVER" ]; then
  (
    while run continuations --server "$SERVER" --prompts "$PROMPTS" --chunks 1 | tee -a "$RUNS/data.log" |
        grep -q "wrote chunk-"; do
      git add train_dspine/continuations && git commit -q -m "train_dspine: a chunk of continuations" \
        -- train_dspine/continuations
    done
  ) &
fi
while :; do
  done_steps=$("$PYTHON" -c "import json, sys
steps = []
for v in ('dspine', 'dflash'):
    try:
        steps.append(json.load(open(f'$RUNS/{v}/checkpoint/state.json'))['step'])
    except OSError:
        steps.append(0)
print(min(steps))")
  [ "$done_steps" -ge "$STEPS" ] && break
  run features || exit 1
  # shellcheck disable=SC2086
  run train --steps "$STEPS" --stop-at $((done_steps + CHUNK)) --minutes 600 $init || exit 1
done
wait
run features
run evaluate
run export
