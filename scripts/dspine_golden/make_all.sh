#!/usr/bin/env bash
# Golden data for DSpine from the authors' reference (SpecForge's DSpineDraftModel), into
# tests/engines/golden/dspine/. Run by a developer, once, outside the project's venv and CI:
#
#   scripts/dspine_golden/make_all.sh REFERENCE_DIR VENV_PYTHON
#
# REFERENCE_DIR holds specforge/modeling/draft/{dspine,dflash,dflash_kernels,registry}.py from
# sgl-project/SpecForge and empty __init__.py files in specforge/, specforge/modeling/ and
# specforge/modeling/draft/ (docs/dspine-golden.md names the commits). VENV_PYTHON is a
# Python with torch 2.13.0 (CPU), transformers and safetensors: none of them, and none of
# the reference's code, is part of dspine. The output is deterministic for one torch build.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/../../tests/engines/golden/dspine"
reference="${1:?give the folder that holds specforge/}"
python="${2:?give the python of a venv with torch, transformers and safetensors}"
mkdir -p "$out"
for seed in 0 1 2; do
    "$python" "$here/make_golden.py" --reference "$reference" --seed "$seed" --block 16 \
        --out "$out/dspine-s$seed-b16.npz" --ckpt "$out/ckpt-s$seed-b16"
done
"$python" "$here/make_golden.py" --reference "$reference" --seed 0 --block 4 --out "$out/dspine-s0-b4.npz" --no-ckpt
# Only one checkpoint folder is kept in the repository: the converter's tests read seed 0.
rm -rf "$out/ckpt-s1-b16" "$out/ckpt-s2-b16"

# Drafts the patched llama-server must make: the same reference on a real tiny target's inputs
# (made first in dspine's venv: .venv/bin/python scripts/dspine_golden/make_inputs.py).
server="$out/server"
for seed in 0 1 2; do
    "$python" "$here/make_golden.py" --reference "$reference" --seed "$((seed + 10))" --block 16 \
        --inputs "$server/inputs-s$seed.npz" --mask-token 299 --taps 0,1 \
        --out "$server/dspine-s$seed.npz" --ckpt "$server/ckpt-s$seed"
done
# The same inputs through a drafter whose every layer slides over 8 positions (the 12-token prompt's
# context features and the block alike): the window decides what the drafts attend to.
for seed in 0 1 2; do
    "$python" "$here/make_golden.py" --reference "$reference" --seed "$((seed + 10))" --block 16 \
        --inputs "$server/inputs-s$seed.npz" --mask-token 299 --taps 0,1 --window 8 \
        --out "$server/dspine-w8-s$seed.npz" --ckpt "$server/ckpt-w8-s$seed"
done
rm -f "$server"/inputs-s*.npz  # the outputs hold every input; make_inputs.py makes them again
