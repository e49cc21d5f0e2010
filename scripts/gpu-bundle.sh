#!/usr/bin/env bash
# gpu-bundle.sh: builds kiln here and packs what a bare GPU machine needs to
# test and benchmark it into bundle/ (git-ignored): the programs, the shared
# libraries they load beyond glibc, and the ONNX conformance models.
#
#   scripts/gpu-bundle.sh            make -j2 in build/, then bundle/
#   BUILD=build-x scripts/gpu-bundle.sh
#
# bundle/ holds:
#   kiln conformance test_ops gpu_smoke [gpu_runtime] [gpu_gemm]
#   lib/                  libprotobuf-c, libsqlite3, libz... (what ldd lists beyond glibc)
#   env.sh                `. bundle/env.sh` puts lib/ on LD_LIBRARY_PATH
#   onnx-testdata.tar.gz  node/ pytorch-converted/ pytorch-operator/ simple/ from
#                         $KILN_ONNX_TESTDATA (default /usr/share/libonnx-testdata/data)
#   MANIFEST              commit, date, sizes, the newest glibc symbol the programs need
# Then, on the GPU machine, from the repository root: scripts/gpu-tests.sh
# (the device tool: carry ["bundle"]; the working tree and bundle together
# must stay under 64 MiB, which this script checks).
set -u
set -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
OUT=$ROOT/bundle
DATA=${KILN_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
DATA_DIRS="node pytorch-converted pytorch-operator simple"
LIMIT_MB=64
PROGRAMS="kiln conformance test_ops gpu_smoke"
OPTIONAL="gpu_runtime gpu_gemm"

fail() {
    echo "gpu-bundle: $*" >&2
    exit 1
}

cd "$ROOT" || fail "cannot enter $ROOT"
for tool in make ldd tar gzip; do
    command -v "$tool" >/dev/null 2>&1 || fail "'$tool' is not installed"
done

echo "gpu-bundle: building in $BUILD (make -j2)"
log=$(mktemp "${TMPDIR:-/tmp}/gpu-bundle.XXXXXX") || fail "cannot create a temporary file"
trap 'rm -f "$log"' EXIT
targets=()
for p in $PROGRAMS; do targets+=("$BUILD/$p"); done
if ! make BUILD="$BUILD" -j2 "${targets[@]}" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    fail "the build failed (make BUILD=$BUILD)"
fi
# the optional GPU tests, where the Makefile knows them
for p in $OPTIONAL; do
    if make -n BUILD="$BUILD" "$BUILD/$p" >/dev/null 2>&1; then
        if ! make BUILD="$BUILD" -j2 "$BUILD/$p" >"$log" 2>&1; then
            tail -n 10 "$log" >&2
            echo "gpu-bundle: warning: $BUILD/$p does not build; the bundle goes without it" >&2
            rm -f "$BUILD/$p"
        fi
    fi
done

rm -rf "$OUT"
mkdir -p "$OUT/lib" || fail "cannot create $OUT"
bundled=""
for p in $PROGRAMS $OPTIONAL; do
    if [ -x "$BUILD/$p" ]; then
        cp "$BUILD/$p" "$OUT/$p" || fail "cannot copy $BUILD/$p"
        bundled="$bundled $p"
    elif [[ " $PROGRAMS " == *" $p "* ]]; then
        fail "$BUILD/$p was not built"
    fi
done

# ---- shared libraries: everything ldd resolves except glibc's own -------------------
is_glibc() {
    case $1 in
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*.so.* | libresolv.so.* | \
        libutil.so.* | linux-vdso.so.* | libmvec.so.*) return 0 ;;
    *) return 1 ;;
    esac
}
for p in $bundled; do
    while read -r name arrow path _; do
        [ "$arrow" = "=>" ] || continue
        is_glibc "$name" && continue
        [ "$path" = "not" ] && fail "$p needs $name, which is not found here"
        [ -f "$OUT/lib/$name" ] || cp -L "$path" "$OUT/lib/$name" || fail "cannot copy $path"
    done < <(ldd "$OUT/$p")
done

cat >"$OUT/env.sh" <<'EOF'
# Source from anywhere: puts the bundle's libraries on the loader's path.
KILN_BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export KILN_BUNDLE
export LD_LIBRARY_PATH="$KILN_BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
EOF

# ---- conformance models ---------------------------------------------------------------
have_data=0
if [ -d "$DATA/node" ]; then
    present=""
    for dd in $DATA_DIRS; do [ -d "$DATA/$dd" ] && present="$present $dd"; done
    # shellcheck disable=SC2086  # the folder list is meant to split
    tar -C "$DATA" -czf "$OUT/onnx-testdata.tar.gz" $present || fail "cannot pack the ONNX test data from $DATA"
    have_data=1
else
    echo "gpu-bundle: warning: no ONNX test data in $DATA (install libonnx-testdata): conformance will not run there" >&2
fi

# ---- manifest and size check ----------------------------------------------------------------
glibc_needed=$(for p in $bundled; do objdump -T "$OUT/$p" 2>/dev/null; done | grep -o 'GLIBC_[0-9.]*' | sort -uV |
    tail -n 1)
{
    echo "kiln bundle"
    echo "commit   $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "built    $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(ldd --version 2>/dev/null | head -n 1)"
    echo "needs    ${glibc_needed:-GLIBC (unknown)} or newer"
    echo "programs$bundled"
    echo "libs     $(find "$OUT/lib" -type f -printf '%f ' | tr -s ' ')"
    echo "testdata $([ $have_data -eq 1 ] && echo "$DATA_DIRS" || echo none)"
} >"$OUT/MANIFEST"

bundle_kb=$(du -sk "$OUT" | cut -f1)
tree_kb=$(git -C "$ROOT" ls-files -z --cached --others --exclude-standard | xargs -0 du -ck 2>/dev/null | tail -n 1 |
    cut -f1)
total_mb=$(((bundle_kb + tree_kb) / 1024))
echo "gpu-bundle: bundle/ holds$bundled, $(find "$OUT/lib" -type f | wc -l) libraries$([ $have_data -eq 1 ] &&
    echo ", the conformance models"): $((bundle_kb / 1024)) MiB; with the working tree $total_mb MiB (limit $LIMIT_MB)"
if [ "$total_mb" -ge "$LIMIT_MB" ]; then
    fail "bundle/ plus the working tree is $total_mb MiB, over the ${LIMIT_MB} MiB the device tool carries"
fi
echo "gpu-bundle: on the GPU machine, from the repository root: scripts/gpu-tests.sh"
