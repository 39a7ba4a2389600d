#!/usr/bin/env bash
# dspine's one test command, used by README.md and .ci/run: install into .venv, lint, format
# check, types, tests. Arguments go to pytest: `bash scripts/test.sh tests/unit` is the fast
# layer, `bash scripts/test.sh -m "not slow"` leaves out what takes minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv

# pip runs again whenever pyproject.toml (dependencies, extras, packages) or this install line
# changes: the install is editable, so nothing else can make it stale. Deleting the stamp
# forces it. pip's wheel cache stays on, so llama-cpp-python's source build (about 11 minutes)
# happens once per machine.
cmake_args="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF"
stamp=.venv/dspine-test-install
wanted="$(cksum < pyproject.toml) $cmake_args"
if [ "$(cat "$stamp" 2>/dev/null)" = "$wanted" ]; then
    echo "+ pip install skipped: .venv already holds this pyproject.toml (rm $stamp to force it)"
else
    rm -f "$stamp"
    CMAKE_ARGS="$cmake_args" LLAMA_CPP_BUILD_JOBS=2 CMAKE_BUILD_PARALLEL_LEVEL=2 .venv/bin/pip install -e ".[test]"
    printf '%s\n' "$wanted" > "$stamp"
fi

.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
