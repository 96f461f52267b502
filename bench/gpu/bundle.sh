#!/usr/bin/env bash
# Builds what the GPU suite needs on the device machine into one ignored folder (default .gpu),
# on any machine, no card needed (bench/gpu/README.md):
#   ember.tar.xz   the release `ember` built with `--features ember-trainer/cuda` (which has
#                  wgpu too), stripped and compressed
#   data.tar.xz    Debian's fortunes, as fortunes/ (part 6's character LSTM), and
#                  Debian's Fashion-MNIST, as fashion-mnist/, with 50,000 of its 60,000
#                  training and 5,000 of its 10,000 test images (below: the bundle's size)
#   gl/            the Vulkan loader and the GL vendor-neutral dispatch libraries (Debian's
#                  libvulkan1 and libglvnd's), which run.sh unpacks for wgpu, as the device
#                  tool's README says: the NVIDIA driver's Vulkan ICD needs both
# and a second bundle, DIR-mpi (default .gpu-mpi), for part 2 (one rank through NCCL):
#   ember.tar.xz   `ember` built with `--features ember-trainer/cuda,ember-trainer/mpi`,
#                  which links Open MPI
#   mpi/           Open MPI's Debian packages and the libraries they load, which run.sh unpacks
# It prints each part's size and fails if a bundle, with the working tree that travels beside
# it, is over the device tool's 64 MiB a call: each call of the suite (bench/gpu/run.sh's
# --part) carries one of them. A part newer than what it is made from is kept. The two cannot
# be one: the MPI build with Open MPI's packages, the data and the working tree come to about
# 68 MiB (36.3 + 5.5 + 23.5 + 3.1 on 2026-11-27).
#
# Usage: bench/gpu/bundle.sh [DIR]   (CARGO_TARGET_DIR, default ~/.cache/ember/target as CI,
#        and FASHION_MNIST override the defaults)
set -euo pipefail
# This script, by a path that still holds after the cd: an archive older than it is made again.
self="$(realpath "$0")"
cd "$(dirname "$0")/../.."

dest="${1:-.gpu}"
dest="${dest%/}"
# The one target dir CI keeps too (.ci/run): a cold CUDA build is half an hour.
target="${CARGO_TARGET_DIR:-$HOME/.cache/ember/target}"
export CARGO_TARGET_DIR="$target"
data="${FASHION_MNIST:-/usr/share/datasets/fashion-mnist}"
fortunes=/usr/share/games/fortunes
[ -d "$fortunes" ] || fail "no $fortunes: apt-get install fortunes"
limit=$((64 * 1024 * 1024))
say() { printf 'bundle: %s\n' "$*"; }
fail() { printf 'bundle: %s\n' "$*" >&2; exit 1; }

for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    [ -e "$data/$f.gz" ] || [ -e "$data/$f" ] ||
        fail "no $data/$f(.gz): apt-get install dataset-fashion-mnist, or set FASHION_MNIST"
done

scripts/install-cuda-llvm.sh
# The card's driver is CUDA 13.0 (R580): pin cudarc's bindings to it (docs/cuda-build.md).
say "building ember with CUDA (a cold build takes about 50 minutes)"
# Without the default features: the card's machine has no Open MPI to link at run time (the
# suite runs one process) and no oneDNN (its CPU steps run on flex).
# burn's `persistence` (the kernel-tuning cache) brings turso, an SQLite engine, which made the
# compressed binary 4.6 MiB larger than with autotune alone (37.9 MiB, not 33.3); built for size
# it is 0.7 MiB smaller, and only
# the cache's reads and writes run its code, once per shape.
small=()
for crate in turso turso_core turso_ext turso_parser turso_sdk_kit turso_sync_engine \
    turso_sync_sdk_kit; do
    small+=(--config "profile.release.package.$crate.opt-level=\"z\"")
done
# build FEATURES COPY: ember with FEATURES, as COPY (its time kept, for `fresh` below).
build() {
    CUDARC_CUDA_VERSION=13000 cargo build --release --workspace --no-default-features \
        --features "$1" --bin ember "${small[@]}"
    case "$("$target/release/ember" devices | grep '^cuda')" in
        *"no CUDA backend"*) fail "$target/release/ember was built without CUDA" ;;
    esac
    cp -p "$target/release/ember" "$2"
}
bin="$target/release/ember-cuda"
build ember-trainer/cuda "$bin"
# Part 2's: with Open MPI, which its bundle carries (a second link of the same crates).
mpi_bin="$target/release/ember-cuda-mpi"
say "building ember with CUDA and Open MPI, for part 2"
build ember-trainer/cuda,ember-trainer/mpi "$mpi_bin"
mkdir -p "$dest/gl" "$dest-mpi/mpi"

# fresh ARCHIVE SOURCE...: whether ARCHIVE exists and is newer than every SOURCE.
fresh() {
    local archive="$1"
    shift
    [ -f "$archive" ] || return 1
    for source in "$@"; do [ "$source" -nt "$archive" ] && return 1; done
    return 0
}
# compress STAGE ARCHIVE [XZ FILTER...]: STAGE's files into ARCHIVE, one dictionary over all of
# it (xz's preset 9 with a 192 MiB window), after the filters given.
compress() {
    local stage="$1" archive="$2"
    shift 2
    tar -C "$stage" -cf - . | xz "$@" --lzma2=preset=9,dict=192MiB -T1 >"$archive.part"
    mv "$archive.part" "$archive"
    rm -rf "$stage"
}

