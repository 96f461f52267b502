"""The formulas that fill every tensor of the layer references (torch_layers.py,
torch_autocast.py), which tests/layers.rs repeats in Rust, and how a reference is printed. The
tensors take torch's default dtype when they are made: float64 in torch_layers.py, float32 in
torch_autocast.py.
  input   x[i] = sin(0.37 i + 0.1)            (row-major, i from 0)
  weights w[i] = 0.3 cos(0.53 i + 0.2 + k)    (k: the parameter's place in its layer, 0, 1, …)
  the gradient that flows into the output: g[i] = sin(0.71 i + 0.3), i.e. loss = sum(y * g)
"""
import math

import torch


def fill(shape, f):
    n = math.prod(shape)
    return torch.tensor([f(i) for i in range(n)]).reshape(shape)


def x_of(shape):
    return fill(shape, lambda i: math.sin(0.37 * i + 0.1))


def w_of(shape, k):
    return fill(shape, lambda i: 0.3 * math.cos(0.53 * i + 0.2 + k))


def g_of(shape):
    return fill(shape, lambda i: math.sin(0.71 * i + 0.3))


def show(name, t):
    values = ", ".join(f"{v:.9}" for v in t.detach().flatten().tolist())
    print(f"const {name}: [f64; {t.numel()}] = [{values}];")
