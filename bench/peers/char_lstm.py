"""PyTorch beside `examples/char_lstm.rs`: the same character LSTM (Embedding 32, LSTM 256,
Linear to the vocabulary), the same corpus (Debian's fortunes cleaned as d2l cleans The Time
Machine, the first N characters), d2l's random partitioning into 32 subsequences of 35, Adam
at 0.01 with the gradients' global norm clipped to 1. Prints each epoch's perplexity and time.

Run, interleaved with ember's example (medians of the rounds; bench/RESULTS.md):
    for r in 1 2 3; do
      target/release/examples/char_lstm 1 200000 flex | grep epoch
      python3 bench/peers/char_lstm.py 1 200000 | grep epoch
    done
Until `bench/peers.py` takes sequence workloads (issue 64), this is the side-by-side run.
"""
import math
import os
import random
import re
import sys
import time

import torch, torch.nn as nn
torch.manual_seed(0); random.seed(0)

d = '/usr/share/games/fortunes'
lines = []
for f in sorted(os.listdir(d)):
    p = os.path.join(d, f)
    if '.' in f or not os.path.isfile(p) or f in ('art', 'ascii-art'):
        continue
    lines += [l for l in open(p, encoding='utf-8', errors='replace').read().splitlines() if l.strip() != '%']
lines = [re.sub('[^A-Za-z]+', ' ', l).strip().lower() for l in lines]
chars = [c for l in lines for c in l]
vocab = ['<unk>'] + [c for c, _ in sorted(((c, chars.count(c)) for c in set(chars)), key=lambda x: -x[1])]
idx = {c: i for i, c in enumerate(vocab)}
n = int(sys.argv[2]) if len(sys.argv) > 2 else 200000
corpus = [idx[c] for c in chars[:n]]
epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 1
class M(nn.Module):
    def __init__(s):
        super().__init__(); s.e = nn.Embedding(len(vocab), 32); s.l = nn.LSTM(32, 256, batch_first=True); s.o = nn.Linear(256, len(vocab))
    def forward(s, x):
        h, _ = s.l(s.e(x)); return s.o(h.reshape(-1, 256))
m = M(); opt = torch.optim.Adam(m.parameters(), 0.01); lossf = nn.CrossEntropyLoss()
def batches():
    off = random.randint(0, 34); c = corpus[off:]; k = (len(c) - 1) // 35
    starts = list(range(0, k * 35, 35)); random.shuffle(starts)
    for i in range(0, 32 * (k // 32), 32):
        s = starts[i:i+32]
        yield torch.tensor([c[j:j+35] for j in s]), torch.tensor([c[j+1:j+36] for j in s])
for e in range(epochs):
    t = time.time(); tot = 0; nb = 0
    for x, y in batches():
        l = lossf(m(x), y.reshape(-1)); opt.zero_grad(); l.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 1.0); opt.step(); tot += l.item(); nb += 1
    print(f"torch epoch {e+1}: perplexity {math.exp(tot/nb):.2f}, {time.time()-t:.1f} sec, {nb} batches")
