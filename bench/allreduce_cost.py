"""The ring all-reduce's cost model, on paper: the time one step's gradients take to be summed.

A ring all-reduce of S bytes over N ranks sends 2(N-1) messages of S/N bytes from each rank
(N-1 of reduce-scatter, N-1 of all-gather): each rank sends and receives 2(N-1)/N x S bytes.
On links of bandwidth B with a latency a per message:

    T(N) = 2(N-1)/N x S / B  +  2(N-1) x a

The bandwidth term is nearly flat in N (it tends to 2 S / B); the latency term grows with N,
which is why large jobs sum through trees or hierarchical rings (NCCL picks them). Printed
for the chapter's MLP and a ResNet-50 in fp32, at 8, 64 and 512 ranks, on 25 and 100 Gbit/s.

Run: python3 bench/allreduce_cost.py [--latency-us 5]
"""
import argparse

MODELS = {
    "the chapter's MLP": 2.1e6,  # parameters (the chapter's MLP, 512-2048-512-1: 2,100,225)
    "ResNet-50": 25.6e6,
}
RANKS = [8, 64, 512]
LINKS_GBIT = [25, 100]


def seconds(params, ranks, gbit, latency):
    size = 4 * params
    bandwidth = gbit * 1e9 / 8
    return 2 * (ranks - 1) / ranks * size / bandwidth + 2 * (ranks - 1) * latency


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--latency-us", type=float, default=5.0)
    a = p.parse_args()
    latency = a.latency_us * 1e-6
    print(f"ring all-reduce of fp32 gradients, latency {a.latency_us:g} us a message, ms a step")
    print()
    header = " | ".join(f"{n} ranks, {g} Gbit/s" for g in LINKS_GBIT for n in RANKS)
    print(f"| model | MB | {header} |")
    print("|---|---|" + "---|" * (len(RANKS) * len(LINKS_GBIT)))
    for name, params in MODELS.items():
        cells = " | ".join(f"{1000 * seconds(params, n, g, latency):.2f}"
                           for g in LINKS_GBIT for n in RANKS)
        print(f"| {name} | {4 * params / 1e6:.1f} | {cells} |")


if __name__ == "__main__":
    main()
