"""Where a `perf record` of ember went: oneDNN, burn, ember's own code, the kernel, libc.

The README's "Where the time goes now" figures come from this. Record a run of the profiling
build, which keeps its symbols (`cargo build --profile profiling`, then for example):

    perf record -e cpu-clock -F 2000 -o lenet.data target/profiling/ember train \\
        --data fashion-mnist --model lenet --loss softmax-ce --lr 0.9 --batch-size 256 --epochs 1
    python3 bench/perf_split.py lenet.data

It prints the share of samples in each part. oneDNN is its JIT kernels (perf names them
`[JIT] tid N`), its library and OpenMP. In ember's own binary, the symbols are sorted by crate:
burn (with burn-flex's `macerator` and `gemm`), ember's crates, the data set's decoding
(`miniz_oxide`), rayon and rand. The rest of that binary is Rust's std and small crates.
A release build has no symbols, so all of its binary is counted as "<binary> binary, other".

Not part of CI.
"""
import collections
import re
import subprocess
import sys

LINE = re.compile(r"\s*([0-9.]+)%\s+(\S+(?: tid \d+)?)\s+\[.\]\s+(.*)")
# ember's binary, by the crate that starts a symbol (a trait impl's symbol starts with `<`).
CRATES = [
    ("burn (flex, autodiff, macerator, gemm)", ("burn", "macerator", "gemm")),
    ("ember: data sets", ("ember_datasets",)),
    ("ember: framework, trainer", ("ember",)),
    ("decoding the data set (miniz)", ("miniz_oxide", "flate2")),
    ("rayon", ("rayon", "crossbeam")),
    ("rand", ("rand", "rand_distr", "rand_chacha", "chacha20")),
]
LIBRARIES = [
    ("oneDNN: JIT kernels", "[JIT]"),
    ("oneDNN: library", "libdnnl"),
    ("oneDNN: OpenMP", "libgomp"),
    ("kernel", "[kernel"),
    ("libc, ld.so, libm", ("libc.", "ld-linux", "libm.")),
]


def part(dso, symbol):
    """The part of the run that a sample in `symbol` of `dso` belongs to."""
    for name, prefixes in LIBRARIES:
        if dso.startswith(prefixes):
            return name
    if dso.startswith("[") or ".so" in dso:
        return f"other: {dso}"
    # The Rust binary itself: `ember`, or an example such as `resnet`.
    crate = re.match(r"<?([a-z_0-9]+)::", symbol)
    for name, crates in CRATES:
        if crate and any(crate.group(1) == c or crate.group(1).startswith(c + "_") for c in crates):
            return name
    return f"{dso} binary, other"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: perf_split.py PERF_DATA")
    report = subprocess.run(
        ["perf", "report", "-i", sys.argv[1], "--sort", "dso,sym", "--stdio", "--no-children"],
        capture_output=True, text=True, check=True,
    ).stdout
    shares = collections.Counter()
    for line in report.splitlines():
        if m := LINE.match(line):
            shares[part(m.group(2), m.group(3).strip())] += float(m.group(1))
    for name, share in shares.most_common():
        if share >= 0.05:
            print(f"{share:6.2f}%  {name}")


if __name__ == "__main__":
    main()
