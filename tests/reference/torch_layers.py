"""Reference values for tests/layers.rs, from PyTorch (CPU, float64 then printed).

Run: python3 tests/reference/torch_layers.py > tests/reference/torch_layers.out.rs (then put back
the two header lines), read by tests/layers.rs.
Every tensor is filled by a formula of layer_formulas.py, which tests/layers.rs repeats in Rust:
  input   x[i] = sin(0.37 i + 0.1)            (row-major, i from 0)
  weights w[i] = 0.3 cos(0.53 i + 0.2 + k)    (k: the parameter's place in its layer, 0, 1, …)
  the gradient that flows into the output: g[i] = sin(0.71 i + 0.3), i.e. loss = sum(y * g)
Gluon's conventions where they differ from PyTorch's are computed here by their formula and
say so: BatchNorm's running variance (Gluon updates it with the biased batch variance).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from layer_formulas import g_of, show, w_of, x_of

torch.set_default_dtype(torch.float64)


def check(prefix, module, shape, params=()):
    for k, p in enumerate(params):
        with torch.no_grad():
            p.copy_(w_of(p.shape, k))
    x = x_of(shape).requires_grad_(True)
    y = module(x)
    (y * g_of(y.shape)).sum().backward()
    print(f"// {prefix}: input {list(shape)}, output {list(y.shape)}")
    show(f"{prefix}_Y", y)
    show(f"{prefix}_DX", x.grad)
    for k, p in enumerate(params):
        show(f"{prefix}_D{k}", p.grad)
    return y


conv = nn.Conv2d(2, 3, 3, stride=2, padding=1)
check("CONV2D", conv, (2, 2, 5, 5), [conv.weight, conv.bias])
conv = nn.Conv2d(2, 4, 2, dilation=2, groups=2, bias=False)
check("CONV2D_GROUPS", conv, (1, 2, 5, 5), [conv.weight])
conv = nn.Conv1d(2, 3, 3, padding=1, stride=2)
check("CONV1D", conv, (2, 2, 7), [conv.weight, conv.bias])
check("MAXPOOL", nn.MaxPool2d(2), (1, 2, 4, 5))
check("AVGPOOL", nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=True), (1, 1, 5, 5))
check("GLOBALAVG", nn.AdaptiveAvgPool2d(1), (2, 3, 3, 2))
dense = nn.Sequential(nn.Flatten(), nn.Linear(6, 4))
check("DENSE", dense, (2, 2, 3), [dense[1].weight, dense[1].bias])
ln = nn.LayerNorm(4)
check("LAYERNORM", ln, (2, 3, 4), [ln.weight, ln.bias])

bn = nn.BatchNorm2d(3, momentum=0.1)
bn.train()
check("BATCHNORM", bn, (4, 3, 2, 2), [bn.weight, bn.bias])
show("BATCHNORM_RUNNING_MEAN", bn.running_mean)
xb = x_of((4, 3, 2, 2))
biased = xb.var(dim=(0, 2, 3), unbiased=False)
print("// Gluon's running variance: 0.9 * 1 + 0.1 * (biased batch variance)")
show("BATCHNORM_RUNNING_VAR_GLUON", 0.9 * torch.ones(3) + 0.1 * biased)
bn.eval()
with torch.no_grad():
    bn.running_var.copy_(0.9 * torch.ones(3) + 0.1 * biased)
    show("BATCHNORM_EVAL_Y", bn(xb))

emb = nn.Embedding(5, 3)
with torch.no_grad():
    emb.weight.copy_(w_of((5, 3), 0))
idx = torch.tensor([[0, 2, 4], [1, 1, 3]])
y = emb(idx)
(y * g_of(y.shape)).sum().backward()
show("EMBEDDING_Y", y)
show("EMBEDDING_D0", emb.weight.grad)

for name, f in [("RELU", F.relu), ("SIGMOID", torch.sigmoid), ("TANH", torch.tanh),
                ("SOFTRELU", F.softplus), ("GELU", F.gelu)]:
    x = (3 * x_of((2, 5))).requires_grad_(True)
    y = f(x)
    (y * g_of(y.shape)).sum().backward()
    show(f"{name}_Y", y)
    show(f"{name}_DX", x.grad)

# d2l's LeNet in PyTorch (d2l 7.6, PyTorch tab), its state_dict filled by w_of, in eval mode.
lenet = nn.Sequential(
    nn.Conv2d(1, 6, kernel_size=5, padding=2), nn.Sigmoid(),
    nn.AvgPool2d(kernel_size=2, stride=2),
    nn.Conv2d(6, 16, kernel_size=5), nn.Sigmoid(),
    nn.AvgPool2d(kernel_size=2, stride=2),
    nn.Flatten(),
    nn.Linear(16 * 5 * 5, 120), nn.Sigmoid(),
    nn.Linear(120, 84), nn.Sigmoid(),
    nn.Linear(84, 10))
print("// LeNet state_dict: " + ", ".join(f"{k} {list(v.shape)}" for k, v in lenet.state_dict().items()))
with torch.no_grad():
    for k, (name, p) in enumerate(lenet.state_dict().items()):
        p.copy_(w_of(p.shape, k))
show("LENET_Y", lenet(x_of((2, 1, 28, 28))))
