"""ember beside PyTorch, JAX and raw burn on the same workloads, the same machine, interleaved.

Each round runs every configuration once, each in a fresh process, in an order that rotates
from round to round. The workloads are written once, in bench/peers/workloads.py:
  chapter-barrier, chapter-none  the chapter's epoch (150 x 1024 x 512, MLP 512-2048-512-1,
                                 SGD), a barrier on every batch or none
  chapter-t+2                    the same under ember's t+2 policy (batch t starts after t-2
                                 finished); the peers have no such policy, so only ember (and
                                 --before) run it
  mlp                            d2l's Fashion-MNIST MLP (784-256-10, batch 256, SGD 0.1)
  lenet                          d2l's LeNet on Fashion-MNIST (batch 256, SGD 0.9)
  lenet-recipe                   the same LeNet with AdamW, cosine with warm-up, clipping and
                                 early stopping (bench/peers/workloads.py), beside PyTorch
  resnet                         d2l's small ResNet (`ember train --model resnet`, the network
                                 of examples/resnet.rs; batch 256, SGD 0.05) beside PyTorch (no
                                 JAX peer)
  char-lstm                      d2l's character language model (chapter 9): `ember train --data
                                 text:fortunes,tokens=200000,offset=0 --model lstm:256`, batch
                                 32 of 35 steps, the state carried, Adam 0.01, clipping at 1,
                                 beside PyTorch (bench/peers/char_lstm.py) from the same initial
                                 parameters (written once by the peer, loaded by both) and the
                                 same batches; the train perplexity of every epoch side by side
`--device` names where everything runs: `cpu` (ember on flex, the peers on the CPU), `cuda`
(ember, PyTorch and JAX on the first NVIDIA card) or `wgpu` (ember through wgpu's Vulkan on the
card, the peers on CUDA). `--graphs` adds "pytorch graphs" on a card: PyTorch with its whole
training step captured as one CUDA graph (`torch_peer.py --graphs`; chapter-barrier,
chapter-none, mlp, lenet, resnet, in f32), beside PyTorch eager. `--ember-args=--hybridize`
runs ember's recorded step, and `--before "$EMBER --device cuda"` beside it the eager one:
every ratio in one run (bench/gpu/run.sh --part 7). ember runs as a user runs it: `ember train --device D`. Raw burn is
`ember bench one --config raw`: the chapter's MLP written straight against burn, its data made
by the same `Synthetic` batches as ember's.
`--precision bf16` trains in mixed precision: ember with `--precision bf16`, PyTorch under
`torch.autocast(device, dtype=torch.bfloat16)`; JAX (no autocast of its own) and raw burn sit
it out. ember takes it on the CPU where oneDNN multiplies bf16 (AVX512_BF16, AMX; `ember
devices` says), and refuses it elsewhere.

It prints every run, then per workload the medians of the training time per epoch (over
rounds, and over every epoch after the first where a run has several: the first epoch of each
framework carries one-time costs, JAX's compilation for the short last batch among them) and of
the whole process's wall time, and the ratios ember/PyTorch, ember/JAX and ember/raw burn of
those medians, with the per-round ratios; for char-lstm, each epoch's perplexity in each
framework and their largest relative difference.

Capped at AVX2 (the variables of docs/profiling.md, on a CPU with AVX-512), it first shows what
each cap reached: `ember devices` names oneDNN's instruction set, and each peer multiplies the
chapter's largest product with and without the caps (bench/peers/isa_probe.py). A peer within
10% of its uncapped speed never used AVX-512 for it (PyTorch's MKL on an AMD CPU), ignores its
cap (JAX's large products: docs/profiling.md), or runs on a CPU whose AVX-512 gains little over
AVX2 (Zen 4 splits it into two 256-bit halves).

Not part of CI. Needs PyTorch and JAX (`python3 -m venv v && v/bin/pip install torch jax
jaxlib numpy`), Debian's data set (`apt-get install dataset-fashion-mnist`, or `--data-dir`),
and a release build (`cargo build --release`; with `--features ember-trainer/cuda` for cuda).
On a GPU machine, bench/gpu/run.sh runs it (bench/gpu/README.md).

Run: v/bin/python bench/peers.py [--rounds 3] [--epochs 3] [--workloads chapter-barrier,...]
         [--device cpu|cuda|wgpu] [--precision f32|bf16]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
import workloads as w  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EPOCH = re.compile(r"^epoch (\d+): time per epoch: ([0-9.]+) sec")
# The figure each epoch line ends with that the table keeps: a classifier's test accuracy, a
# language model's train perplexity.
METRIC = re.compile(r"(?:test_acc|train_perplexity) ([0-9.]+)")
DATA = w.FASHION_MNIST
# The variables that hold each library to a narrower instruction set (docs/profiling.md), and
# XLA's flag, which sits in XLA_FLAGS beside others.
CAPS = ["DNNL_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS"]
XLA_CAP = re.compile(r"--xla_cpu_max_isa=\S+")
WORKLOADS = ["chapter-barrier", "chapter-t+2", "chapter-none", "mlp", "lenet", "lenet-recipe",
             "resnet", "char-lstm"]


def fortunes(a):
    """char_lstm.py's flag for the corpus' folder, where --fortunes names one."""
    return ["--fortunes", a.fortunes] if a.fortunes else []


def commands(workload, a):
    """The command of each framework on `workload`: {name: argv}."""
    peer = lambda script: [a.python, str(ROOT / "bench/peers" / script), "--device", a.peer_device,
                           "--precision", a.precision]
    bf16 = a.precision == "bf16"
    # PyTorch's step captured as one CUDA graph, the strongest peer on a card (in f32: autocast
    # inside a capture wants a cache setting of its own).
    graphs = a.graphs and a.peer_device == "cuda" and not bf16
    on = ["--device", a.ember_device]
    # `--before`'s older build may not know --precision: it runs in f32.
    embers = {"ember": [a.ember, "train"] + on + (["--precision", a.precision] if bf16 else [])
              + a.ember_args}
    if a.before:
        before = a.before.split()
        embers["ember before"] = before[:1] + ["train"] + (on if "--device" not in before else []) + before[1:]
    if workload.startswith("chapter"):
        sync = workload.split("-")[1]
        flags = ["chapter", "--sync", sync]
        runs = {name: cmd + ["--sync", sync, "--epochs", "1"] for name, cmd in embers.items()}
        if sync in ("barrier", "none"):
            runs["pytorch"] = peer("torch_peer.py") + flags
            if graphs:
                runs["pytorch graphs"] = runs["pytorch"] + ["--graphs"]
            if not bf16:
                runs["jax"] = peer("jax_peer.py") + flags
        if sync == "barrier" and not bf16:
            # Raw burn is burn's own loop: it has no recorded step (`bench one` refuses it).
            raw = [x for x in a.ember_args if x != "--hybridize"]
            runs["raw burn"] = [a.ember, "bench", "one", "--config", "raw"] + on + raw
        return runs
    epochs = ["--epochs", str(a.epochs)]
    if workload == "char-lstm":
        text = "text:fortunes,tokens=200000,offset=0" + (f",dir={a.fortunes}" if a.fortunes else "")
        flags = ["--data", text, "--model", "lstm:256",
                 "--batch-size", "32", "--optimizer", "adam", "--lr", "0.01", "--clip-norm", "1",
                 "--load", a.char_init] + epochs
        return {name: cmd + flags for name, cmd in embers.items()} | {
            "pytorch": [a.python, str(ROOT / "bench/peers/char_lstm.py"), "--device",
                        a.peer_device, "--load", a.char_init] + fortunes(a) + epochs,
        }
    data = ["--data", f"fashion-mnist:{a.data_dir}"]
    if workload == "lenet-recipe":
        batch_size, lr = w.settings(workload)
        r = w.RECIPE
        flags = data + ["--model", "lenet", "--loss", "softmax-ce",
                 "--batch-size", str(batch_size), "--optimizer", "adamw", "--lr", str(lr),
                 "--lr-schedule", f"cosine:warmup={r['warmup']}", "--clip-norm",
                 str(r["clip_norm"]), "--early-stop", f"test_acc:{r['patience']}"] + epochs
        return {name: cmd + flags for name, cmd in embers.items()} | {
            "pytorch": peer("torch_peer.py") + [workload, "--dir", a.data_dir] + epochs,
        }
    batch_size, lr = w.settings(workload)
    model = {"mlp": "mlp:256", "lenet": "lenet", "resnet": "resnet"}[workload]
    flags = data + ["--model", model, "--loss", "softmax-ce", "--lr", str(lr),
                    "--batch-size", str(batch_size)] + epochs
    runs = {name: cmd + flags for name, cmd in embers.items()} | {
        "pytorch": peer("torch_peer.py") + [workload, "--dir", a.data_dir] + epochs,
    }
    if graphs:
        runs["pytorch graphs"] = runs["pytorch"] + ["--graphs"]
    # No JAX peer of the ResNet (its BatchNorm would be a library of its own: flax), nor of
    # mixed precision.
    if workload != "resnet" and not bf16:
        runs["jax"] = peer("jax_peer.py") + [workload, "--dir", a.data_dir] + epochs
    return runs


class Failed(Exception):
    """A run that failed or printed no epoch time: reported, and left out of the medians."""


def run(cmd):
    """Runs `cmd`; returns its epochs' training times (after the first, where there are
    several), test accuracies and wall time; raises Failed with the output's end."""
    start = time.perf_counter()
    # Each run in a scratch directory: nothing a run writes lands in the repository.
    with tempfile.TemporaryDirectory() as scratch:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "bench/peers"))
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=scratch, env=env)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise Failed(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout[-2000:]}\n"
                     f"{out.stderr[-2000:]}")
    times, accs = [], []
    for line in out.stdout.splitlines():
        if m := EPOCH.match(line):
            times.append(float(m.group(2)))
        if line.startswith("epoch") and (acc := METRIC.search(line)):
            accs.append(float(acc.group(1)))
        if line.startswith("{"):  # `ember bench one`: one JSON sample
            times.append(json.loads(line)["time"])
    if not times:
        raise Failed(f"{' '.join(cmd)} printed no epoch time:\n{out.stdout[-2000:]}")
    return times[1:] or times, accs, wall


