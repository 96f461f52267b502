"""A short profile of the GPU suite's slowest ratio (bench/gpu/run.sh): where a batch's time goes.

It picks, from the peers' tables under --results, the workload with the highest ember / PyTorch
epoch ratio (the chapter's epoch under a barrier where there is none, as in a dry run), and runs
ember's command for it (bench/peers.py's, one epoch):
  - twice with ember's own trace (`--metrics`), under a barrier and under none: per batch, the
    frontend's time to issue it (making the batch and handing it to ember's backend thread)
    against the wall time per batch, which holds the backend thread's burn calls (autodiff,
    fusion, the kernels' launches), the card's work and the loss's readback;
  - under Nsight Compute (`ncu`, where the machine has it and the device is cuda), for a window
    of kernels past the start: each kernel's duration on the card, their mean and the kernels
    that take the most time.
It writes profile.md, the traces and ncu.csv into --out.

Run: python3 bench/gpu/profile.py --out DIR --ember PATH --device cuda [--results DIR]
         [--workload W] [--data-dir DIR] [--reuse] [-- EXTRA EMBER FLAGS]
"""
import argparse
import csv
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench/peers"))
import peers  # noqa: E402

# A row of bench/peers.py's table: | workload | framework | epoch | process | ratio [...] | ...
ROW = re.compile(r"^\| (\S+) \| pytorch \| [^|]+ \| [^|]+ \| ([0-9.]+) ")
NCU_SKIP, NCU_COUNT = 2000, 300


