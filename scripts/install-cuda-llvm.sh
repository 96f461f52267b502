#!/usr/bin/env bash
# Installs the static LLVM that burn 0.22's CUDA backend links, from PyPI, where its build looks
# for it, so that `cargo build --release --features cuda` never downloads anything else.
#
# burn-cuda 0.22 compiles its kernels to PTX through cubecl-llvm, which builds
# tracel-llvm-bundler 23.1.0-4. That crate's build script downloads an LLVM bundle from
# github.com, unless its install directory already holds the file `.tracel-llvm-installed`; it
# then links statically through that directory's `bin/llvm-config`. PyPI's mlc-llvm-static
# (libraries, headers and a Python llvm-config) with mlc-llvm-static-extra-targets (the NVPTX
# backend among others) is such an LLVM 23.1, static.
#
# Idempotent: a complete install is kept; a partial one is replaced. What it unpacked is checked
# before the marker is written. Needs python3 with pip; installs Debian's libzstd-dev and
# zlib1g-dev (the LLVM libraries link against them) when they are missing and it runs as root.
#
# Usage: scripts/install-cuda-llvm.sh   (then: cargo build --release --features cuda)
set -euo pipefail

version=23.1.1.post0
bundle=tracel-llvm-23.1.0-4
dest="${XDG_DATA_HOME:-$HOME/.local/share}/tracel/$bundle"
marker="$dest/.tracel-llvm-installed"

say() { printf 'install-cuda-llvm: %s\n' "$*"; }
fail() { printf 'install-cuda-llvm: %s\n' "$*" >&2; exit 1; }

# What the bundler's build asks of the install: an LLVM 23.1 llvm-config that runs, lists the
# NVPTX backend's libraries, and whose library and header directories hold what it names.
check() {
    local config="$1/bin/llvm-config" libdir libs
    [ -x "$config" ] || { echo "no executable $config"; return 1; }
    case "$("$config" --version)" in 23.1.*) ;; *) echo "$config is not LLVM 23.1"; return 1 ;; esac
    "$config" --link-static --targets-built | tr ' ' '\n' | grep -qx NVPTX ||
        { echo "the NVPTX target is missing (mlc-llvm-static-extra-targets)"; return 1; }
    libdir="$("$config" --link-static --libdir)" || { echo "llvm-config --libdir failed"; return 1; }
    # llvm-config itself fails when an archive it names is missing.
    libs="$("$config" --link-static --libs 2>&1)" || { echo "$libs"; return 1; }
    for lib in $libs; do
        [ -f "$libdir/lib${lib#-l}.a" ] || { echo "$libdir/lib${lib#-l}.a is missing"; return 1; }
    done
    [ -f "$("$config" --includedir)/llvm-c/Target.h" ] || { echo "llvm-c/Target.h is missing"; return 1; }
}

# The system libraries LLVM's static libraries need at link time.
system_libraries() {
    local missing=()
    for pair in zstd:libzstd-dev z:zlib1g-dev; do
        # The unversioned .so, from the -dev package, is what -lzstd and -lz find.
        compgen -G "/usr/lib/*/lib${pair%%:*}.so" >/dev/null ||
            compgen -G "/usr/lib/lib${pair%%:*}.so" >/dev/null || missing+=("${pair#*:}")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        say "installing ${missing[*]} (the LLVM libraries link against them)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        fail "install ${missing[*]} first (the LLVM libraries link against them)"
    fi
}

system_libraries
if [ -f "$marker" ] && why="$(check "$dest")"; then
    say "already installed in $dest"
    exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
say "downloading mlc-llvm-static $version and its extra targets from PyPI (about 90 MB)"
python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp/wheels" \
    "mlc-llvm-static==$version" "mlc-llvm-static-extra-targets==$version"
python3 - "$tmp/wheels" "$tmp/unpacked" <<'EOF'
import pathlib, sys, zipfile
wheels, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
found = sorted(wheels.glob("*.whl"))
if len(found) != 2:
    sys.exit(f"expected 2 wheels in {wheels}, found {[w.name for w in found]}")
for wheel in found:
    with zipfile.ZipFile(wheel) as z:
        bad = z.testzip()
        if bad:
            sys.exit(f"{wheel.name}: {bad} is corrupt")
        z.extractall(out)
EOF
static="$tmp/unpacked/mlc_llvm_static/static"
# zipfile keeps no modes: llvm-config (a Python script) must be executable.
chmod +x "$static/bin/llvm-config" "$static/bin/llvm-config.py"
if ! why="$(check "$static")"; then
    fail "the unpacked LLVM is incomplete: $why"
fi

# Replace any partial install whole: into a sibling directory, then one rename.
mkdir -p "$(dirname "$dest")"
staging="$dest.partial-$$"
rm -rf "$staging"
cp -a "$static" "$staging"
rm -rf "$dest"
mv "$staging" "$dest"
if ! why="$(check "$dest")"; then
    fail "the installed LLVM in $dest is incomplete: $why"
fi
touch "$marker"
say "installed LLVM $("$dest/bin/llvm-config" --version) with NVPTX in $dest"
