"""Metrics without a barrier: `ember train --sync none` with `--eval` metrics on and off, side by
side, interleaved.

A metric must not add a barrier (trainer/src/metric): the steps add to sums on the device, read
once at the epoch's end. So with metrics on, a run under --sync none must keep what none gives:
the most batches in flight, and the time per epoch. This runs the same training with metrics
off and on, alternating which goes first from round to round, each in a fresh process, and
prints per configuration the medians over rounds of the time per epoch (over every epoch after
the first, which carries one-time costs) and of the most batches in flight, from the epochs'
CSV each run writes; then on/off of the times, per round and of the medians.

  mlp      d2l's Fashion-MNIST MLP (mlp:256, batch 256, SGD 0.1), off: --eval none,
           on: --eval acc,top5,ce,f1
  chapter  the chapter's synthetic MLP (150 batches of 1024 x 512), off: no metric (the
           default for values), on: --eval mse,mae

Not part of CI. Needs a release build (`cargo build --release`) and, for mlp, Debian's data
set (`apt-get install dataset-fashion-mnist`).

Run: python3 bench/metrics_overhead.py [--workload mlp|chapter] [--rounds 3] [--epochs 3]
         [--device flex] [--ember target/release/ember]
"""
import argparse
import csv
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = {
    "mlp": (["--data", "fashion-mnist", "--model", "mlp:256", "--batch-size", "256",
             "--lr", "0.1"], ["--eval", "none"], ["--eval", "acc,top5,ce,f1"]),
    "chapter": ([], [], ["--eval", "mse,mae"]),
}


def run(a, flags, trace):
    command = [a.ember, "train", "--device", a.device, "--sync", "none", "--epochs",
               str(a.epochs), "--metrics", str(trace)] + flags
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")
    with open(trace.with_name(trace.stem + ".epochs.csv")) as f:
        rows = list(csv.DictReader(f))
    times = [float(r["time"]) for r in rows[1:]] or [float(rows[0]["time"])]
    return statistics.median(times), max(int(r["max_depth"]) for r in rows), rows[-1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", choices=sorted(WORKLOADS), default="mlp")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--device", default="flex")
    p.add_argument("--eval", help="the metrics on, as --eval takes them")
    p.add_argument("--ember", default=str(Path(os.environ.get(
        "CARGO_TARGET_DIR", ROOT / "target")) / "release" / "ember"))
    a = p.parse_args()
    base, off, on = WORKLOADS[a.workload]
    if a.eval:
        on = ["--eval", a.eval]
    configs = {"off": base + off, "on": base + on}
    results = {name: [] for name in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            order = list(configs) if r % 2 == 0 else list(configs)[::-1]
            for name in order:
                trace = Path(tmp) / f"{name}-{r}.csv"
                time, depth, last = run(a, configs[name], trace)
                results[name].append((time, depth))
                metrics = {k: v for k, v in last.items() if k.startswith(("train_", "test_"))}
                print(f"round {r + 1} {name:>3}: {time:.3f} s/epoch, max in flight {depth}"
                      + (f", {metrics}" if metrics else ""), flush=True)
    print(f"\n{a.workload} on {a.device}, --sync none, {a.rounds} rounds, {a.epochs} epochs")
    medians = {}
    for name, runs in results.items():
        medians[name] = (statistics.median(t for t, _ in runs),
                         statistics.median(d for _, d in runs))
        print(f"  metrics {name:>3}: {medians[name][0]:.3f} s/epoch, "
              f"max in flight {medians[name][1]:g}")
    rounds = [on[0] / off[0] for on, off in zip(results["on"], results["off"])]
    print(f"  on/off time per epoch: {medians['on'][0] / medians['off'][0]:.3f} "
          f"(rounds {', '.join(f'{x:.3f}' for x in rounds)}); "
          f"max in flight on - off: {medians['on'][1] - medians['off'][1]:+g}")


if __name__ == "__main__":
    main()
