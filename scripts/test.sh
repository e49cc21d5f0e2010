#!/usr/bin/env bash
# scripts/test.sh: the default test run on a fresh machine: installs what is
# missing (PyTorch included, for the model tests), builds with warnings as
# errors, and runs unit, kernel, command-line, conformance and model tests.
# Ends with the line "N passed, N failed".
set -eu
cd "$(dirname "$0")/.."
./scripts/setup-deps.sh --models
make -j"$(nproc)" WERROR=-Werror >/dev/null
exec make --no-print-directory check
