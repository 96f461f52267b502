#!/usr/bin/env bash
# Checks that ember still builds with burn's CUDA backend and that the binary is honest about
# this machine: installs the LLVM it links (scripts/install-cuda-llvm.sh), builds
# `--features ember-trainer/cuda` into a target dir of its own, and checks `ember devices`'s
# cuda line. Not part of CI: a cold build takes about half an hour on 2 cores (see README).
#
# Usage: scripts/check-cuda-build.sh   (CUDA_TARGET_DIR overrides ~/.cache/ember/target-cuda)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-cuda-llvm.sh
export CARGO_TARGET_DIR="${CUDA_TARGET_DIR:-$HOME/.cache/ember/target-cuda}"
start=$(date +%s)
cargo build --release --features ember-trainer/cuda
echo "check-cuda-build: built in $(( $(date +%s) - start )) s: $CARGO_TARGET_DIR/release/ember"

line="$("$CARGO_TARGET_DIR/release/ember" devices | grep '^cuda')"
echo "check-cuda-build: $line"
case "$line" in
    *"no CUDA backend"*) echo "check-cuda-build: the binary was built without CUDA" >&2; exit 1 ;;
    "cuda     usable "*) echo "check-cuda-build: ok, a CUDA card is usable here" ;;
    *"no NVIDIA driver"*libcuda*) echo "check-cuda-build: ok, no NVIDIA driver on this machine, and the binary says so" ;;
    *) echo "check-cuda-build: unexpected cuda line" >&2; exit 1 ;;
esac
