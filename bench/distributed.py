"""`mpirun -np N ember train --distributed mpi` against one process with the same global batch.

Each round runs every configuration once, each a fresh job, in an order that rotates from round
to round. Per workload and configuration it prints the median over rounds of the step time
(the epoch's time over its batches: one batch is one step of the global batch on every rank),
its ratio to the one process's, the all-reduce's share of the epoch as rank 0 measured it
(`allreduce_time`, the wait for the slower ranks included) and the gradient bytes each rank
sends per step.

Workloads:
  mlp     the chapter's MLP on synthetic data (--batches B, global batch 1024)
  lenet   d2l's LeNet (ReLU) on Fashion-MNIST, one epoch, global batch 256

Configurations: `alone` (one plain process, no MPI), then `N` ranks of batch (global / N) for
each N of --ranks. On a 2-core machine the ranks share the cores: no speed-up can come from
them; this measures what the job costs.

Not part of CI. Needs a release build (`cargo build --release`) and Open MPI's mpirun.

Run: python3 bench/distributed.py [--rounds 3] [--ranks 1,2,4] [--workloads mlp,lenet]
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
# Workload: (flags, global batch).
WORKLOADS = {
    "mlp": (["--device", "flex", "--batches", "40"], 1024),
    "lenet": (["--device", "flex", "--data", "fashion-mnist", "--model", "lenet-relu",
               "--lr", "0.9"], 256),
}


def run(binary, workload, ranks, out):
    """One job (ranks 0: the plain process); returns rank 0's epoch row."""
    flags, batch = WORKLOADS[workload]
    per_rank = batch // max(ranks, 1)
    command = [binary, "train", *flags, "--batch-size", str(per_rank), "--metrics", str(out)]
    if ranks:
        command = [*MPIRUN, "-np", str(ranks), *command, "--distributed", "mpi"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")
    epochs = out.with_name(out.stem + ".epochs.csv")
    with open(epochs) as f:
        return list(csv.DictReader(f))[-1]


def main():
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ember", default=str(target / "release/ember"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--ranks", default="1,2,4")
    p.add_argument("--workloads", default="mlp,lenet")
    a = p.parse_args()
    ranks = [0] + [int(n) for n in a.ranks.split(",")]
    workloads = a.workloads.split(",")
    configs = [(w, n) for w in workloads for n in ranks]
    rows = {c: [] for c in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            order = configs[r % len(configs):] + configs[:r % len(configs)]
            for w, n in order:
                row = run(a.ember, w, n, Path(tmp) / f"{w}-{n}.csv")
                rows[(w, n)].append(row)
                name = "alone" if n == 0 else f"{n} ranks"
                print(f"round {r + 1} {w} {name}: epoch {float(row['time']):.3f} s, "
                      f"{row['batches']} steps, all-reduce {row.get('allreduce_time') or '-'} s",
                      flush=True)
    print()
    print("| workload | configuration | step (ms) | / alone | all-reduce share | MB per step |")
    print("|---|---|---|---|---|---|")
    for w in workloads:
        step = {}
        for n in ranks:
            got = rows[(w, n)]
            step[n] = statistics.median(float(r["time"]) / int(r["batches"]) for r in got)
            share = [float(r["allreduce_time"]) / float(r["time"]) for r in got
                     if r.get("allreduce_time")]
            mb = [float(r["allreduce_mb"]) / int(r["batches"]) for r in got
                  if r.get("allreduce_mb")]
            name = "alone" if n == 0 else f"{n} ranks, batch {WORKLOADS[w][1] // n}"
            print(f"| {w} | {name} | {1000 * step[n]:.2f} | {step[n] / step[0]:.3f} | "
                  f"{f'{100 * statistics.median(share):.1f}%' if share else '-'} | "
                  f"{f'{statistics.median(mb):.3f}' if mb else '-'} |")


if __name__ == "__main__":
    main()
