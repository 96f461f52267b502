"""PyTorch beside `ember train --data text:fortunes --model lstm:256` (bench/peers.py's
`char-lstm` workload): d2l's character language model of chapter 9 on Debian's fortunes.

The same corpus (the fortunes cleaned as d2l cleans The Time Machine, the first N characters,
ember's vocabulary order), the same network (Embedding 32, LSTM 256, Linear to the vocabulary,
its parameters named as ember's chain names them: `0.weight`, `1.weight_ih_l0`, `2.weight`),
the same batches (sequential partitioning from a fixed offset, 32 rows of 35 tokens, the state
carried from batch to batch, detached, none at an epoch's start), Adam at 0.01 and the
gradients' global norm clipped to 1, from the same initial parameters: `--write-init FILE`
writes this network's initial parameters as safetensors, which `ember train --load FILE` and
`--load FILE` here both start from. Prints, per epoch, as ember does:
    epoch N: time per epoch: S sec, train loss L, train_perplexity P

Run: python3 bench/peers/char_lstm.py [--epochs 5] [--tokens 200000] [--offset 0]
         [--load FILE | --write-init FILE] [--device cpu|cuda] [--fortunes DIR]
"""
import argparse
import json
import math
import os
import re
import struct
import time

import numpy as np
import torch
from torch import nn

FORTUNES = "/usr/share/games/fortunes"
PICTURES = ("art", "ascii-art")


def corpus(tokens, folder=FORTUNES):
    """ember_datasets::text::fortunes::characters: letters and spaces, lower case, one token a
    character; `<unk>`, then by frequency, ties in the order first seen."""
    chars = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.splitext(name)[1] or not os.path.isfile(path) or name in PICTURES:
            continue
        text = open(path, "rb").read().decode("utf-8", errors="replace")
        for line in text.split("\n"):
            line = line.removesuffix("\r")
            if line.strip() == "%":
                continue
            chars.extend(re.sub("[^A-Za-z]+", " ", line).strip().lower())
    counts = {}
    for c in chars:
        counts[c] = counts.get(c, 0) + 1
    vocab = ["<unk>"] + sorted(counts, key=lambda c: -counts[c])
    index = {c: i for i, c in enumerate(vocab)}
    return [index[c] for c in chars[:tokens]], vocab


class Model(nn.Module):
    def __init__(self, vocabulary, embed=32, hidden=256):
        super().__init__()
        self.add_module("0", nn.Embedding(vocabulary, embed))
        self.add_module("1", nn.LSTM(embed, hidden, batch_first=True))
        self.add_module("2", nn.Linear(hidden, vocabulary))

    def forward(self, x, state):
        h, state = self._modules["1"](self._modules["0"](x), state)
        return self._modules["2"](h).reshape(-1, self._modules["2"].out_features), state


def save(model, path):
    """The parameters as safetensors (f32, little-endian), by their names."""
    tensors = {k: v.detach().cpu().contiguous().numpy().astype("<f4") for k, v in model.state_dict().items()}
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        blob = array.tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def load(model, path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    state = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        array = np.frombuffer(data[8 + n + a:8 + n + b], dtype="<f4").reshape(meta["shape"])
        state[name] = torch.from_numpy(array.copy())
    model.load_state_dict(state)


def batches(tokens, batch, steps, offset):
    """ember's sequential partitioning (ember_datasets::text::Subsequences) from `offset`."""
    row = (len(tokens) - offset - 1) // batch
    data = np.array(tokens)
    for b in range(row // steps):
        starts = [offset + r * row + b * steps for r in range(batch)]
        x = np.stack([data[s:s + steps] for s in starts])
        y = np.stack([data[s + 1:s + 1 + steps] for s in starts])
        yield torch.from_numpy(x), torch.from_numpy(y)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--tokens", type=int, default=200_000)
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=35)
    p.add_argument("--load")
    p.add_argument("--write-init")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--fortunes", default=FORTUNES,
                   help="the fortunes' folder (ember's --data text:fortunes,dir=PATH)")
    a = p.parse_args()
    torch.manual_seed(0)
    tokens, vocab = corpus(a.tokens, a.fortunes)
    model = Model(len(vocab))
    if a.write_init:
        save(model, a.write_init)
        print(f"initial parameters written to {a.write_init}")
        return
    if a.load:
        load(model, a.load)
    model.to(a.device)
    print(f"pytorch {torch.__version__}, {torch.get_num_threads()} threads, {a.device}: "
          f"{len(tokens)} tokens, a vocabulary of {len(vocab)}", flush=True)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    loss_of = nn.CrossEntropyLoss()
    for epoch in range(a.epochs):
        start, total, count, state = time.perf_counter(), 0.0, 0, None
        for x, y in batches(tokens, a.batch_size, a.steps, a.offset):
            x, y = x.to(a.device), y.to(a.device)
            if state is not None:
                state = tuple(s.detach() for s in state)
            scores, state = model(x, state)
            loss = loss_of(scores, y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            total += loss.item()
            count += 1
        seconds = time.perf_counter() - start
        mean = total / count
        print(f"epoch {epoch + 1}: time per epoch: {seconds:.4f} sec, train loss {mean:.6f}, "
              f"train_perplexity {math.exp(mean):.4f}", flush=True)


if __name__ == "__main__":
    main()
