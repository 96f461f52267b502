#!/usr/bin/env bash
# Which oneDNN should ember open? Times the matrix products of the chapter's MLP and of the
# Fashion-MNIST MLP (bench/onednn_matmul.c) through Debian's oneDNN 2.6 (`libdnnl-dev`, the
# library ember uses) and PyPI's oneDNN 3.x (`onednn`, installed with its runtimes into a venv
# of its own), each at the CPU's full ISA and with DNNL_MAX_CPU_ISA=AVX2 (the kernels an AVX2
# CPU such as Zen 3 gets), in interleaved rounds, and prints the medians over rounds.
#
# Not part of CI. Needs gcc, libdnnl-dev and network access to PyPI (about 2 GB of wheels).
# Usage: bench/onednn_versions.sh [rounds]   (default 3; ONEDNN3_VENV overrides the venv path)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
venv="${ONEDNN3_VENV:-$HOME/.cache/ember/onednn3-venv}"
version="2026.1.0"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [ ! -e "$venv/lib/libdnnl.so.3" ]; then
    echo "onednn_versions: installing PyPI's onednn $version and its runtimes into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "onednn==$version" "onednn-devel==$version"
fi
include="$(find "$venv" -path '*/include/oneapi/dnnl/dnnl.h' | head -1)"
include="${include%/oneapi/dnnl/dnnl.h}"
[ -n "$include" ] || { echo "onednn_versions: no dnnl.h under $venv" >&2; exit 1; }
# PyPI's build runs its CPU engine on SYCL, which finds the CPU through the OpenCL runtime.
ocl="$(find "$venv/lib" -name 'libintelocl.so*' | head -1)"
[ -n "$ocl" ] || { echo "onednn_versions: no libintelocl.so under $venv/lib" >&2; exit 1; }

gcc -O2 -o "$work/v2" bench/onednn_matmul.c -ldnnl
gcc -O2 -o "$work/v3" bench/onednn_matmul.c -I"$include" -L"$venv/lib" -ldnnl \
    -Wl,-rpath,"$venv/lib" -Wl,-rpath-link,"$venv/lib"

run() {  # library isa
    local isa_env=()
    [ "$2" = full ] || isa_env=(DNNL_MAX_CPU_ISA="$2" ONEDNN_MAX_CPU_ISA="$2")
    if [ "$1" = v3 ]; then
        env "${isa_env[@]}" LD_LIBRARY_PATH="$venv/lib" OCL_ICD_FILENAMES="$ocl" \
            ONEAPI_DEVICE_SELECTOR=opencl:cpu "$work/v3"
    else
        env "${isa_env[@]}" "$work/v2"
    fi
}

lscpu | grep -E '^(Model name|CPU family|Model|CPU\(s\)):' | tr -s ' '
grep -q avx512f /proc/cpuinfo && echo "AVX-512: yes" || echo "AVX-512: no"
for round in $(seq "$rounds"); do
    for library in v2 v3; do
        for isa in full AVX2; do
            run "$library" "$isa" | sed "s/^/round $round $library $isa: /"
        done
    done
done | tee "$work/log"

python3 - "$work/log" <<'EOF'
import collections, re, statistics, sys
runs = collections.defaultdict(list)
names = {}
for line in open(sys.argv[1]):
    m = re.match(r"round \d+ (v\d) (\S+): (.+?) {2,}(\S+) +median +([\d.]+) ms", line)
    if m:
        library, isa, product, implementation, ms = m.groups()
        runs[(product, isa, library)].append(float(ms))
        names[(product, isa, library)] = implementation
    elif m := re.match(r"round \d+ (v\d) \S+: oneDNN (\S+)", line):
        names[m.group(1)] = m.group(2)
print(f"\nmedians over rounds, ms (oneDNN {names.get('v2')} and {names.get('v3')})")
print(f"{'product':16} {'ISA':5} {'2.x':>8} {'3.x':>8} {'3.x / 2.x':>10}  kernels")
for product, isa in dict.fromkeys((p, i) for p, i, _ in runs):
    old = statistics.median(runs[(product, isa, "v2")])
    new = statistics.median(runs[(product, isa, "v3")])
    kernels = f"{names[(product, isa, 'v2')]} / {names[(product, isa, 'v3')]}"
    print(f"{product:16} {isa:5} {old:8.3f} {new:8.3f} {new / old:10.2f}  {kernels}")
EOF
