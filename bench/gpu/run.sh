#!/usr/bin/env bash
# The GPU suite: what ember does on an NVIDIA card, beside PyTorch and JAX on the same card, in
# a few calls of the device tool (bench/gpu/README.md). Every step has a time limit, and the run
# goes on past a failing step; it ends by writing report.md.
#
# Usage: bench/gpu/run.sh [--part 1|2|3|4|5|6|7|all] [--out DIR] [--bundle DIR] [--rounds N] [--pack]
#        bench/gpu/run.sh --dry-run [--out DIR] [--ember PATH]
#
# The parts split the time, as a call of the device tool runs at most 10 minutes, and the
# bundles, as it carries at most 64 MiB: part 2 carries bundle.sh's second bundle (.gpu-mpi),
# the others the first (.gpu). Correctness comes first, speed after; a fresh machine tunes its
# kernels from an empty cache, and parts 1 and 2 together take under 8 minutes with that:
#   --part 1     is ember right on the card? The ResNet's test accuracy per epoch on cuda beside
#                flex and beside PyTorch, each saved file evaluated by PyTorch, and where they
#                part, the card's run again in ways that tell the causes apart
#                (bench/gpu/resnet_check.py); bf16's loss curve against f32's
#                (bench/gpu/bf16_check.py)
#   --part 2     one rank of `mpirun ember train --distributed mpi --device cuda` against one
#                plain process, the gradients through NCCL (bench/gpu/nccl_check.py: the same
#                parameters); needs --bundle .gpu-mpi (ember built with Open MPI, and Open MPI)
#                and PyTorch's NCCL library on the machine
#   --part 3     speed: the chapter's 11 experiments and `ember compare` with the window sweep
#                on cuda, the chapter's epoch beside PyTorch and JAX, and the ResNet beside
#                PyTorch
#   --part 4     speed: the MLP and LeNet beside PyTorch and JAX, the experiments and the
#                comparison on wgpu (which tune their own kernels), ember on wgpu beside the
#                peers, and a profile of the slowest ratio
#   --part 5     speed in mixed precision: ember's --precision bf16 beside PyTorch's autocast
#                on cuda (the MLP, LeNet), after a tuning step in bf16
#   --part 6     speed of a sequence model: d2l's character LSTM on Debian's fortunes beside
#                PyTorch on cuda, from the same initial parameters (bench/peers.py's char-lstm:
#                epoch times and the perplexity per epoch)
#   --part 7     hybridize (issue 65): a recorded step against the eager step, one epoch of the
#                MLP, LeNet and the ResNet each, every saved tensor within 1e-5
#                (bench/gpu/hybrid_check.py), then ember's `--hybridize` beside ember's eager
#                step, PyTorch eager, PyTorch with its step as one CUDA graph and JAX
#                (bench/peers.py --ember-args=--hybridize --before EMBER), after a tuning step
#   --part all   all of them, in one call; --budget skips what would not fit, and part 2
#                without its bundle
# Each check of parts 1 and 2 prints a verdict line (held / did not hold, with its figures).
# Parts 3 to 5 begin with burn's kernel tuning for their workloads on cuda
# (bench/gpu/tune.py), timed on its own; parts 1 and 2 tune as they go (they judge results, not
# times).
#   --out DIR    where everything goes (default: $OUT on the device machine, else bench/gpu/out)
#   --bundle DIR what bench/gpu/bundle.sh made (default .gpu)
#   --rounds N   interleaved rounds of the side-by-side runs (default 3)
#   --budget S   seconds the whole run may take (default 540): a step gets what is left of it,
#                less 30 s for the report, and is skipped when under 10 s are left
#   --only STEPS run only these steps of the part (comma separated: resnet-check,bf16-check),
#                the others skipped as not asked for: to run a check again
#   --resnet-checks LIST
#                what the ResNet check runs (bench/gpu/resnet_check.py --checks; default all:
#                main,mechanics,seeds,diagnose)
#   --pack       leave only report.md, summary.md and one suite.tar.gz in --out (the device tool
#                brings back at most 8 files)
#   --dry-run    every step on the CPU (flex) with tiny sizes and without the peers, which CI
#                does not install: the same report, the same sections; what CI runs
set -uo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
part=all dry=0 pack=0 rounds=3 budget=540 out="${OUT:-$root/bench/gpu/out}" bundle="$root/.gpu" ember=""
only="" resnet_checks=main,mechanics,seeds,diagnose
fail() { printf 'run.sh: %s\n' "$*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --part) part="${2:-}"; shift 2 ;;
        --out) out="${2:-}"; shift 2 ;;
        --bundle) bundle="${2:-}"; shift 2 ;;
        --ember) ember="${2:-}"; shift 2 ;;
        --rounds) rounds="${2:-}"; shift 2 ;;
        --budget) budget="${2:-}"; shift 2 ;;
        --only) only="${2:-}"; shift 2 ;;
        --resnet-checks) resnet_checks="${2:-}"; shift 2 ;;
        --pack) pack=1; shift ;;
        --dry-run) dry=1; shift ;;
        -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) fail "unknown argument '$1' (see --help)" ;;
    esac
