"""One rank through `--distributed mpi` against one plain process: the same update, bit for bit.

The GPU suite's part 4 (bench/gpu/run.sh). With one card, a job of one rank cannot sum
anything, but it takes the whole path a job of many takes: MPI starts it and carries NCCL's id,
the rank joins NCCL's communicator on its card, and every step concatenates the gradients on
the card, all-reduces them in place and cuts them back into the parameters' shapes. A buffer
read before burn wrote it, a sum NCCL had not finished, or a gradient cut at the wrong offset
would each change the parameters; the sum of one rank is its own gradient, so the saved
parameters must equal the plain process's.

It prints the job's first lines (where the gradients were summed, and why), each run's epoch
time and the all-reduce's share, and the largest difference between the two runs' parameters.
It exits 1 when they differ by more than --tolerance, or when --expect names a way the job did
not take (`nccl` on a card: the path under test; `host` in CI's dry run, on the CPU).

Run: python3 bench/gpu/nccl_check.py --ember BIN --device cuda --out DIR [--expect nccl]
        [--mpirun orterun]
"""
import argparse
import array
import csv
import json
import struct
import subprocess
import sys
from pathlib import Path

MPIRUN_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "1"]
# The chapter's MLP, smaller, under Adam: moments and the bias correction make any difference
# in a gradient show in every later step's parameters.
# Two epochs: the last one's all-reduce time and epoch are steady (the first starts NCCL's
# communicator and tunes burn's kernels).
FLAGS = ["--batches", "20", "--batch-size", "256", "--features", "256", "--hidden", "512,128",
         "--optimizer", "adam", "--lr", "0.001", "--seed", "3", "--epochs", "2"]


def floats(path):
    """Each F32 tensor of a safetensors file, by name, as an array of floats."""
    data = Path(path).read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    body = data[8 + length:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        start, end = info["data_offsets"]
        values = array.array("f")
        values.frombytes(body[start:end])
        tensors[name] = values
    return tensors


def train(command, out, name):
    """Runs one training; returns its output and its epoch row from --metrics."""
    metrics = out / f"{name}.csv"
    command = [*command, "--metrics", str(metrics), "--save", str(out / f"{name}.safetensors")]
    print("$", " ".join(command), flush=True)
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    (out / f"{name}.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        sys.exit(f"{name} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    with open(metrics.with_name(metrics.stem + ".epochs.csv")) as f:
        return done.stdout + done.stderr, list(csv.DictReader(f))[-1]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ember", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--mpirun", default="mpirun", help="Open MPI's launcher (orterun)")
    p.add_argument("--expect", choices=["nccl", "host"])
    p.add_argument("--tolerance", type=float, default=1e-6)
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    base = [a.ember, "train", "--device", a.device, *FLAGS]
    _, alone = train(base, a.out, "alone")
    said, job = train([a.mpirun, *MPIRUN_FLAGS, *base, "--distributed", "mpi"], a.out, "rank")
    via = next((line for line in said.splitlines() if line.startswith("gradients summed")), "")
    print(via or "the job did not say where it summed the gradients")
    for name, row in (("alone", alone), ("one rank", job)):
        share = row.get("allreduce_time") or ""
        share = f", all-reduce {float(share):.4f} s" if share else ""
        print(f"{name}: last epoch {float(row['time']):.3f} s{share}")
    a_params, b_params = floats(a.out / "alone.safetensors"), floats(a.out / "rank.safetensors")
    if sorted(a_params) != sorted(b_params):
        sys.exit(f"the parameters differ in names: {sorted(a_params)} / {sorted(b_params)}")
    worst = max(abs(x - y) for n in a_params for x, y in zip(a_params[n], b_params[n]))
    count = sum(len(v) for v in a_params.values())
    print(f"largest difference over {count} parameters: {worst:.3g} (tolerance {a.tolerance:g})")
    failures = []
    if worst > a.tolerance:
        failures.append(f"the parameters differ by {worst:.3g}")
    if "on the cards by NCCL" in via:
        taken = "nccl"
    elif "by MPI on the host" in via:
        taken = "host"
    else:
        taken = "unknown"
        failures.append("the job did not say where it summed the gradients")
    if a.expect and taken not in (a.expect, "unknown"):
        failures.append(f"the gradients were summed on the {taken} path, not {a.expect}: {via}")
    figures = f"largest difference {worst:.3g} over {count} parameters, tolerance {a.tolerance:g}"
    if failures:
        print(f"verdict: one rank through {taken} against one plain process: did not hold "
              f"({'; '.join(failures)}; {figures})")
        sys.exit(1)
    print(f"same update through the {taken} path")
    print(f"verdict: one rank through {taken} against one plain process: held ({figures})")


if __name__ == "__main__":
    main()
