"""The GPU suite's first step (bench/gpu/run.sh): burn's kernel tuning, paid once and measured.

With burn's `autotune` (the `cuda` feature has it), the first call of each shape benchmarks the
candidate kernels and keeps the fastest; `persistence` is to store the choices in cubecl's cache:
target/environment of the outermost Cargo project above the working directory, else the user's
(~/.cache/cubecl; run.sh runs every step in a scratch directory, so all of them share that one,
as bench/peers.py's runs do). This runs each workload's ember command (bench/peers.py's,
one epoch) twice, each a fresh process: the first tunes and fills the cache, the second reads it
back. The later steps then measure trained epochs, not tuning; the table says what tuning cost
and what the cache saves a later process.

It writes tune.md into --out.

Run: python3 bench/gpu/tune.py --out DIR --ember PATH --device cuda [--workloads W,...]
         [--data-dir DIR] [-- EXTRA EMBER FLAGS]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profile import ember_command, ember_parser  # noqa: E402
import peers  # noqa: E402  (on the path profile puts bench/ on)


def timed(cmd):
    """Seconds `cmd` took (bench/peers.py's run: in a scratch directory, as the peers' runs),
    or why it failed."""
    try:
        return peers.run(cmd)[2]
    except peers.Failed as failed:
        last = str(failed).strip().splitlines()[-1:] or [""]
        return f"failed: {last[0]}".replace("|", "\\|")


def main():
    p = ember_parser(__doc__)
    p.add_argument("--workloads", default="chapter-barrier,mlp,lenet,resnet")
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    note = (f"Device: {a.device}. Commands: bench/peers.py's for each workload, one epoch"
            + (f", with {' '.join(a.extra)}" if a.extra else "") + ".")
    lines = ["Each workload's ember run (bench/peers.py's command, one epoch), twice, each a fresh "
             "process: the first tunes burn's kernels for its shapes, the second finds the "
             "choices in cubecl's cache.", "",
             "| workload | first process (s) | second process (s) | second / first |",
             "|---|---:|---:|---:|"]
    failed = False
    for workload in a.workloads.split(","):
        cmd = ember_command(workload, a) + a.extra
        first = timed(cmd)
        second = timed(cmd) if not isinstance(first, str) else "not run"
        if isinstance(first, str) or isinstance(second, str):
            failed = True
            lines.append(f"| {workload} | {first if isinstance(first, str) else f'{first:.3f}'} | "
                         f"{second if isinstance(second, str) else f'{second:.3f}'} | |")
        else:
            lines.append(f"| {workload} | {first:.3f} | {second:.3f} | {second / first:.2f} |")
        print(lines[-1], flush=True)
        # Written after every workload: a step that runs out of time keeps the rows it has.
        (out / "tune.md").write_text("\n".join(lines + ["", note]) + "\n")
    print("\n".join(lines + ["", note]))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
