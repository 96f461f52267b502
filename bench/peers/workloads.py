"""What every peer of `ember` runs, written once: the workloads' settings, their data, and the
line each epoch prints.

Workloads (the same as `bench/peers.py` runs in ember):
  chapter  the chapter's epoch: 150 batches of X ~ N(0, 1) (1024 x 512, made on the host
           batch by batch, as ember's `Synthetic` does), y = 1, MLP 512-2048-512-1 (ReLU),
           loss 1/2 (y_hat - y)^2 averaged over the batch, SGD at 0.01. `--sync barrier`
           reads every batch's loss before the next is issued; `--sync none` reads them all
           after the last.
  mlp      d2l's MLP (5.2) on Fashion-MNIST: 784-256-10 (ReLU), batch 256, SGD at 0.1,
           softmax cross-entropy, a fresh shuffle each epoch.
  lenet    d2l's LeNet (7.6) on Fashion-MNIST: sigmoid, average pooling, Xavier
           initialization, batch 256, SGD at 0.9.
  lenet-recipe
           the same LeNet with a training recipe: AdamW at 0.003 (PyTorch's defaults, weight
           decay 0.01), a linear warm-up of 100 batches then cosine to 0 over the run, stepped
           every batch, the gradients' global norm clipped to 1, and early stopping when the
           test accuracy has not improved for 2 epochs. PyTorch only.
  resnet   the README's small ResNet (examples/resnet.rs, d2l 8.6's Residual): Conv 8 3x3,
           BatchNorm, ReLU, Residual(8), Residual(16, 1x1 conv, stride 2), global average
           pooling, Dense 10; Xavier initialization, batch 256, SGD at 0.05. PyTorch only.

Every peer runs on the device `--device` names (`cpu`, or `cuda` for the first NVIDIA card).
The data is made or kept on the host and moved to the device batch by batch, as ember does;
the loss is read on the host after every batch under `--sync barrier` (ember's default), and
once at the epoch's end under `--sync none`; the training accuracy is tallied on the device and
read at the epoch's end.

Every peer runs one unmeasured warm-up step that does not train (its update is thrown away),
then prints per epoch, as `ember train` does:
  epoch N: time per epoch: S sec, train loss L, train_acc A, test_acc T
The time covers the training loop only (data made or gathered, forward, backward, update,
the loss read); the test accuracy is computed after it, untimed.
"""
import argparse
import gzip
from pathlib import Path

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


def main(name, banner, chapter, classify, graphs=False):
    """A peer's command line: parses the arguments, prints `banner()`, runs the workload with
    `chapter(args)` or `classify(args, images)`. `graphs`: the peer takes `--graphs`."""
    args = arguments(name, graphs)
    print(banner(args), flush=True)
    if args.workload == "chapter":
        chapter(args)
    else:
        classify(args, images=args.workload in ("lenet", "lenet-recipe", "resnet"))


def arguments(name, graphs=False):
    p = argparse.ArgumentParser(description=f"{name}: the peers' workloads (bench/peers/workloads.py)")
    if graphs:
        p.add_argument("--graphs", action="store_true",
                       help="cuda: the training step captured once as a CUDA graph and replayed")
    p.add_argument("workload", choices=["chapter", "mlp", "lenet", "lenet-recipe", "resnet"])
    p.add_argument("--sync", default="barrier", choices=["barrier", "none"])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--precision", default="f32", choices=["f32", "bf16"],
                   help="bf16: mixed precision, where the peer has it (PyTorch's autocast)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batches", type=int, default=150, help="chapter: batches per epoch")
    p.add_argument("--dir", default=FASHION_MNIST)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    args.graphs = getattr(args, "graphs", False)
    return args


def settings(workload):
    """Batch size and learning rate, as `bench/peers.py` passes them to ember."""
    return {"chapter": (1024, 0.01), "mlp": (256, 0.1), "lenet": (256, 0.9),
            "lenet-recipe": (256, 0.003), "resnet": (256, 0.05)}[workload]


# lenet-recipe's warm-up batches, global norm and patience, as `bench/peers.py` gives them.
RECIPE = {"warmup": 100, "clip_norm": 1.0, "patience": 2}


class Chapter:
    """The chapter's batches, made on the host one at a time (a fresh draw per batch)."""

    features, hidden = 512, (2048, 512)

    def __init__(self, batch_size, seed):
        import numpy as np

        self.batch_size = batch_size
        self.rng = np.random.default_rng(seed)

    def batch(self):
        import numpy as np

        x = self.rng.standard_normal((self.batch_size, self.features), dtype=np.float32)
        return x, np.ones((self.batch_size, 1), dtype=np.float32)


def _idx(path):
    import numpy as np

    with gzip.open(path) if str(path).endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def fashion_mnist(directory, name, images):
    """`train` or `t10k`: images in [0, 1] as N x 1 x 28 x 28 (`images`) or N x 784, labels."""
    import numpy as np

    d = Path(directory)
    pick = lambda stem: d / f"{stem}.gz" if (d / f"{stem}.gz").exists() else d / stem
    x = _idx(pick(f"{name}-images-idx3-ubyte")).astype(np.float32) / 255.0
    y = _idx(pick(f"{name}-labels-idx1-ubyte")).astype(np.int64)
    return (x[:, None] if images else x.reshape(len(x), -1)), y


def report(epoch, seconds, loss, train_acc=None, test_acc=None):
    line = f"epoch {epoch + 1}: time per epoch: {seconds:.4f} sec, train loss {loss:.4f}"
    if train_acc is not None:
        line += f", train_acc {train_acc:.4f}"
    if test_acc is not None:
        line += f", test_acc {test_acc:.4f}"
    print(line, flush=True)