# ember.tar.xz: the binary, stripped, as ember inside /tmp/ember-gpu. (Every workload, the
# ResNet's too, is `ember train`: one binary, not one per example.)
rm -f "$dest/resnet.tar.xz"
for pair in "$bin:$dest" "$mpi_bin:$dest-mpi"; do
    from="${pair%%:*}" to="${pair#*:}"
    fresh "$to/ember.tar.xz" "$from" "$self" && continue
    say "compressing $from"
    stage=$(mktemp -d)
    cp "$from" "$stage/ember" && strip "$stage/ember"
    # xz's x86 filter first: it makes the machine code's call addresses relative, which
    # compresses better (about 0.9 MiB less).
    compress "$stage" "$to/ember.tar.xz" --x86
done
# The images the bundle carries: the first TRAIN_IMAGES of the 60,000 training images and the
# first TEST_IMAGES of the 10,000 test images. With burn's kernel cache (turso) in the binary,
# all 10,000 test images made the bundle 64.7 MiB, and with 5,000 of them it was 64.0 MiB on
# 2026-11-28 (the working tree grows): over the device tool's 64 MiB, so part 1 could not be
# sent. 50,000 training images take about 4 MiB less. Every comparison of the suite runs
# side by side on the bundle's data (cuda beside flex and PyTorch), so the cut changes no
# verdict; the test accuracy's standard error at 0.8 is 0.40 percentage points on 10,000
# images, 0.57 on 5,000.
train_images=50000
test_images=5000
if ! fresh "$dest/data.tar.xz" "$data" "$fortunes" "$self"; then
    say "compressing Fashion-MNIST, with the first $train_images training and $test_images" \
        "test images (raw IDX files compress better than the gzipped ones)"
    stage=$(mktemp -d)
    mkdir "$stage/fashion-mnist"
    for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
        if [ -e "$data/$f.gz" ]; then gzip -dc "$data/$f.gz"; else cat "$data/$f"; fi \
            >"$stage/fashion-mnist/$f"
    done
    # An IDX file: 0, 0, its type, its number of dimensions, each dimension as a big-endian
    # u32, then the items. The first dimension becomes $train_images and $test_images.
    python3 - "$stage/fashion-mnist" "$train_images" "$test_images" <<'PY' || fail "cannot cut the data"
import sys
from pathlib import Path
folder, train, test = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for name, keep in (("train-images-idx3-ubyte", train), ("train-labels-idx1-ubyte", train),
                   ("t10k-images-idx3-ubyte", test), ("t10k-labels-idx1-ubyte", test)):
    data = (folder / name).read_bytes()
    assert data[:3] == b"\0\0\x08", f"{name}: not an IDX file of bytes"
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    item, cut = 1, min(keep, shape[0])
    for d in shape[1:]:
        item *= d
    header = data[:4] + cut.to_bytes(4, "big") + data[8:4 + 4 * dims]
    (folder / name).write_bytes(header + data[4 + 4 * dims:4 + 4 * dims + cut * item])
PY
    # The quotations' files (not strfile's .dat indexes, nor the .u8 links to the files).
    mkdir "$stage/fortunes"
    find "$fortunes" -maxdepth 1 -type f ! -name '*.dat' -exec cp {} "$stage/fortunes/" \;
    compress "$stage" "$dest/data.tar.xz"
fi
gl=(libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
for package in "${gl[@]}"; do
    compgen -G "$dest/gl/${package}_*.deb" >/dev/null && continue
    say "downloading $package"
    (cd "$dest/gl" && apt-get download "$package") || fail "apt-get download $package failed"
done

# Open MPI 4.1 as Debian 12 has it, with the libraries its own and its plugins load.
mpi=(openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15 libevent-core-2.1-7
    libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 librdmacm1 libpsm2-2
    libpsm-infinipath1)
for package in "${mpi[@]}"; do
    compgen -G "$dest-mpi/mpi/${package}_*.deb" >/dev/null && continue
    say "downloading $package"
    (cd "$dest-mpi/mpi" && apt-get download "$package") || fail "apt-get download $package failed"
done

size() { du -cb "$@" | tail -1 | cut -f1; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
tree=$(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)
for part in ember.tar.xz data.tar.xz gl; do
    say "$(printf '%-14s %s' "$part" "$(mib "$(size "$dest/$part")")")"
done
for part in ember.tar.xz mpi; do
    say "$(printf '%-14s %s' "mpi: $part" "$(mib "$(size "$dest-mpi/$part")")")"
done
say "the working tree that travels with each: $(mib "$tree")"
for bundle in "$dest" "$dest-mpi"; do
    all=$(( $(size "$bundle") + tree ))
    [ "$all" -le "$limit" ] ||
        fail "$bundle is $(mib "$all") with the tree, over the 64 MiB a call carries (bench/gpu/README.md)"
    say "a call that carries $bundle: $(mib "$all") of 64 MiB (carry [\"$bundle\"])"
done
