"""ember against PyTorch on d2l's LeNet (7.6) on Fashion-MNIST, the same machine, interleaved.

Each round runs `ember train --device flex --data fashion-mnist --model MODEL --lr LR
--batch-size 256 --epochs N` and `bench/lenet_torch.py` with the same settings, one after the
other, each in a fresh process; the rounds alternate which goes first. It prints every epoch's
time and test accuracy, then the medians over all rounds and epochs and the ratio
ember / PyTorch of the time per epoch.

Not part of CI: it needs PyTorch (`python3 -m venv v && v/bin/pip install torch numpy`) and
Debian's data set (`apt-get install dataset-fashion-mnist`).

Run: python3 bench/lenet.py [--rounds 3] [--epochs 10] [--model lenet] [--lr 0.9] [--ember PATH]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EPOCH = re.compile(r"^epoch (\d+): time per epoch: ([0-9.]+) sec")
ACC = re.compile(r"test_acc ([0-9.]+)")


def run(cmd):
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(f"{cmd[0]} failed:\n{out.stdout}\n{out.stderr}")
    times, accs = [], []
    for line in out.stdout.splitlines():
        if m := EPOCH.match(line):
            times.append(float(m.group(2)))
        if (m := ACC.search(line)) and line.startswith("epoch"):
            accs.append(float(m.group(1)))
    return times, accs, wall


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--model", default="lenet", choices=["lenet", "lenet-relu"])
    p.add_argument("--lr", default="0.9", help="d2l's 0.9 for LeNet")
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    p.add_argument("--ember", default=str(target / "release/ember"))
    p.add_argument("--python", default=sys.executable)
    a = p.parse_args()
    common = ["--lr", a.lr, "--batch-size", "256", "--epochs", str(a.epochs)]
    ember = [a.ember, "train", "--device", "flex", "--data", "fashion-mnist", "--model", a.model] + common
    torch = [a.python, str(ROOT / "bench/lenet_torch.py"), "--model", a.model] + common
    results = {"ember": [], "pytorch": []}
    walls = {"ember": [], "pytorch": []}
    for r in range(a.rounds):
        order = [("ember", ember), ("pytorch", torch)]
        if r % 2:
            order.reverse()
        for name, cmd in order:
            times, accs, wall = run(cmd)
            results[name].extend(times)
            walls[name].append(wall)
            print(f"round {r + 1} {name:8}: per epoch {' '.join(f'{t:.2f}' for t in times)} s; "
                  f"test acc {' '.join(f'{x:.3f}' for x in accs)}; wall {wall:.1f} s", flush=True)
    e, t = statistics.median(results["ember"]), statistics.median(results["pytorch"])
    we, wt = statistics.median(walls["ember"]), statistics.median(walls["pytorch"])
    print(f"\n{a.model}, lr {a.lr}, {a.epochs} epochs x {a.rounds} rounds, medians:")
    print(f"| | ember (flex) | PyTorch CPU | ember / PyTorch |")
    print(f"|---|---|---|---|")
    print(f"| time per epoch (training) | {e:.2f} s | {t:.2f} s | {e / t:.2f} |")
    print(f"| whole process | {we:.1f} s | {wt:.1f} s | {we / wt:.2f} |")


if __name__ == "__main__":
    main()
