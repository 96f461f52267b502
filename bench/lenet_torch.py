"""d2l's LeNet (7.6, PyTorch tab) on Fashion-MNIST, the peer of `ember train --model lenet`.

Same data (Debian's IDX files), same network, Xavier initialization, SGD at lr 0.9, batches of
256 in a fresh shuffle each epoch, softmax cross-entropy. Prints one line per epoch:
  epoch N: time per epoch: S sec, train loss L, test_acc A
The time covers the training loop only, as ember's `time per epoch` does; the test accuracy
is computed after it, untimed.

Run: python3 bench/lenet_torch.py [--epochs N] [--model lenet|lenet-relu] [--dir DIR]
"""
import argparse
import gzip
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn


def idx(path):
    with gzip.open(path) if str(path).endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(directory, name):
    d = Path(directory)
    pick = lambda stem: d / f"{stem}.gz" if (d / f"{stem}.gz").exists() else d / stem
    x = idx(pick(f"{name}-images-idx3-ubyte")).astype(np.float32) / 255.0
    y = idx(pick(f"{name}-labels-idx1-ubyte")).astype(np.int64)
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y)


def lenet(relu):
    act = nn.ReLU if relu else nn.Sigmoid
    pool = (lambda: nn.MaxPool2d(2, 2)) if relu else (lambda: nn.AvgPool2d(2, 2))
    return nn.Sequential(
        nn.Conv2d(1, 6, kernel_size=5, padding=2), act(), pool(),
        nn.Conv2d(6, 16, kernel_size=5), act(), pool(),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120), act(),
        nn.Linear(120, 84), act(),
        nn.Linear(84, 10))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--model", default="lenet", choices=["lenet", "lenet-relu"])
    parser.add_argument("--dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--lr", type=float, default=0.9)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()
    torch.manual_seed(0)
    train_x, train_y = load(args.dir, "train")
    test_x, test_y = load(args.dir, "t10k")
    net = lenet(args.model == "lenet-relu")
    for m in net:
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr)
    loss = nn.CrossEntropyLoss()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.model}")
    for epoch in range(args.epochs):
        start = time.perf_counter()
        order = torch.randperm(len(train_x))
        total, batches = 0.0, 0
        net.train()
        for i in range(0, len(order), args.batch_size):
            idx_ = order[i:i + args.batch_size]
            l = loss(net(train_x[idx_]), train_y[idx_])
            opt.zero_grad()
            l.backward()
            opt.step()
            total += l.item()
            batches += 1
        seconds = time.perf_counter() - start
        net.eval()
        with torch.no_grad():
            acc = (net(test_x).argmax(1) == test_y).float().mean().item()
        print(f"epoch {epoch + 1}: time per epoch: {seconds:.4f} sec, train loss {total / batches:.4f}, "
              f"test_acc {acc:.4f}", flush=True)


if __name__ == "__main__":
    main()