def slowest(results):
    """(workload, ratio, log) of the highest ember / PyTorch ratio in the peers' logs."""
    found = []
    for log in sorted(Path(results).glob("peers-*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if m := ROW.match(line):
                found.append((m.group(1), float(m.group(2)), log.name))
    return max(found, key=lambda f: f[1]) if found else None


def ember_command(workload, a):
    """ember's command line for `workload`, as bench/peers.py runs it, for one epoch."""
    ns = SimpleNamespace(ember=a.ember, ember_args=[], before="", python=sys.executable, epochs=1,
                         data_dir=a.data_dir, ember_device=a.device, peer_device="cuda",
                         precision="f32", graphs=False)
    return peers.commands(workload, ns)["ember"]


def trace(cmd, path, sync, reuse):
    """Runs `cmd` with a trace at `path` under `sync` (unless `reuse`: the trace is there);
    returns its batches' rows (after the first three, which carry one-time costs) or the error."""
    cmd = [c for c in cmd]
    if "--sync" in cmd:
        cmd[cmd.index("--sync") + 1] = sync
    else:
        cmd += ["--sync", sync]
    if not reuse:
        out = subprocess.run(cmd + ["--metrics", str(path)], capture_output=True, text=True,
                             timeout=120)
        if out.returncode != 0:
            return f"`{' '.join(cmd)}` failed ({out.returncode}): {out.stderr.strip()[-400:]}"
    if not path.exists():
        return f"no trace at {path}"
    with open(path) as f:
        rows = [r for r in csv.DictReader(f)]
    return rows[3:] if len(rows) > 6 else rows


def per_batch(rows):
    """Medians in ms: host issue time per batch, wall time per batch, and the batches."""
    ms = lambda x: 1000 * statistics.median(x) if x else float("nan")
    issue = [float(r["issue_end"]) - float(r["issue_start"]) for r in rows]
    done = [float(r["done"]) for r in rows]
    wall = [b - a for a, b in zip(done, done[1:])]
    return ms(issue), ms(wall), len(rows)


def ncu(cmd, out_dir, reuse):
    """Kernel durations of a window of `cmd`'s kernels under ncu (unless `reuse`: ncu.csv is
    there), or why there are none."""
    path = out_dir / "ncu.csv"
    exe = shutil.which("ncu")
    if reuse:
        if not path.exists():
            return "no ncu.csv to read"
    elif exe is None:
        return "ncu is not on this machine: ember's trace only"
    else:
        args = [exe, "--csv", "--print-units", "base", "--metrics", "gpu__time_duration.sum",
                "--launch-skip", str(NCU_SKIP), "--launch-count", str(NCU_COUNT), "--log-file",
                str(path)] + cmd
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=100)
        except subprocess.TimeoutExpired:
            return "ncu ran past 100 s"
        if done.returncode != 0 or not path.exists():
            return f"ncu failed ({done.returncode}): {done.stderr.strip()[-400:]}"
    text = path.read_text(errors="replace")
    start = text.find('"ID"')
    rows = list(csv.DictReader(text[start:].splitlines())) if start >= 0 else []
    kernels = [(r["Kernel Name"], float(r["Metric Value"].replace(",", ""))) for r in rows
               if r.get("Metric Name") == "gpu__time_duration.sum"]
    if not kernels:
        return "ncu profiled no kernel (fewer than the window's start were launched)"
    return kernels


def ember_parser(doc):
    """The flags of a suite script that runs ember's workloads (this one and tune.py): where it
    writes, which ember on which device, the data, and more flags for ember after --."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--ember", required=True)
    p.add_argument("--device", required=True)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("extra", nargs="*", help="more flags for ember (after --)")
    return p


def main():
    p = ember_parser(__doc__)
    p.add_argument("--results", default="")
    p.add_argument("--workload", default="", help="profile this bench/peers.py workload instead "
                   "of the slowest ratio's")
    p.add_argument("--reuse", action="store_true", help="run nothing: read the traces and ncu.csv "
                   "already in --out (a profile taken on the card, written up elsewhere)")
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    pick = slowest(a.results) if a.results else None
    workload, why = "chapter-barrier", "no peers' table to choose from: the chapter's epoch"
    if a.workload:
        workload, why = a.workload, "named by --workload"
    elif pick:
        workload, ratio, log = pick
        why = f"the highest ember / PyTorch epoch ratio, {ratio:.3f}, in {log}"
    lines = [f"# Profile: {workload} on {a.device}", "", f"Chosen: {why}.", ""]
    cmd = ember_command(workload, a) + a.extra
    lines += ["ember's trace, medians per batch (the first three batches left out):", "",
              "| sync | batches | host issue (ms) | wall (ms) | host share |", "|---|---:|---:|---:|---:|"]
    for sync in ("barrier", "none"):
        rows = trace(cmd, out / f"trace-{sync}.csv", sync, a.reuse)
        if isinstance(rows, str):
            lines.append(f"| {sync} | {rows} | | | |")
            continue
        issue, wall, n = per_batch(rows)
        lines.append(f"| {sync} | {n} | {issue:.3f} | {wall:.3f} | {issue / wall:.0%} |")
    lines += ["", "Host issue is ember's frontend making the batch and handing it to the "
              "backend thread; the rest of the wall time is that thread's burn calls (autodiff, "
              "fusion, kernel launches), the card's work and the loss's readback. Beside "
              "ncu's kernel time per batch below, it says how much of a batch the card "
              "computes.", ""]
    kernels = ncu(cmd, out, a.reuse) if a.device == "cuda" else "not a CUDA device: ember's trace only"
    if isinstance(kernels, str):
        lines.append(f"Nsight Compute: {kernels}.")
    else:
        durations = [d for _, d in kernels]
        total = sum(durations)
        lines += [f"Nsight Compute, kernels {NCU_SKIP + 1} to {NCU_SKIP + len(kernels)} of the run: "
                  f"{len(kernels)} kernels, {total * 1e-6:.3f} ms on the card in all, mean "
                  f"{statistics.mean(durations) * 1e-3:.1f} µs, median "
                  f"{statistics.median(durations) * 1e-3:.1f} µs.", "",
                  "| kernel | launches | total (µs) | share |", "|---|---:|---:|---:|"]
        by = {}
        for name, d in kernels:
            n, t = by.get(name, (0, 0.0))
            by[name] = (n + 1, t + d)
        for name, (n, t) in sorted(by.items(), key=lambda kv: -kv[1][1])[:8]:
            lines.append(f"| `{name[:60]}` | {n} | {t * 1e-3:.1f} | {t / total:.0%} |")
    lines += ["", f"Command: `{' '.join(cmd)}`"]
    (out / "profile.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