done
case "$part" in 1 | 2 | 3 | 4 | 5 | 6 | 7 | all) ;; *) fail "invalid --part '$part': 1, 2, 3, 4, 5, 6, 7 or all" ;; esac
runs() { [ "$part" = all ] || [ "$part" = "$1" ]; }
case "$rounds" in [1-9]) ;; *) fail "invalid --rounds '$rounds': 1 to 9" ;; esac
case "$budget" in '' | *[!0-9]*) fail "invalid --budget '$budget': whole seconds" ;; esac
deadline=$(( $(date +%s) + budget - 30 ))
[ -n "$out" ] || fail "--out needs a directory"
mkdir -p "$out" || fail "cannot create --out $out"
out="$(cd "$out" && pwd)"

# record PART NAME STATUS SECONDS LIMIT COMMAND: one line of the part's steps-PART.tsv.
record() {
    local file="$out/steps-$1.tsv"
    [ -f "$file" ] || printf 'part\tstep\tstatus\tseconds\tlimit\tcommand\n' >"$file"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$file"
}

# step PART NAME LIMIT COMMAND...: runs COMMAND with a time limit (at most what is left of
# --budget), its output in NAME.log, and records how it ended; a failing step never stops the
# suite.
step() {
    local p="$1" name="$2" limit="$3"
    shift 3
    local left=$(( deadline - $(date +%s) ))
    if [ -n "$only" ] && [[ ",$only," != *",$name,"* ]]; then
        record "$p" "$name" "skipped: not in --only $only" 0 0 "$*"
        return
    fi
    if [ "$left" -lt 10 ]; then
        echo "[$(date +%T)] $name: skipped, the budget is spent"
        record "$p" "$name" "skipped: the --budget of $budget s was spent" 0 0 "$*"
        return
    fi
    [ "$left" -lt "$limit" ] && limit=$left
    local start status
    start=$(date +%s.%N)
    printf '[%s] %s (limit %s s): %s\n' "$(date +%T)" "$name" "$limit" "$*"
    timeout --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1
    status=$?
    case $status in
        0) status=ok ;;
        124 | 137) status="timed out" ;;
        *) status="failed ($status)" ;;
    esac
    local seconds
    seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    printf '[%s] %s: %s in %s s\n' "$(date +%T)" "$name" "$status" "$seconds"
    record "$p" "$name" "$status" "$seconds" "$limit" "$*"
}

skip() { record "$1" "$2" "skipped: $3" 0 0 -; }

if [ "$dry" = 1 ]; then
    ember="${ember:-${CARGO_TARGET_DIR:-$root/target}/release/ember}"
    [ -x "$ember" ] || fail "no ember binary at $ember (cargo build --release, or --ember PATH)"
    devices=(flex)
    bench_flags=(--quick --cpu flex)
    compare_flags=(--batches 6 --batch-size 64 --features 32 --hidden 64,32 --sweep 1,2
        --policies barrier,t+2,none,auto)
    profile_flags=(--batches 6 --batch-size 64 --features 32 --hidden 64,32)
    mode="dry run: every step on the CPU (flex), tiny sizes, no peers"
    # Debian's copy, which CI installs (the ResNet check cuts it to a few hundred images).
    data="${FASHION_MNIST:-/usr/share/datasets/fashion-mnist}"
    fortunes=/usr/share/games/fortunes
