"""How fast one peer multiplies the chapter's largest product (1024 x 512 times 512 x 2048, f32,
on the CPU), in GFLOP/s: `bench/peers.py` runs it with and without the ISA caps, to show
whether a cap reached a peer's products.

Run: python3 bench/peers/isa_probe.py torch|jax
Prints one line: the median GFLOP/s of 7 timings of 20 products each.
"""
import statistics
import sys
import time

M, K, N = 1024, 512, 2048


def timings(product, finish):
    product()  # compiled or warmed up, untimed
    finish()
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(20):
            product()
        finish()
        yield (time.perf_counter() - start) / 20


def main():
    peer = sys.argv[1] if len(sys.argv) == 2 else ""
    if peer == "torch":
        import torch

        a, b = torch.randn(M, K), torch.randn(K, N)
        product, finish = lambda: a @ b, lambda: None
    elif peer == "jax":
        import jax

        jax.config.update("jax_platforms", "cpu")
        a = jax.random.normal(jax.random.PRNGKey(0), (M, K))
        b = jax.random.normal(jax.random.PRNGKey(1), (K, N))
        f = jax.jit(lambda a, b: a @ b)
        last = []
        product = lambda: last.append(f(a, b))
        finish = lambda: (jax.block_until_ready(last), last.clear())
    else:
        sys.exit(f"invalid peer {peer!r}: give torch or jax")
    seconds = statistics.median(timings(product, finish))
    print(f"{2 * M * K * N / seconds / 1e9:.1f}")


if __name__ == "__main__":
    main()
