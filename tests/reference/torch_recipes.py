"""Reference values for tests/framework/recipes.rs, from PyTorch (CPU, float32, as ember).

Run: python3 tests/reference/torch_recipes.py > tests/reference/torch_recipes.out.rs

The problem, which tests/framework/recipes.rs repeats in Rust:
  the network   Linear(2, 3), ReLU, Linear(3, 1), weights as tests/framework/tiny_net.rs's
  step t's data x[i] = sin(0.37 (i + 8 t) + 0.1)  (4 x 2, row-major)
                y[j] = 2 cos(0.53 (j + 4 t))       (4 x 1)
  the loss      Gluon's L2Loss, 0.5 (y_hat - y)^2, its mean over the batch (ember's
                step(batch_size) divides the summed gradients by the batch size)
  20 steps, 5 a "epoch" for the schedules counted in epochs.
Each case prints the parameters after the 20 steps (0.weight, 0.bias, 1.weight, 1.bias,
flattened), and for a schedule the rate of every step.
"""
import math

import torch
import torch.nn as nn
from torch.optim import lr_scheduler as sched

STEPS = 20
PER_EPOCH = 5
WEIGHTS = [
    ([3, 2], [0.1, -0.2, 0.3, 0.4, -0.5, 0.6]),
    ([3], [0.01, -0.02, 0.03]),
    ([1, 3], [0.7, -0.8, 0.9]),
    ([1], [0.05]),
]


def net():
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    with torch.no_grad():
        for p, (shape, values) in zip(model.parameters(), WEIGHTS):
            p.copy_(torch.tensor(values).reshape(shape))
    return model


def data(t):
    x = torch.tensor([math.sin(0.37 * (i + 8 * t) + 0.1) for i in range(8)]).reshape(4, 2)
    y = torch.tensor([2 * math.cos(0.53 * (j + 4 * t)) for j in range(4)]).reshape(4, 1)
    return x, y


def train(make_optimizer, make_schedule=None, clip_norm=None, clip_value=None):
    model = net()
    opt = make_optimizer(model.parameters())
    schedule = make_schedule(opt) if make_schedule else None
    rates = []
    for t in range(STEPS):
        rates.append(opt.param_groups[0]["lr"])
        x, y = data(t)
        opt.zero_grad()
        loss = (0.5 * (model(x) - y) ** 2).mean()
        loss.backward()
        if clip_norm is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        if clip_value is not None:
            nn.utils.clip_grad_value_(model.parameters(), clip_value)
        opt.step()
        if schedule:
            schedule.step()
    params = [v for p in model.parameters() for v in p.detach().flatten().tolist()]
    return params, rates


def show(name, values):
    print(f"pub const {name}: [f64; {len(values)}] = [{', '.join(f'{v:.9}' for v in values)}];")


O = torch.optim
OPTIMIZERS = {
    "SGD": lambda p: O.SGD(p, lr=0.1),
    "SGD_NESTEROV_WD": lambda p: O.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    "ADAM_WD": lambda p: O.Adam(p, lr=0.01, weight_decay=0.001),
    "ADAMW": lambda p: O.AdamW(p, lr=0.01),
    "ADAMW_OPTIONS": lambda p: O.AdamW(p, lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
    "RMSPROP": lambda p: O.RMSprop(p, lr=0.01),
    "RMSPROP_MOMENTUM_WD": lambda p: O.RMSprop(p, lr=0.01, momentum=0.5, weight_decay=0.01),
    "ADAGRAD": lambda p: O.Adagrad(p, lr=0.1),
}
for name, make in OPTIMIZERS.items():
    show(name, train(make)[0])

# The schedules, on SGD with momentum 0.9 at 0.1, stepped every batch.
momentum = lambda p: O.SGD(p, lr=0.1, momentum=0.9)
SCHEDULES = {
    "COSINE": lambda o: sched.CosineAnnealingLR(o, T_max=STEPS),
    "COSINE_WARMUP": lambda o: sched.SequentialLR(
        o,
        [
            sched.LinearLR(o, start_factor=1 / 4, end_factor=1.0, total_iters=3),
            sched.CosineAnnealingLR(o, T_max=STEPS - 4),
        ],
        milestones=[4],
    ),
    "STEP": lambda o: sched.StepLR(o, step_size=1 * PER_EPOCH, gamma=0.5),
    "MULTISTEP": lambda o: sched.MultiStepLR(o, milestones=[1 * PER_EPOCH, 3 * PER_EPOCH], gamma=0.1),
    "POLY": lambda o: sched.PolynomialLR(o, total_iters=STEPS, power=2.0),
    # ember's one cycle leaves the momentum alone.
    "ONECYCLE": lambda o: sched.OneCycleLR(o, max_lr=0.2, total_steps=STEPS, cycle_momentum=False),
}
for name, make in SCHEDULES.items():
    params, rates = train(momentum, make)
    show(name, params)
    show(f"{name}_LR", rates)

plain = lambda p: O.SGD(p, lr=0.1)
show("CLIP_NORM", train(plain, clip_norm=0.1)[0])
show("CLIP_VALUE", train(plain, clip_value=0.02)[0])
show("CLIP_BOTH", train(plain, clip_norm=0.1, clip_value=0.02)[0])

# The model summary: d2l's LeNet (7.6) in PyTorch, each module's output shape for one
# Fashion-MNIST image and its parameters, and the total. Activations and Flatten are left out:
# ember, as Gluon, fuses the activation into the layer before and flattens in Dense.
lenet = nn.Sequential(
    nn.Conv2d(1, 6, kernel_size=5, padding=2), nn.Sigmoid(), nn.AvgPool2d(2, 2),
    nn.Conv2d(6, 16, kernel_size=5), nn.Sigmoid(), nn.AvgPool2d(2, 2), nn.Flatten(),
    nn.Linear(400, 120), nn.Sigmoid(), nn.Linear(120, 84), nn.Sigmoid(), nn.Linear(84, 10),
)
x = torch.zeros(1, 1, 28, 28)
shapes, counts = [], []
for module in lenet:
    x = module(x)
    if not isinstance(module, (nn.Sigmoid, nn.Flatten)):
        shapes.append(list(x.shape))
        counts.append(sum(p.numel() for p in module.parameters()))
print(f"pub const LENET_SHAPES: [&[usize]; {len(shapes)}] = [{', '.join(f'&{s}' for s in shapes)}];")
print(f"pub const LENET_PARAMS: [usize; {len(counts)}] = {counts};")
print(f"pub const LENET_TOTAL: usize = {sum(p.numel() for p in lenet.parameters())};")
