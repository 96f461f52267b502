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

# A device the run did not ask for is never touched: with a stand-in libcuda that notes every
# cuInit, runs on flex, two flex replicas and wgpu must not load the driver (burn's wgpu
# enumeration and the NCCL check loaded it in every run, issue 62). `auto` asks on purpose.
if command -v cc > /dev/null; then
    fake="$(mktemp -d)"
    trap 'rm -rf "$fake"' EXIT
    cat > "$fake/cuda.c" <<C
#include <stdio.h>
static void note(const char *what) {
    FILE *f = fopen("$fake/calls", "a");
    if (f) { fprintf(f, "%s\n", what); fclose(f); }
}
__attribute__((constructor)) static void loaded(void) { note("loaded"); }
int cuInit(unsigned flags) { (void)flags; note("cuInit"); return 100; }
int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
int cuDeviceGetCount(int *c) { *c = 0; return 0; }
int cuGetErrorString(int e, const char **s) { (void)e; *s = "stand-in"; return 0; }
int cuGetErrorName(int e, const char **s) { (void)e; *s = "STAND_IN"; return 0; }
C
    cc -shared -fPIC -o "$fake/libcuda.so" "$fake/cuda.c"
    cp "$fake/libcuda.so" "$fake/libcuda.so.1"
    tiny=(--batches 2 --batch-size 16 --features 8 --hidden 4)
    for device in "--device flex" "--devices flex,flex" "--device wgpu" "--device wgpu:0"; do
        rm -f "$fake/calls"
        # shellcheck disable=SC2086
        LD_LIBRARY_PATH="$fake" "$CARGO_TARGET_DIR/release/ember" train $device "${tiny[@]}" > /dev/null
        if [ -s "$fake/calls" ]; then
            echo "check-cuda-build: train $device touched the CUDA driver: $(sort "$fake/calls" | uniq -c | tr '\n' ' ')" >&2
            exit 1
        fi
    done
    echo "check-cuda-build: ok, runs on flex, flex,flex, wgpu and wgpu:0 never load the CUDA driver"
else
    echo "check-cuda-build: no C compiler: the check that other devices never load libcuda did not run" >&2
    exit 1
fi
