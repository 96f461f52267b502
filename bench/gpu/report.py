"""Writes the GPU suite's report.md from what bench/gpu/run.sh left in a directory: the steps,
the card and what `auto` picks, burn's kernel tuning, the chapter's 11 experiments, the sync
policies compared, ember beside PyTorch and JAX, where the ResNet's test accuracy falls, the
profile, and the verdicts on the suite's goals. Standard library only: CI runs it in the dry
run.

Run: python3 bench/gpu/report.py DIR [--mode TEXT]
"""
import argparse
import csv
import re
import statistics
from pathlib import Path

# The suite's goals (bench/gpu/README.md).
T2_THROUGHPUT = 0.03  # t+2 within 3 % of none's batches per second
T2_MEMORY_BATCHES = 2  # t+2's device memory within 2 batches of the barrier's
AUTO_THROUGHPUT = 0.03  # auto within 3 % of none's batches per second (issue 42)
AUTO_MEMORY_BATCHES = 3  # auto's memory within 3 batches of the barrier's (issue 42)
# ember / peer at most this, per workload: PyTorch eager, and PyTorch's step as one CUDA graph
# (issue 65's goals).
PEER_RATIO = {"pytorch": 1.0, "pytorch graphs": 1.2}
SECTIONS = ["Steps", "Correctness", "The card and `auto`", "Kernel tuning",
            "The chapter's 11 experiments", "Sync policies compared", "Beside PyTorch and JAX",
            "Profile of the slowest ratio", "Verdicts"]
# Part 1's checks: (their folder, what each wrote, the step that ran it).
CHECKS = [("resnet", "resnet.md", "resnet-check", "The ResNet's test accuracy"),
          ("nccl", None, "nccl-check", "Ranks through NCCL"),
          ("bf16", "bf16.md", "bf16-check", "bf16 against f32"),
          ("hybrid", "hybrid.md", "hybrid-check", "A recorded step against the eager step")]


def read(path):
    return path.read_text(errors="replace") if path.exists() else ""


def steps(out):
    rows = []
    for f in sorted(out.glob("steps-*.tsv")):
        rows += list(csv.DictReader(f.open(), delimiter="\t"))
    lines = ["| part | step | status | seconds | limit |", "|---|---|---|---:|---:|"]
    lines += [f"| {r['part']} | {r['step']} | {r['status']} | {r['seconds']} | {r['limit']} |"
              for r in rows]
    commands = [f"{r['step']}: `{r['command']}`" for r in rows if r["command"] != "-"]
    return rows, lines + ["", "Commands:", ""] + [f"- {c}" for c in commands]


def card(out):
    smi = read(out / "nvidia-smi.log")
    gpus = [l.strip(" |") for l in smi.splitlines() if re.search(r"NVIDIA [A-Z]\d", l)]
    lines = [f"Card: {gpus[0]}" if gpus else "Card: none seen (no nvidia-smi output)", ""]
    devices = read(out / "devices.log").strip()
    lines += ["`ember devices`:", "", "```", devices or "(no output)", "```"]
    environment = read(out / "environment.log").strip()
    if environment:
        lines += ["", "What the backends load, and the profilers:", "", "```", environment, "```"]
    return lines


def chapter(out):
    """Each device's summary table from its chapter.md, and (device, held, of) per device."""
    lines, held = [], []
    for report in sorted(out.glob("chapter-*/chapter.md")):
        device = report.parent.name.removeprefix("chapter-")
        text = report.read_text(errors="replace").splitlines()
        table = [l for l in text[: next((i for i, l in enumerate(text) if l.startswith("<a id")),
                                         len(text))] if l.startswith("|")]
        verdicts = [l.rsplit("|", 2)[1].strip() for l in table[2:]]
        held.append((device, sum(v == "held" for v in verdicts), len(verdicts)))
        lines += [f"### {device}", "", f"The claim held in {held[-1][1]} of {held[-1][2]} "
                  f"experiments ({report.parent.name}/chapter.md has each one's figures).", ""]
        lines += table + [""]
    return (lines or ["No chapter report was written."]), held


def batch_mb(summary_md):
    """The MB of one batch's activations (inputs, every layer's outputs, f32), from the line
    'Device and workload: D, B batches x N x F features, hidden [H1, H2]'."""
    m = re.search(r"batches x (\d+) x (\d+) features, hidden \[([\d, ]*)\]", summary_md)
    if not m:
        return None
    batch, features = int(m.group(1)), int(m.group(2))
    hidden = [int(h) for h in m.group(3).split(",") if h.strip()]
    return batch * (features + sum(hidden) + 1) * 4 / 2**20