else
    # The bundle: ember, Fashion-MNIST, and the Vulkan loader for wgpu.
    [ -d "$bundle" ] || fail "no bundle at $bundle: run bench/gpu/bundle.sh and carry it"
    work=/tmp/ember-gpu
    mkdir -p "$work"
    for archive in "$bundle"/*.tar.xz; do
        [ -e "$archive" ] && tar -xJf "$archive" -C "$work"
    done
    ember="${ember:-$work/ember}"
    [ -x "$ember" ] || fail "no ember in the bundle at $bundle"
    # Part 2's bundle: Open MPI's Debian packages, unpacked to / as the Vulkan loader's are
    # (no maintainer scripts: `mpirun` is an alternative they would make, so it is `orterun`).
    if compgen -G "$bundle/mpi/*.deb" >/dev/null; then
        for deb in "$bundle"/mpi/*.deb; do dpkg -x "$deb" /; done
        ldconfig
    fi
    if command -v nvidia-smi >/dev/null && compgen -G "$bundle/gl/*.deb" >/dev/null; then
        # The device tool's recipe for Vulkan on its NVIDIA machines: the loader, unpacked to /.
        for deb in "$bundle"/gl/*.deb; do dpkg -x "$deb" /; done
        ldconfig
        icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
        [ -f "$icd" ] && export VK_DRIVER_FILES="$icd"
    fi
    # The driver's libraries (libcuda, NVML), where the loader's cache does not list them.
    if ! ldconfig -p | grep -q 'libcuda\.so'; then
        for dir in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
            [ -d "$dir" ] && export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        done
    fi
    devices=(cuda wgpu)
    bench_flags=(--cpu flex)
    compare_flags=(--sweep --repeat 2 --epochs 2 --policies barrier,t+2,none,auto)
    profile_flags=()
    mode="on the card"
    data="${FASHION_MNIST:-/tmp/ember-gpu/fashion-mnist}"
    # The bundle's copy of Debian's fortunes (the card's machine has no package).
    fortunes=/tmp/ember-gpu/fortunes
fi
export PYTHONUNBUFFERED=1
python="${PYTHON:-python3}"
case "$ember" in /*) ;; *) ember="$PWD/$ember" ;; esac
case "$data" in /*) ;; *) data="$PWD/$data" ;; esac
echo "GPU suite, $mode; part $part; ember: $ember; out: $out"
# Every step runs in a scratch directory, as bench/peers.py's runs do: with no Cargo project
# above it, cubecl keeps its kernel-tuning cache in the user's (~/.cache/cubecl), one for all.
cd "$(mktemp -d)" || fail "no scratch directory"

if [ "$dry" = 1 ]; then
    runs 1 && skip 1 nvidia-smi "dry run"
else
    # Each call's machine: its card.
    step "${part/all/1}" nvidia-smi 30 nvidia-smi
fi
# tune PART NAME WORKLOADS [EMBER FLAGS...]: burn's kernel tuning first (bench/gpu/tune.py):
# each workload twice, the first process tuning its shapes into cubecl's cache, the second
# reading them back; the steps after it then time trained epochs rather than tuning.
tune() {
    local p="$1" name="$2" workloads="$3"
    shift 3
    [ "$dry" = 1 ] && workloads=chapter-barrier
    step "$p" "$name" 300 "$python" "$root/bench/gpu/tune.py" --out "$out/tune$p" \
        --ember "$ember" --device "${devices[0]}" --workloads "$workloads" --data-dir "$data" \
        -- "${profile_flags[@]}" "$@"
}

# launcher: sets `mpirun` to Open MPI's launcher that starts here, for the NCCL check, or
# fails where there is none. On the card's machine `orterun` crashes in PMIx's registration
# (pmix_preg_base_generate_ppn, with the host named `vm`) unless PMIx's preg framework is told to
# use its raw component: the launcher is tried as it is first, then with PMIX_MCA_preg=raw,
# which stays exported for the runs after it. launcher.log says which.
launcher() {
    local status
    mpirun=$(command -v orterun || command -v mpirun) || return 1
    "$mpirun" --allow-run-as-root -np 1 true >"$out/launcher.log" 2>&1
    status=$?
    if [ "$status" = 0 ]; then
        echo "launcher: $mpirun starts as it is" >>"$out/launcher.log"
        return 0
    fi
    echo "launcher: $mpirun failed ($status) as it is; again with PMIX_MCA_preg=raw" >>"$out/launcher.log"
    export PMIX_MCA_preg=raw
    "$mpirun" --allow-run-as-root -np 1 true >>"$out/launcher.log" 2>&1
    status=$?
    if [ "$status" = 0 ]; then
        echo "launcher: $mpirun starts with PMIX_MCA_preg=raw" >>"$out/launcher.log"
    else
        echo "launcher: $mpirun failed with PMIX_MCA_preg=raw too ($status)" >>"$out/launcher.log"
    fi
}

if runs 1; then
    if [ "$dry" != 1 ]; then
        # What ember's CUDA and wgpu backends load at run time, and the profilers there are.
        probe='ldconfig -p | grep -E "libcuda|libnvrtc|libnvidia-ml|libvulkan|libmpi"; env | grep -E "^(LD_LIBRARY_PATH|VK_)"; command -v ncu nsys nvcc orterun; nproc; python3 -c "import torch, jax; print(torch.__version__, jax.__version__)"'
        step 1 environment 30 bash -c "$probe"
    fi
    step 1 devices 60 "$ember" devices
    # The ResNet's test accuracy on the card beside the CPU's and PyTorch's, epoch by epoch.
    if [ "$dry" = 1 ]; then
        step 1 resnet-check 240 "$python" "$root/bench/gpu/resnet_check.py" --ember "$ember" \
            --device flex --reference flex --out "$out/resnet" --data-dir "$data" --epochs 2 \
            --train 512 --test 256 --checks "$resnet_checks"
    else
        step 1 resnet-check 300 "$python" "$root/bench/gpu/resnet_check.py" --ember "$ember" \
            --device cuda --reference flex --out "$out/resnet" --data-dir "$data" \
            --checks "$resnet_checks"
    fi
    # bf16's loss curve against f32's.
    if [ "$dry" = 1 ]; then
        skip 1 bf16-check "dry run: ember refuses bf16 on a CPU without AVX512_BF16 or AMX"
    else
        step 1 bf16-check 150 "$python" "$root/bench/gpu/bf16_check.py" --ember "$ember" \
            --device cuda --out "$out/bf16" --data-dir "$data"
    fi
fi

if runs 2; then
    # One rank through NCCL against one plain process: the same update.
    if [ "$dry" = 1 ]; then
        expect=host
    else
        expect=nccl
        # NCCL's library as PyTorch's wheels bring it (nvidia-nccl): cudarc opens it as
        # libnccl.so, which the wheel names libnccl.so.2.
        nccl=$("$python" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
        if [ -n "$nccl" ] && [ -e "$nccl/libnccl.so.2" ]; then
            mkdir -p /tmp/ember-gpu/nccl && ln -sf "$nccl/libnccl.so.2" /tmp/ember-gpu/nccl/libnccl.so
            export LD_LIBRARY_PATH="/tmp/ember-gpu/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        fi
    fi
    if ! launcher; then
        skip 2 nccl-check "no Open MPI launcher: run bench/gpu/bundle.sh, whose bundle carries it"
    else
        step 2 nccl-check 180 "$python" "$root/bench/gpu/nccl_check.py" --ember "$ember" \
            --mpirun "$mpirun" --device "${devices[0]}" --out "$out/nccl" --expect "$expect"
    fi
fi

if runs 3; then
    tune 3 tune chapter-barrier,resnet
    # cuda's experiments and comparison first, then the peers.
    d="${devices[0]}"
    step 3 "chapter-$d" 180 "$ember" bench --report "$out/chapter-$d" --gpu "$d" --device "$d" \
        "${bench_flags[@]}"
    step 3 "compare-$d" 120 "$ember" compare --device "$d" --out "$out/compare-$d" \
        "${compare_flags[@]}"
    if [ "$dry" = 1 ]; then
        skip 3 peers-chapter "dry run: CI does not install PyTorch and JAX"
        skip 3 peers-resnet "dry run: CI does not install PyTorch"
    else
        step 3 peers-chapter 200 "$python" "$root/bench/peers.py" --device cuda --ember "$ember" \
            --rounds "$rounds" --workloads chapter-barrier,chapter-t+2,chapter-none
        step 3 peers-resnet 220 "$python" "$root/bench/peers.py" --device cuda --ember "$ember" \
            --data-dir "$data" --rounds "$rounds" --epochs 2 --workloads resnet
    fi
fi

if runs 4; then
    tune 4 tune mlp,lenet
    # cuda's comparison with the peers first: in one call (--part all), --budget cuts the end.
    if [ "$dry" = 1 ]; then
        skip 4 peers-cuda "dry run: CI does not install PyTorch and JAX"
    else
        step 4 peers-cuda 240 "$python" "$root/bench/peers.py" --device cuda --ember "$ember" \
            --data-dir "$data" --rounds "$rounds" --epochs 2 --workloads mlp,lenet
    fi
    for d in "${devices[@]:1}"; do
        step 4 "chapter-$d" 120 "$ember" bench --report "$out/chapter-$d" --gpu "$d" \
            --device "$d" "${bench_flags[@]}"
        step 4 "compare-$d" 90 "$ember" compare --device "$d" --out "$out/compare-$d" \
            "${compare_flags[@]}"
    done
    if [ "$dry" = 1 ]; then
        skip 4 peers-wgpu "dry run: CI does not install PyTorch and JAX"
    else
        step 4 peers-wgpu 150 "$python" "$root/bench/peers.py" --device wgpu --ember "$ember" \
            --data-dir "$data" --rounds "$(( rounds < 2 ? rounds : 2 ))" --epochs 2 \
            --workloads chapter-barrier,mlp
    fi
    # The slowest ratio so far, profiled: ncu's kernel times where it exists, ember's trace.
    step 4 profile 150 "$python" "$root/bench/gpu/profile.py" --out "$out/profile" \
        --ember "$ember" --device "${devices[0]}" --results "$out" --data-dir "$data" \
        -- "${profile_flags[@]}"
fi

if runs 5; then
    if [ "$dry" = 1 ]; then
        skip 5 tune-bf16 "dry run: ember refuses bf16 on a CPU without AVX512_BF16 or AMX"
        skip 5 peers-bf16 "dry run: CI does not install PyTorch, and ember refuses bf16 on the CPU"
    else
        # bf16's own kernels, tuned before they are timed, as parts 3 and 4 tune f32's. The
        # small networks only: the chapter's epoch in bf16 was timed on 2026-11-26 (0.655 s
        # against PyTorch's autocast 1.698 s), and tuning it too would not leave the call time
        # for the rounds.
        tune 5 tune-bf16 mlp,lenet --precision bf16
        step 5 peers-bf16 400 "$python" "$root/bench/peers.py" --device cuda --precision bf16 \
            --ember "$ember" --data-dir "$data" --rounds "$rounds" --epochs 2 \
            --workloads mlp,lenet
    fi
fi

if runs 6; then
    if [ "$dry" = 1 ]; then
        skip 6 peers-char-lstm "dry run: CI does not install PyTorch"
    else
        step 6 peers-char-lstm 400 "$python" "$root/bench/peers.py" --device cuda --ember "$ember" \
            --fortunes "$fortunes" --rounds "$rounds" --epochs 3 --workloads char-lstm
    fi
fi

if runs 7; then
    # The recorded step's numbers first, then its speed.
    if [ "$dry" = 1 ]; then
        step 7 hybrid-check 240 "$python" "$root/bench/gpu/hybrid_check.py" --ember "$ember" \
            --device flex --expect again --out "$out/hybrid" --data-dir "$data" --train 600 \
            --test 256
        skip 7 peers-hybridize "dry run: CI does not install PyTorch and JAX"
    else
        # Tuned first, so that the check's six runs time nothing and tune nothing.
        tune 7 tune-hybridize mlp,lenet,resnet,chapter-barrier --hybridize
        step 7 hybrid-check 200 "$python" "$root/bench/gpu/hybrid_check.py" --ember "$ember" \
            --device cuda --expect graph --out "$out/hybrid" --data-dir "$data"
        step 7 peers-hybridize 400 "$python" "$root/bench/peers.py" --device cuda \
            --ember "$ember" --ember-args=--hybridize --before "$ember --device cuda" --graphs \
            --data-dir "$data" --rounds "$rounds" --epochs 2 \
            --workloads chapter-barrier,mlp,lenet,resnet
    fi
fi

"$python" "$root/bench/gpu/report.py" "$out" --mode "$mode" || echo "run.sh: report.py failed" >&2
echo "wrote $out/report.md"
if [ "$pack" = 1 ]; then
    # Written beside --out, then moved in: a tarball growing inside the folder it reads makes
    # tar fail ("file changed as we read it").
    packed="$(mktemp -d)/suite.tar.gz"
    if (cd "$out" && tar -czf "$packed" --anchored --exclude=./report.md --exclude=./summary.md .); then
        find "$out" -mindepth 1 -maxdepth 1 ! -name report.md ! -name summary.md -exec rm -rf {} +
        mv "$packed" "$out/suite.tar.gz"
        echo "packed everything else into $out/suite.tar.gz"
    else
        echo "run.sh: packing failed; $out is left as it is" >&2
    fi
fi
