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


def timings(product):
    """Seconds a product, 7 times over 20 products; `product` returns once its result is ready."""
    product()  # compiled or warmed up, untimed
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(20):
            product()
        yield (time.perf_counter() - start) / 20


def main():
    peer = sys.argv[1] if len(sys.argv) == 2 else ""
    if peer == "torch":
        import torch

        a, b = torch.randn(M, K), torch.randn(K, N)
        product = lambda: a @ b
    elif peer == "jax":
        import jax

        jax.config.update("jax_platforms", "cpu")
        a = jax.random.normal(jax.random.PRNGKey(0), (M, K))
        b = jax.random.normal(jax.random.PRNGKey(1), (K, N))
        f = jax.jit(lambda a, b: a @ b)
        # Each product waited for: one output buffer alive at a time, as in the training loops.
        product = lambda: f(a, b).block_until_ready()
    else:
        sys.exit(f"invalid peer {peer!r}: give torch or jax")
    seconds = statistics.median(timings(product))
    print(f"{2 * M * K * N / seconds / 1e9:.1f}")


if __name__ == "__main__":
    main()