def steady(trace):
    """Batches per second of each policy in `ember compare`'s trace.csv, the median over its
    runs' epochs after the first (the first carries the allocations and kernel compilation that
    every policy pays once), or over all epochs where runs have one."""
    epochs = {}
    with trace.open() as f:
        for r in csv.DictReader(f):
            key = (r["policy"], r.get("round", ""), int(r["epoch"]))
            start, end, n = epochs.get(key, (float("inf"), 0.0, 0))
            epochs[key] = (min(start, float(r["issue_start"])), max(end, float(r["done"])), n + 1)
    rates = {}
    for (policy, _, epoch), (start, end, n) in epochs.items():
        rates.setdefault(policy, {}).setdefault(epoch > 0, []).append(n / (end - start))
    return {policy: statistics.median(by.get(True) or by[False]) for policy, by in rates.items()}


# The policies the comparison judges: (policy, least share of none's throughput, most batches
# of peak memory over the barrier's). t+2's are the suite's goals; auto's are issue 42's.
JUDGED = [("t+2", 1 - T2_THROUGHPUT, T2_MEMORY_BATCHES),
          ("auto", 1 - AUTO_THROUGHPUT, AUTO_MEMORY_BATCHES)]


def compare(out):
    """Each device's comparison table and the verdicts on t+2 and auto: [(device, text, ok)]."""
    lines, verdicts = [], []
    for summary in sorted(out.glob("compare-*/summary.csv")):
        device = summary.parent.name.removeprefix("compare-")
        md = read(summary.parent / "summary.md")
        rows = {r["policy"]: r for r in csv.DictReader(summary.open())}
        rows.setdefault("t+2", rows.get("window:2"))
        lines += [f"### {device}", ""] + [l for l in md.splitlines() if l.startswith(("|", "Device"))]
        lines.append("")
        none, barrier = rows.get("none"), rows.get("barrier")
        trace = summary.parent / "trace.csv"
        rates = steady(trace) if trace.exists() else {}
        rates.setdefault("t+2", rates.get("window:2"))
        per = batch_mb(md)
        for name, least, most in JUDGED:
            judged = rows.get(name)
            if not (judged and none and barrier):
                verdicts.append((device, f"{name}, none or barrier is missing from the comparison", False))
                continue
            if rates.get(name) and "none" in rates:
                speed, over = rates[name] / rates["none"], "epochs after each run's first, from trace.csv"
            else:
                speed, over = float(judged["batches_per_s"]) / float(none["batches_per_s"]), "summary.csv"
            verdicts.append((device, f"{name} / none throughput {speed:.3f} ({over}; goal at least "
                             f"{least:.2f})", speed >= least))
            column = "peak_pool_mb" if judged["peak_pool_mb"] and barrier["peak_pool_mb"] else "peak_growth_mb"
            what = "device pool" if column == "peak_pool_mb" else "process memory growth (no device pool)"
            extra = float(judged[column]) - float(barrier[column])
            if per:
                verdicts.append((device, f"{name}'s peak {what} {extra:+.3g} MB beside the barrier's, "
                                 f"{extra / per:+.2f} batches of {per:.3g} MB (goal at most {most})",
                                 extra <= most * per))
        pngs = sorted(p.name for p in summary.parent.glob("*.png"))
        lines += [f"Plots in {summary.parent.name}/: {', '.join(pngs)}.", ""]
    return (lines or ["No comparison was written."]), verdicts


def peers(out):
    """The peers' tables, and [(log, workload, peer, ratio)] of ember / PyTorch (eager, and with
    CUDA graphs)."""
    lines, ratios = [], []
    for log in sorted(out.glob("peers-*.log")):
        text = read(log).splitlines()
        head = next((l for l in text if "round(s)" in l), "")
        table = [l for l in text if l.startswith("|")]
        lines += [f"### {log.stem}", "", head, ""] + (table or ["(no table: see the log)"]) + [""]
        for row in table:
            cells = [c.strip() for c in row.strip("|").split("|")]
            if len(cells) > 4 and cells[1] in PEER_RATIO and cells[4]:
                ratios.append((log.stem, cells[0], cells[1], float(cells[4].split()[0])))
    return (lines or ["The peers did not run."]), ratios


