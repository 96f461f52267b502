"""Data-parallel step time against one device: `ember train --devices A,B` beside `--device A`.

Each round runs every configuration once, each in a fresh `ember train` process, in an order
that rotates from round to round. It prints every run, then per configuration the median time
per epoch (over rounds, and over every epoch after the first), the median step time, and the
ratio to the one-device configuration of the same backend, with the per-round ratios.

The configurations:
  flex          the chapter's MLP, --batches B --batch-size N on flex
  flex,flex     the same, each batch split across two flex replicas (one CPU: no speed-up can
                come from it; this measures what splitting, forking and summing cost)
  wgpu          the same on wgpu (lavapipe here, a card elsewhere), fewer and smaller batches
  wgpu,wgpu     two wgpu devices on the first adapter, each with its own queue
  remote,remote the flex configuration split across two `ember serve` processes on 127.0.0.1
                (burn-remote over WebSocket), which the script starts and stops; its ratio is
                against flex,flex, the same split on local devices

Not part of CI. Needs a release build (`cargo build --release`; its default features include
`ember serve`, which remote,remote uses).

Run: python3 bench/data_parallel.py [--rounds 3] [--epochs 2] [--configs flex,flex+flex,...]
"""
import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EPOCH = re.compile(r"^epoch (\d+): time per epoch: ([0-9.]+) sec")
# Configuration: (device flags, batches, batch size).
CONFIGS = {
    "flex": (["--device", "flex"], 40, 1024),
    "flex,flex": (["--devices", "flex,flex"], 40, 1024),
    "wgpu": (["--device", "wgpu"], 6, 256),
    "wgpu,wgpu": (["--devices", "wgpu,wgpu"], 6, 256),
    "remote,remote": (["--devices", "SERVERS"], 40, 1024),
}
# What each split configuration is measured against.
AGAINST = {"flex,flex": "flex", "wgpu,wgpu": "wgpu", "remote,remote": "flex,flex"}


def serve(binary, count):
    """Starts `count` `ember serve` processes on free ports; returns them and their devices."""
    servers, devices = [], []
    for _ in range(count):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        servers.append(subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{port}"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            sys.exit(f"ember serve on port {port} never listened (a build without the default `remote` feature?)")
        devices.append(f"remote:ws://127.0.0.1:{port}")
    return servers, ",".join(devices)


def run(binary, config, epochs, servers):
    flags, batches, batch_size = CONFIGS[config]
    flags = [servers if flag == "SERVERS" else flag for flag in flags]
    command = [binary, "train", *flags, "--batches", str(batches), "--batch-size",
               str(batch_size), "--epochs", str(epochs)]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    times = [float(m.group(2)) for line in out.splitlines() if (m := EPOCH.match(line))]
    return times[1:] or times, batches


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--configs", default="flex+flex,flex+wgpu+wgpu,wgpu",
                        help="configurations separated by '+'")
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    parser.add_argument("--binary", default=str(target / "release/ember"))
    args = parser.parse_args()
    configs = args.configs.split("+")
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        sys.exit(f"unknown configuration {unknown[0]!r}: expected one of {', '.join(CONFIGS)}")
    servers, devices = serve(args.binary, 2) if "remote,remote" in configs else ([], "")
    try:
        measure(args, configs, devices)
    finally:
        for server in servers:
            server.kill()


def measure(args, configs, devices):
    epochs = {c: [] for c in configs}
    per_round = {c: [] for c in configs}
    for round_ in range(args.rounds):
        order = configs[round_ % len(configs):] + configs[:round_ % len(configs)]
        for config in order:
            times, batches = run(args.binary, config, args.epochs, devices)
            print(f"round {round_ + 1} {config:<10} epochs {' '.join(f'{t:.3f}' for t in times)} s",
                  flush=True)
            epochs[config].extend(times)
            per_round[config].append(statistics.median(times))
    print()
    print("| configuration | time per epoch | per step | against [per round] |")
    print("|---|---|---|---|")
    for config in configs:
        median = statistics.median(epochs[config])
        steps = CONFIGS[config][1]
        one = AGAINST.get(config)
        if one in configs:
            ratio = median / statistics.median(epochs[one])
            rounds = " ".join(f"{a / b:.2f}" for a, b in zip(per_round[config], per_round[one]))
            against = f"{ratio:.2f} x {one} [{rounds}]"
        else:
            against = "reference" if config not in AGAINST else "-"
        print(f"| {config} | {median:.3f} s | {median / steps * 1000:.1f} ms | {against} |")


if __name__ == "__main__":
    main()
