"""The GPU suite's mixed-precision check (bench/gpu/run.sh --part 1): does bf16 train as f32 does?

It trains d2l's Fashion-MNIST MLP (bench/peers/workloads.py's `mlp`: 784-256-10, batch 256, SGD
at 0.1, seed 0) twice on the card with `ember train`, once in f32 and once with
`--precision bf16`, and compares the two loss curves epoch by epoch: the training loss of every
epoch and the last test accuracy. bf16 keeps 8 bits of mantissa, so its steps differ from
f32's a little; training that goes astray in bf16 (an operation burn's CUDA backend lacks in
bf16, a loss that overflows) shows as a curve that leaves f32's.

It prints both curves and one verdict line, and writes bf16.md into --out; it exits 1 when the
verdict did not hold.

Run: python3 bench/gpu/bf16_check.py --ember BIN --device cuda --out DIR [--data-dir DIR]
         [--epochs 3]
"""
import csv
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "bench/peers"))
import workloads as w  # noqa: E402
from resnet_files import check_parser  # noqa: E402

# bf16 against f32: each epoch's training loss within this share of f32's, and the last test
# accuracy within this many points.
LOSS_SHARE, ACC_POINTS = 0.03, 1.5


def curve(a, precision):
    """Each epoch's (train loss, test accuracy) of the MLP in `precision`, or why there is none."""
    batch_size, lr = w.settings("mlp")
    stem = a.out / f"mlp-{precision}"
    cmd = [a.ember, "train", "--device", a.device, "--precision", precision,
           "--data", f"fashion-mnist:{a.data_dir}", "--model", "mlp:256", "--loss", "softmax-ce",
           "--batch-size", str(batch_size), "--lr", str(lr), "--epochs", str(a.epochs),
           "--seed", "0", "--metrics", f"{stem}.csv"]
    print("$", " ".join(cmd), flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=scratch)
    Path(f"{stem}.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or [""]
        return f"failed ({done.returncode}): {tail[0]}"
    with open(f"{stem}.epochs.csv") as f:
        return [(float(r["mean_loss"]), float(r["test_acc"])) for r in csv.DictReader(f)]


def main():
    p = check_parser(__doc__)
    p.add_argument("--epochs", type=int, default=3)
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    a.out = a.out.resolve()
    runs = {precision: curve(a, precision) for precision in ("f32", "bf16")}
    lines = [f"d2l's MLP on Fashion-MNIST on {a.device}, {a.epochs} epochs, in f32 and in bf16 "
             "(`--precision bf16`): training loss, and test accuracy, after each epoch.", "",
             "| precision | " + " | ".join(f"epoch {e + 1}" for e in range(a.epochs)) + " |",
             "|---|" + "---:|" * a.epochs]
    for precision, points in runs.items():
        cells = ([f"{loss:.4f} ({acc:.4f})" for loss, acc in points] if isinstance(points, list)
                 else [points])
        lines.append(f"| {precision} | " + " | ".join(cells) + " |")
    f32, bf16 = runs["f32"], runs["bf16"]
    if isinstance(f32, list) and isinstance(bf16, list) and len(f32) == len(bf16) == a.epochs:
        shares = [abs(b[0] - f[0]) / f[0] for f, b in zip(f32, bf16)]
        gap = 100 * abs(bf16[-1][1] - f32[-1][1])
        ok = max(shares) <= LOSS_SHARE and gap <= ACC_POINTS
        verdict = (f"verdict: bf16's loss curve against f32's on {a.device}: "
                   f"{'held' if ok else 'did not hold'} (training loss apart by "
                   f"{', '.join(f'{100 * s:.2f}' for s in shares)} % by epoch, goal at most "
                   f"{100 * LOSS_SHARE:g} %; last test accuracy {bf16[-1][1]:.4f} against "
                   f"{f32[-1][1]:.4f}, {gap:.2f} points, goal at most {ACC_POINTS})")
    else:
        verdict = f"verdict: bf16's loss curve against f32's on {a.device}: did not hold (f32: {f32}; bf16: {bf16})"
    text = "\n".join(lines + ["", verdict]) + "\n"
    (a.out / "bf16.md").write_text(text)
    print(text)
    sys.exit(0 if "held (" in verdict and "did not" not in verdict else 1)


if __name__ == "__main__":
    main()
