"""The GPU suite's hybridize check (bench/gpu/run.sh --part 7): does a recorded step train what
the eager step trains?

`ember train --hybridize` records the training step once (forward, loss, backward, the
optimizer's update; on cuda as a CUDA graph) and replays it for every batch of the first one's
shape, with the parameters, the optimizer's state and BatchNorm's running statistics in device
buffers written in place. A replay that read a stale buffer, missed a write or kept the
recording's batch would train something else than the eager step. So for d2l's MLP, LeNet and
the small ResNet (bench/peers/workloads.py's settings, seed 0), one epoch eagerly and one with
`--hybridize`, each saved, and every saved tensor compared (the ResNet's running statistics
among them): the largest difference must be within --tolerance (1e-5, issue 65's goal on a
card, where fusion may join a recording's kernels otherwise than the eager pass's). The
hybridized run must also say it recorded its step: replayed as a graph (`--expect graph`, cuda
and wgpu) or run again (`--expect again`, flex, CI's dry run).

It prints a table and one verdict line, writes hybrid.md into --out, and exits 1 when the
verdict did not hold.

Run: python3 bench/gpu/hybrid_check.py --ember BIN --device cuda --out DIR [--data-dir DIR]
         [--train N --test M] [--expect graph|again] [--tolerance 1e-5]
"""
import array
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "bench/peers"))
sys.path.insert(0, str(ROOT / "bench/gpu"))
import workloads as w  # noqa: E402
from resnet_files import check_parser, cut, safetensors  # noqa: E402

MODELS = {"mlp": "mlp:256", "lenet": "lenet", "resnet": "resnet"}
SAID = {"graph": "hybridize: the step is recorded once and replayed",
        "again": "hybridize: the step is recorded once; this device replays no graph"}


def train(a, workload, hybridize):
    """One epoch of `workload`, saved: (its hybridize lines, its file), or why it failed."""
    batch_size, lr = w.settings(workload)
    stem = a.out / f"{workload}-{'hybridized' if hybridize else 'eager'}"
    cmd = [a.ember, "train", "--device", a.device, "--data", f"fashion-mnist:{a.data}",
           "--model", MODELS[workload], "--loss", "softmax-ce", "--batch-size", str(batch_size),
           "--lr", str(lr), "--epochs", "1", "--seed", "0", "--save", f"{stem}.safetensors"]
    cmd += ["--hybridize"] if hybridize else []
    print("$", " ".join(cmd), flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=scratch, timeout=600)
    said = done.stdout + done.stderr
    Path(f"{stem}.log").write_text(said)
    if done.returncode != 0:
        tail = said.strip().splitlines()[-1:] or [""]
        return f"failed ({done.returncode}): {tail[0]}"
    lines = [l for l in said.splitlines() if l.startswith("hybridize:")]
    return lines, Path(f"{stem}.safetensors")


def largest_difference(first, second):
    """The largest difference between two saved networks' tensors, and how many values, or why
    they cannot be compared."""
    a, b = safetensors(first), safetensors(second)
    if sorted(a) != sorted(b):
        return f"other tensors: {sorted(a)} / {sorted(b)}"
    worst, count = 0.0, 0
    for name, (shape, data) in a.items():
        if b[name][0] != shape:
            return f"{name}: shape {shape} / {b[name][0]}"
        x, y = array.array("f"), array.array("f")
        x.frombytes(data)
        y.frombytes(b[name][1])
        worst = max([worst] + [abs(p - q) for p, q in zip(x, y)])
        count += len(x)
    return worst, count


def main():
    p = check_parser(__doc__)
    p.add_argument("--train", type=int, default=0, help="only the first N training images")
    p.add_argument("--test", type=int, default=0, help="only the first M test images")
    p.add_argument("--expect", choices=list(SAID), default="graph")
    p.add_argument("--tolerance", type=float, default=1e-5)
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    a.out = a.out.resolve()
    scratch = tempfile.TemporaryDirectory()
    a.data = a.data_dir
    if a.train or a.test:
        a.data = str(cut(a.data_dir, a.train or 60000, a.test or 10000, Path(scratch.name)))
    lines = [f"One epoch on {a.device}, eager and `--hybridize`, seed 0: the largest difference "
             "between the saved tensors (parameters and running statistics), and what the "
             "hybridized run said.", "",
             "| model | largest difference | values | hybridized run said |", "|---|---:|---:|---|"]
    failures, figures = [], []
    for workload in MODELS:
        eager, hybrid = train(a, workload, False), train(a, workload, True)
        if isinstance(eager, str) or isinstance(hybrid, str):
            why = eager if isinstance(eager, str) else hybrid
            lines.append(f"| {workload} | {why} | | |")
            failures.append(f"{workload}: {why}")
            continue
        said, file = hybrid
        compared = largest_difference(eager[1], file)
        if isinstance(compared, str):
            lines.append(f"| {workload} | {compared} | | {'; '.join(said)} |")
            failures.append(f"{workload}: {compared}")
            continue
        worst, count = compared
        lines.append(f"| {workload} | {worst:.3g} | {count} | {'; '.join(said)} |")
        figures.append(f"{workload} {worst:.3g}")
        if worst > a.tolerance:
            failures.append(f"{workload} apart by {worst:.3g}")
        if not (said and said[0].startswith(SAID[a.expect])):
            failures.append(f"{workload}'s run did not say '{SAID[a.expect]}'")
    title = f"a recorded step against the eager step on {a.device}"
    detail = f"{', '.join(figures)}; tolerance {a.tolerance:g}"
    if failures:
        verdict = f"verdict: {title}: did not hold ({'; '.join(failures)}; {detail})"
    else:
        verdict = f"verdict: {title}: held ({detail})"
    text = "\n".join(lines + ["", verdict]) + "\n"
    (a.out / "hybrid.md").write_text(text)
    print(text)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
