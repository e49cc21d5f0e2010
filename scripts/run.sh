#!/usr/bin/env bash
# scripts/run.sh [kiln run ARGS]: kiln's main job in one command on a fresh
# machine: installs what is missing, builds, and runs a model; with no
# arguments, the embedded default model (a small CNN) on random input.
set -eu
cd "$(dirname "$0")/.."
./scripts/setup-deps.sh
make -j"$(nproc)" build/kiln >/dev/null
exec ./build/kiln run "$@"
