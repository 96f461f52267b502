"""PyTorch beside `examples/transformer.rs`: the same Transformer encoder classifier on
Fashion-MNIST's rows (each image a sequence of its 28 rows; Linear to 64, d2l's sinusoidal
positional encoding with dropout 0.1, two pre-norm `nn.TransformerEncoderLayer`s of 4 heads,
feed-forward 128, dropout 0.1, the steps' mean, Linear to 10), Adam at 0.001, batch 256, a
fresh shuffle each epoch. Prints, per epoch, as the example does:
    epoch N: loss L, train acc A, test acc T, S sec

Run, interleaved with ember's example (bench/RESULTS.md):
    for r in 1 2 3; do
      target/release/examples/transformer /usr/share/datasets/fashion-mnist flex 2 | grep epoch
      python3 bench/peers/transformer.py --epochs 2 | grep epoch
    done
"""
import argparse
import math
import time

import torch
from torch import nn

import workloads as w


class RowTransformer(nn.Module):
    def __init__(self, width=64, heads=4, layers=2, classes=10, steps=28):
        super().__init__()
        self.embed = nn.Linear(28, width)
        position = torch.arange(steps, dtype=torch.float32).reshape(-1, 1)
        frequencies = torch.pow(10000, torch.arange(0, width, 2, dtype=torch.float32) / width)
        table = torch.zeros(1, steps, width)
        table[0, :, 0::2] = torch.sin(position / frequencies)
        table[0, :, 1::2] = torch.cos(position / frequencies)
        self.register_buffer("table", table)
        self.dropout = nn.Dropout(0.1)
        layer = nn.TransformerEncoderLayer(width, heads, 2 * width, 0.1, norm_first=True,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.classes = nn.Linear(width, classes)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, x):
        h = self.embed(x.reshape(x.shape[0], 28, 28))
        h = self.encoder(self.dropout(h + self.table))
        return self.classes(h.mean(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--dir", default=w.FASHION_MNIST)
    a = p.parse_args()
    torch.manual_seed(0)
    x, y = w.fashion_mnist(a.dir, "train", images=True)
    tx, ty = w.fashion_mnist(a.dir, "t10k", images=True)
    x, tx = torch.from_numpy(x), torch.from_numpy(tx)
    y, ty = torch.from_numpy(y), torch.from_numpy(ty)
    net = RowTransformer()
    opt = torch.optim.Adam(net.parameters(), lr=0.001)
    loss_of = nn.CrossEntropyLoss()
    print(f"pytorch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    for epoch in range(a.epochs):
        net.train()
        start, total, right, seen = time.perf_counter(), 0.0, 0, 0
        order = torch.randperm(len(x))
        for i in range(0, len(x), 256):
            idx = order[i:i + 256]
            scores = net(x[idx])
            loss = loss_of(scores, y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
            right += (scores.argmax(1) == y[idx]).sum().item()
            seen += len(idx)
        seconds = time.perf_counter() - start
        net.eval()
        with torch.no_grad():
            test = sum((net(tx[i:i + 1024]).argmax(1) == ty[i:i + 1024]).sum().item()
                       for i in range(0, len(tx), 1024)) / len(tx)
        print(f"epoch {epoch + 1}: loss {total / seen:.4f}, train acc {right / seen:.3f}, "
              f"test acc {test:.3f}, {seconds:.1f} sec", flush=True)


if __name__ == "__main__":
    main()
