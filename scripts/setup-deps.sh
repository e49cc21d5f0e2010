#!/usr/bin/env bash
# setup-deps.sh: installs what building and testing kiln needs, and only what
# is missing; safe to run again. Silent when everything is already there.
#
#   scripts/setup-deps.sh            build + test dependencies
#   scripts/setup-deps.sh --models   also PyTorch, for tests/models (export.py)
#
# Debian packages (apt-get; `apt-get update` runs once, only when something
# must be installed; sudo is used when not root):
#   build-essential protobuf-c-compiler libprotobuf-c-dev libonnx-dev
#   libonnx-testdata zlib1g-dev libsqlite3-dev
#   with --models: python3-torch python3-torchvision (for /usr/bin/python3)
# PyPI packages for the python3 on PATH (pip install --quiet, adding
# --break-system-packages where the Python is externally managed):
#   numpy onnx onnxruntime
set -u

APT_PACKAGES="build-essential protobuf-c-compiler libprotobuf-c-dev libonnx-dev libonnx-testdata zlib1g-dev libsqlite3-dev"
MODEL_APT_PACKAGES="python3-torch python3-torchvision"
# python module:pip package
PY_MODULES="numpy:numpy onnx:onnx onnxruntime:onnxruntime"

models=0
for arg in "$@"; do
    case $arg in
    --models) models=1 ;;
    -h | --help)
        sed -n '2,16s/^# \{0,1\}//p' "$0"
        exit 0
        ;;
    *)
        echo "setup-deps: unknown argument '$arg' (try --help)" >&2
        exit 2
        ;;
    esac
done
[ $models -eq 1 ] && APT_PACKAGES="$APT_PACKAGES $MODEL_APT_PACKAGES"

fail() {
    echo "setup-deps: $*" >&2
    exit 1
}

log=$(mktemp "${TMPDIR:-/tmp}/setup-deps.XXXXXX") || fail "cannot create a temporary file"
trap 'rm -f "$log"' EXIT

# Runs a command quietly; on failure shows its output and stops.
quiet() {
    if ! "$@" > "$log" 2>&1; then
        tail -n 25 "$log" >&2
        fail "failed: $*"
    fi
}

# ---- Debian packages --------------------------------------------------------------
missing=""
for p in $APT_PACKAGES; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)
    [ "$status" = "install ok installed" ] || missing="$missing $p"
done
if [ -n "$missing" ]; then
    command -v apt-get >/dev/null 2>&1 ||
        fail "apt-get not found; install these packages by hand:$missing"
    if [ "$(id -u)" -eq 0 ]; then
        as_root=()
    elif command -v sudo >/dev/null 2>&1; then
        as_root=(sudo)
    else
        fail "not root and no sudo; as root run: apt-get install$missing"
    fi
    echo "setup-deps: installing$missing (apt-get)"
    quiet ${as_root[@]+"${as_root[@]}"} apt-get update
    # shellcheck disable=SC2086  # word-splitting the package list is meant
    quiet ${as_root[@]+"${as_root[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get install -y $missing
fi

# ---- Python packages ----------------------------------------------------------------
command -v python3 >/dev/null 2>&1 || fail "python3 not found on PATH"
PY=$(command -v python3)
pip_missing=""
for entry in $PY_MODULES; do
    "$PY" -c "import ${entry%%:*}" >/dev/null 2>&1 || pip_missing="$pip_missing ${entry#*:}"
done
if [ -n "$pip_missing" ]; then
    "$PY" -m pip --version >/dev/null 2>&1 ||
        fail "$PY has no pip; install it (Debian: apt-get install python3-pip), then run this again"
    echo "setup-deps: installing$pip_missing for $PY (pip)"
    # shellcheck disable=SC2086
    if ! "$PY" -m pip install --quiet $pip_missing > "$log" 2>&1; then
        if grep -q "externally-managed-environment" "$log"; then
            # shellcheck disable=SC2086
            quiet "$PY" -m pip install --quiet --break-system-packages $pip_missing
        else
            tail -n 25 "$log" >&2
            fail "pip install$pip_missing failed for $PY"
        fi
    fi
    for entry in $PY_MODULES; do
        "$PY" -c "import ${entry%%:*}" >/dev/null 2>&1 ||
            fail "$PY still cannot import ${entry%%:*} after installing it"
    done
fi

# ---- checks for --models ---------------------------------------------------------------
if [ $models -eq 1 ]; then
    /usr/bin/python3 -c "import torch, torchvision" >/dev/null 2>&1 ||
        fail "/usr/bin/python3 cannot import torch and torchvision although $MODEL_APT_PACKAGES are installed"
fi
exit 0