def tuning(out):
    """Each part's tuning table (tuneP/tune.md), under the part's name."""
    lines = []
    for table in sorted(out.glob("tune*/tune.md")):
        lines += [f"### {table.parent.name}", "", table.read_text(errors="replace").strip(), ""]
    return lines or ["bench/gpu/tune.py wrote nothing."]


def correctness(out, rows):
    """The checks of parts 1, 2 and 7: each one's tables and verdict lines as its script wrote them, and
    [verdict line] over all of them ('verdict: NAME: held|did not hold|not judged (...)')."""
    lines, verdicts = [], []
    status = {r["step"]: r["status"] for r in rows}
    for folder, report, step, title in CHECKS:
        if step not in status:
            lines += [f"### {title}", "", f"{step} was not run (its part was not).", ""]
            continue
        if status[step].startswith("skipped"):
            lines += [f"### {title}", "", f"{step}: {status[step]}.", ""]
            verdicts.append(f"verdict: {title}: not judged ({status[step]})")
            continue
        if report:
            text = read(out / folder / report).strip()
        else:  # nccl_check.py prints its findings: its lines after the commands; run.sh's
            # launcher.log says how Open MPI's launcher started
            said = [l for l in read(out / "launcher.log").splitlines() if l.startswith("launcher:")]
            said += [l for l in read(out / f"{step}.log").splitlines()
                     if l.strip() and not l.startswith("$")]
            text = "\n".join(f"- {l}" for l in said)
        if not text:
            text = read(out / f"{step}.log").strip()[-1500:]
        lines += [f"### {title}", "", text or f"{step} did not run.", ""]
        found = [l.lstrip("- ") for l in text.splitlines() if l.lstrip("- ").startswith("verdict:")]
        verdicts += found or [f"verdict: {title}: did not hold ({step} printed no verdict)"]
    return lines, verdicts


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("dir")
    p.add_argument("--mode", default="")
    a = p.parse_args()
    out = Path(a.dir)
    rows, step_lines = steps(out)
    chapter_lines, held = chapter(out)
    compare_lines, judged = compare(out)
    peer_lines, ratios = peers(out)
    check_lines, checks = correctness(out, rows)
    # run.sh writes profile/; a profile taken by hand beside it goes in profile-NAME/.
    profiles = [read(f).strip() for f in sorted(out.glob("profile*/profile.md"))]
    profile = "\n\n".join(profiles) or "No profile was written."
    profile = "\n".join(("##" + l) if l.startswith("#") else l for l in profile.splitlines())

    verdicts = [f"- {v.removeprefix('verdict: ')}" for v in checks]
    verdicts += [f"- The chapter's claims on {d}: held in {h} of {n}." for d, h, n in held]
    verdicts += [f"- {'met' if ok else 'NOT met'}: {d}: {text}." for d, text, ok in judged]
    verdicts += [f"- {'met' if r <= PEER_RATIO[p] else 'NOT met'}: {log}, {w}: ember / {p} "
                 f"{r:.3f} (goal at most {PEER_RATIO[p]})" for log, w, p, r in ratios]
    failed = [r["step"] for r in rows if r["status"] not in ("ok",) and not r["status"].startswith("skipped")]
    verdicts.append(f"- Steps that did not finish: {', '.join(failed) if failed else 'none'}.")

    body = {
        "Steps": step_lines,
        "The card and `auto`": card(out),
        "Correctness": check_lines,
        "Kernel tuning": tuning(out),
        "The chapter's 11 experiments": chapter_lines,
        "Sync policies compared": compare_lines,
        "Beside PyTorch and JAX": peer_lines,
        "Profile of the slowest ratio": [profile],
        "Verdicts": verdicts,
    }
    text = ["# ember's GPU suite", "", f"Mode: {a.mode or 'unknown'}. Written by bench/gpu/run.sh "
            "(bench/gpu/README.md).", ""]
    for title in SECTIONS:
        text += [f"## {title}", ""] + body[title] + [""]
    (out / "report.md").write_text("\n".join(text))
    # The report's tables and verdicts alone, for the README's "On a GPU".
    (out / "summary.md").write_text("\n".join(
        ["## Verdicts", ""] + verdicts + ["", "## Beside PyTorch and JAX", ""] + peer_lines
        + ["", "## Correctness", ""] + check_lines))


if __name__ == "__main__":
    main()