def capped(env):
    """Whether `env` caps any library's instruction set."""
    return any(k in env for k in CAPS) or bool(XLA_CAP.search(env.get("XLA_FLAGS", "")))


def uncapped(env):
    """`env` without the ISA caps."""
    env = {k: v for k, v in env.items() if k not in CAPS}
    if XLA_CAP.search(env.get("XLA_FLAGS", "")):
        env["XLA_FLAGS"] = XLA_CAP.sub("", env["XLA_FLAGS"]).strip()
    return env


def check_caps(a, peers, rounds=3):
    """Where a cap is set on a CPU with AVX-512, prints ember's CPU kernels as `ember devices`
    names them, and each peer's product speed with and without the caps (medians of
    interleaved rounds), so that a cap that did not take is seen before the tables are read."""
    env = dict(os.environ)
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if a.device != "cpu" or not capped(env) or " avx512f" not in flags:
        return
    print("\nISA caps: " + " ".join(f"{k}={v}" for k, v in env.items()
                                   if k in CAPS or (k == "XLA_FLAGS" and XLA_CAP.search(v))))
    for e, label in ((env, "capped"), (uncapped(env), "uncapped")):
        out = subprocess.run([a.ember, "devices"] + a.ember_args, capture_output=True,
                             text=True, env=e)
        kernels = [line for line in out.stdout.splitlines()
                   if line.split()[:1] == ["cpu"] and "bf16" not in line.split()[1:2]]
        said = kernels[0] if kernels else f"`ember devices` failed ({out.returncode}): {out.stderr[-500:]}"
        print(f"ember {label}: {said}")
    speeds = {(peer, c): [] for peer in peers for c in (True, False)}
    probe = str(ROOT / "bench/peers/isa_probe.py")
    for _ in range(rounds):
        for (peer, c), got in speeds.items():
            out = subprocess.run([a.python, probe, peer], capture_output=True, text=True,
                                 env=env if c else uncapped(env))
            if out.returncode != 0 or not out.stdout.split():
                print(f"{probe} {peer} failed ({out.returncode}): {out.stderr[-1000:]}")
                continue
            got.append(float(out.stdout.split()[-1]))
    print("| peer | capped GFLOP/s | uncapped GFLOP/s | capped / uncapped |\n|---|---|---|---|")
    for peer in peers:
        if not (speeds[peer, True] and speeds[peer, False]):
            print(f"| {peer} | failed | | |")
            continue
        c, u = (statistics.median(speeds[peer, x]) for x in (True, False))
        note = " (capped within 10% of uncapped)" if c / u > 0.9 else ""
        print(f"| {peer} | {c:.0f} | {u:.0f} | {c / u:.2f}{note} |")
    print(flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=3, help="epochs of mlp and lenet per run")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    p.add_argument("--ember", default=str(target / "release/ember"))
    p.add_argument("--ember-args", default="", help="more flags for ember, e.g. '--cpu-kernels flex'")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda", "wgpu"],
                   help="cpu: ember on flex, the peers on the CPU; cuda: all on the first NVIDIA "
                   "card; wgpu: ember through wgpu (Vulkan) on the card, the peers on CUDA")
    p.add_argument("--precision", default="f32", choices=["f32", "bf16"],
                   help="bf16: ember's --precision bf16 beside PyTorch's autocast")
    p.add_argument("--data-dir", default=DATA, help="Fashion-MNIST's IDX files")
    p.add_argument("--fortunes", default="", help="char-lstm's corpus, where not Debian's "
                   "/usr/share/games/fortunes (ember's --data text:fortunes,dir=PATH)")
    p.add_argument("--graphs", action="store_true", help="on a card (cuda, wgpu), PyTorch with "
                   "its training step as one CUDA graph too (the peer of ember's --hybridize)")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--before", default="", help="another ember binary and its flags, run "
                   "beside the others as 'ember before' (e.g. '/tmp/ember-old --device flex')")
    a = p.parse_args()
    a.ember_args = a.ember_args.split()
    if "--device" in a.ember_args or "--devices" in a.ember_args:
        sys.exit(f"invalid --ember-args {' '.join(a.ember_args)!r}: give the device with --device")
    a.ember_device = {"cpu": "flex", "cuda": "cuda", "wgpu": "wgpu"}[a.device]
    a.peer_device = "cpu" if a.device == "cpu" else "cuda"
    workloads = [w for w in a.workloads.split(",") if w]
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown or not workloads:
        sys.exit(f"invalid --workloads {a.workloads!r}: choose from {','.join(WORKLOADS)}")
    if not Path(a.ember).is_file():
        sys.exit(f"invalid --ember {a.ember}: no such file (cargo build --release first, or set "
                 f"CARGO_TARGET_DIR as when it was built)")
    if a.rounds < 1 or a.epochs < 1:
        sys.exit(f"invalid --rounds {a.rounds} / --epochs {a.epochs}: both must be at least 1")
    print(f"{a.rounds} round(s); {a.epochs} epoch(s) of mlp and lenet per run; "
          f"ember: {a.ember} --device {a.ember_device} {' '.join(a.ember_args)}; peers on "
          f"{a.peer_device}; {a.precision}; {os.cpu_count()} CPUs", flush=True)

    # The language model's initial parameters, which both frameworks load.
    scratch = tempfile.TemporaryDirectory()
    a.char_init = str(Path(scratch.name) / "char-lstm-init.safetensors")
    if "char-lstm" in workloads:
        subprocess.run([a.python, str(ROOT / "bench/peers/char_lstm.py"), "--write-init",
                        a.char_init] + fortunes(a), check=True, capture_output=True)
    every = {name for w in workloads for name in commands(w, a)}
    check_caps(a, [peer for name, peer in (("pytorch", "torch"), ("jax", "jax")) if name in every])

    # results[workload][name][round] = (epoch times, test accuracies, wall); a failed run has
    # no entry for its round.
    results = {w: {name: {} for name in commands(w, a)} for w in workloads}
    failures = []
    for r in range(a.rounds):
        for w in workloads:
            runs = list(commands(w, a).items())
            shift = r % len(runs)
            for name, cmd in runs[shift:] + runs[:shift]:
                try:
                    times, accs, wall = run(cmd)
                except Failed as e:
                    # The other runs go on: one framework failing on a device is a finding.
                    print(f"round {r + 1} {w:15} {name:9}: FAILED\n{e}", flush=True)
                    failures.append(f"{w} {name} (round {r + 1})")
                    continue
                results[w][name][r] = (times, accs, wall)
                acc = f"; metric {' '.join(f'{x:.4f}' for x in accs)}" if accs else ""
                print(f"round {r + 1} {w:15} {name:9}: per measured epoch "
                      f"{' '.join(f'{t:.3f}' for t in times)} s{acc}; wall {wall:.1f} s", flush=True)

    print(f"\nmedians over {a.rounds} interleaved round(s) (epochs after each run's first); ratios "
          f"are ember / peer (below 1: ember is faster), per-round ratios in brackets\n")
    print("| workload | framework | time per epoch | whole process | epoch ratio | process ratio "
          "| epochs run | last test acc (perplexity) |")
    print("|---|---|---|---|---|---|---|---|")
    for w in workloads:
        per = results[w]
        ok = {n: rs for n, rs in per.items() if rs}
        epoch = {n: statistics.median(t for times, _, _ in rs.values() for t in times)
                 for n, rs in ok.items()}
        wall = {n: statistics.median(wl for _, _, wl in rs.values()) for n, rs in ok.items()}
        # Medians over rounds of how many epochs each run trained (early stopping ends some
        # sooner) and of its last test accuracy.
        ran = {n: statistics.median(len(accs) for _, accs, _ in rs.values()) for n, rs in ok.items()}
        last = {n: [accs[-1] for _, accs, _ in rs.values() if accs] for n, rs in ok.items()}
        for name in per:
            if name not in ok:
                print(f"| {w} | {name} | failed | | | | | |")
                continue
            ratio = wall_ratio = ""
            if name != "ember" and "ember" in ok:
                both = sorted(set(ok["ember"]) & set(ok[name]))
                rounds = [statistics.median(ok["ember"][r][0]) / statistics.median(ok[name][r][0])
                          for r in both]
                ratio = (f"{epoch['ember'] / epoch[name]:.3f} "
                         f"[{' '.join(f'{x:.2f}' for x in rounds)}]")
                wall_ratio = f"{wall['ember'] / wall[name]:.3f}"
            acc = f"{statistics.median(last[name]):.4f}" if last[name] else ""
            epochs_run = f"{ran[name]:g}" if last[name] else ""
            print(f"| {w} | {name} | {epoch[name]:.3f} s | {wall[name]:.1f} s | {ratio} | "
                  f"{wall_ratio} | {epochs_run} | {acc} |")
    curves(results)
    if failures:
        print(f"\nfailed runs, left out of the medians: {', '.join(failures)}")
        sys.exit(1)

def curves(results):
    """Each epoch's perplexity of the language model, per framework (medians over rounds), and
    the largest relative difference of ember's from PyTorch's."""
    per = results.get("char-lstm", {})
    if not (per.get("ember") and per.get("pytorch")):
        return
    median = {n: [statistics.median(c) for c in zip(*(accs for _, accs, _ in per[n].values()))]
              for n in ("ember", "pytorch")}
    print("\nchar-lstm: train perplexity per epoch (medians over rounds)")
    for name, curve in median.items():
        print(f"  {name:8} {' '.join(f'{p:.4f}' for p in curve)}")
    gaps = [abs(e - t) / t for e, t in zip(median["ember"], median["pytorch"])]
    print(f"  largest relative difference: {100 * max(gaps):.2f}% (epoch {gaps.index(max(gaps)) + 1})")


if __name__ == "__main__":
    main()
