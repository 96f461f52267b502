"""PyTorch (eager, on the CPU or a CUDA card) on the workloads of bench/peers/workloads.py, as
d2l writes them.

Run: python3 bench/peers/torch_peer.py chapter|mlp|lenet|lenet-recipe|resnet
         [--sync barrier|none] [--epochs N] [--device cpu|cuda] [--precision f32|bf16]
         [--graphs]

`--precision bf16` runs every training step's forward pass and loss under
`torch.autocast(device, dtype=torch.bfloat16)`, PyTorch's mixed precision (f32 master weights);
the test accuracy is measured in f32, as ember measures it.

`--graphs` (cuda) captures the whole training step as one CUDA graph and replays it for every
batch, PyTorch's own answer to launch-bound small networks (`torch.cuda.graphs`' "whole-network
capture"): the peer of ember's `--hybridize`. A batch of another shape runs eagerly, as ember's
does.
"""
import copy
import time

import numpy as np
import torch
from torch import nn

import workloads as w


def chapter_net():
    sizes = (w.Chapter.features,) + w.Chapter.hidden
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    net = nn.Sequential(*layers, nn.Linear(sizes[-1], 1))
    for m in net:
        if isinstance(m, nn.Linear):
            nn.init.uniform_(m.weight, -0.07, 0.07)
            nn.init.uniform_(m.bias, -0.07, 0.07)
    return net


def lenet():
    return nn.Sequential(
        nn.Conv2d(1, 6, kernel_size=5, padding=2), nn.Sigmoid(), nn.AvgPool2d(2, 2),
        nn.Conv2d(6, 16, kernel_size=5), nn.Sigmoid(), nn.AvgPool2d(2, 2),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120), nn.Sigmoid(),
        nn.Linear(120, 84), nn.Sigmoid(),
        nn.Linear(84, 10))


class Residual(nn.Module):
    """d2l 8.6's block, as framework/src/models/resnet.rs writes it."""

    def __init__(self, in_channels, channels, use_1x1conv, strides):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, padding=1, stride=strides)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv3 = nn.Conv2d(in_channels, channels, 1, stride=strides) if use_1x1conv else None
        self.bn1, self.bn2 = nn.BatchNorm2d(channels), nn.BatchNorm2d(channels)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (self.conv3(x) if self.conv3 is not None else x))


def small_resnet():
    """framework/src/models/resnet.rs's `small_resnet`."""
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        Residual(8, 8, False, 1), Residual(8, 16, True, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


def autocast(args):
    """The precision of a training step's forward pass and loss: `--precision`."""
    return torch.autocast(torch.device(args.device).type, dtype=torch.bfloat16,
                          enabled=args.precision == "bf16")


def warm_up(net, loss_fn, x, y, args):
    """One forward, backward and update on copies, thrown away: nothing trains."""
    twin = copy.deepcopy(net)
    torch.optim.SGD(twin.parameters(), lr=0.1).zero_grad()
    with autocast(args):
        l = loss_fn(twin(x), y)
    l.backward()
    torch.optim.SGD(twin.parameters(), lr=0.1).step()
    finish(x.device)


class Captured:
    """`step(x, y)` (zero_grad, forward, loss, backward, the optimizer's step; it returns the
    tensors to read) captured once as a CUDA graph on copies of `x` and `y`, as PyTorch's
    documentation writes a whole-network capture: three warm-up steps on a side stream, then the
    capture. Those four steps train, so `tensors` (the parameters and buffers) are put back
    afterwards, in place, where the graph reads them. A call copies its batch into the graph's
    inputs and replays it, or runs `step` eagerly for a batch of another shape. What a call
    returns is overwritten by the next replay: read or clone it first."""

    def __init__(self, step, tensors, optimizer, x, y):
        self.step, self.x, self.y = step, x.clone(), y.clone()
        saved = [t.detach().clone() for t in tensors]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step(self.x, self.y)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = step(self.x, self.y)
        if optimizer.state:
            # A momentum or Adam state the warm-up started could not be put back as it was.
            raise SystemExit("--graphs: the optimizer holds a state; the peers' workloads use "
                             "plain SGD")
        with torch.no_grad():
            for t, s in zip(tensors, saved):
                t.copy_(s)

    def __call__(self, x, y):
        if x.shape != self.x.shape or y.shape != self.y.shape:
            return self.step(x, y)
        self.x.copy_(x)
        self.y.copy_(y)
        self.graph.replay()
        return self.out


def stepper(args, net, opt, loss_fn, x, y, metric=None):
    """The training step: eager, or captured (`--graphs`). It returns the loss and, with
    `metric`, `metric(y_hat, y)`, computed on the card inside the step."""
    def step(x, y):
        opt.zero_grad(set_to_none=True)
        with autocast(args):
            y_hat = net(x)
            l = loss_fn(y_hat, y)
        l.backward()
        opt.step()
        return (l.detach(), metric(y_hat.detach(), y) if metric else None)
    if not args.graphs:
        return step
    if args.device != "cuda":
        raise SystemExit(f"invalid --graphs on --device {args.device}: CUDA graphs need cuda")
    if args.precision != "f32":
        raise SystemExit(f"invalid --graphs with --precision {args.precision}: autocast's cache "
                         "inside a capture is not set up here (f32 only)")
    return Captured(step, list(net.parameters()) + list(net.buffers()), opt, x, y)


def kept(l, args):
    """The loss as the epoch keeps it: read now under a barrier, or left on the device (a copy
    where a replay would overwrite it)."""
    if args.sync == "barrier":
        return l.item()
    return l.clone() if args.graphs else l


def finish(device):
    """Waits for the work queued on `device` (a CUDA card runs it asynchronously)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def read(losses):
    """The sum of the losses kept on the device (`--sync none`), read once."""
    return float(torch.stack(losses).sum()) if losses and torch.is_tensor(losses[0]) else sum(losses)


def chapter(args):
    batch_size, lr = w.settings("chapter")
    data = w.Chapter(batch_size, args.seed)
    dev = torch.device(args.device)
    net = chapter_net().to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    loss_fn = lambda y_hat, y: 0.5 * ((y_hat - y) ** 2).mean()
    x, y = (torch.from_numpy(t).to(dev) for t in data.batch())
    warm_up(net, loss_fn, x, y, args)
    step = stepper(args, net, opt, loss_fn, x, y)
    for epoch in range(args.epochs):
        start = time.perf_counter()
        losses = []
        for _ in range(args.batches):
            x, y = data.batch()
            l, _ = step(torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev))
            losses.append(kept(l, args))
        total = read(losses)
        finish(dev)
        w.report(epoch, time.perf_counter() - start, total / args.batches)


def classify(args, images):
    batch_size, lr = w.settings(args.workload)
    train_x, train_y = map(torch.from_numpy, w.fashion_mnist(args.dir, "train", images))
    test_x, test_y = map(torch.from_numpy, w.fashion_mnist(args.dir, "t10k", images))
    dev = torch.device(args.device)
    if images:
        net = small_resnet() if args.workload == "resnet" else lenet()
        for m in net.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
    else:
        net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
        for m in net:
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.01)
                nn.init.zeros_(m.bias)
    net = net.to(dev)
    recipe = args.workload == "lenet-recipe"
    if recipe:
        opt = torch.optim.AdamW(net.parameters(), lr=lr)
        warmup, steps = w.RECIPE["warmup"], args.epochs * -(-len(train_x) // batch_size)
        schedule = torch.optim.lr_scheduler.SequentialLR(opt, [
            torch.optim.lr_scheduler.LinearLR(opt, 1 / warmup, 1.0, warmup - 1),
            torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps - warmup),
        ], milestones=[warmup])
        best, waited = None, 0
    else:
        opt = torch.optim.SGD(net.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    first = train_x[:batch_size].to(dev), train_y[:batch_size].to(dev)
    warm_up(net, loss_fn, *first, args)
    if recipe and args.graphs:
        raise SystemExit("invalid --graphs with lenet-recipe: its clipping and schedule step "
                         "outside a graph (ember's --hybridize runs it eagerly too)")
    net.train()
    hits = lambda y_hat, y: (y_hat.argmax(1) == y).sum()
    step = None if recipe else stepper(args, net, opt, loss_fn, *first, hits)
    for epoch in range(args.epochs):
        start = time.perf_counter()
        order = torch.randperm(len(train_x))
        losses, correct, batches = [], torch.zeros((), dtype=torch.int64, device=dev), 0
        net.train()
        for i in range(0, len(order), batch_size):
            idx = order[i:i + batch_size]
            x, y = train_x[idx].to(dev), train_y[idx].to(dev)
            if step:
                l, hit = step(x, y)
            else:
                with autocast(args):
                    y_hat = net(x)
                    l = loss_fn(y_hat, y)
                opt.zero_grad()
                l.backward()
                nn.utils.clip_grad_norm_(net.parameters(), w.RECIPE["clip_norm"])
                opt.step()
                schedule.step()
                l, hit = l.detach(), hits(y_hat, y)
            losses.append(kept(l, args))
            correct += hit
            batches += 1
        total, correct = read(losses), int(correct)
        finish(dev)
        seconds = time.perf_counter() - start
        net.eval()
        with torch.no_grad():
            acc = (net(test_x.to(dev)).argmax(1) == test_y.to(dev)).float().mean().item()
        w.report(epoch, seconds, total / batches, correct / len(order), acc)
        if recipe:
            if best is None or acc > best:
                best, waited = acc, 0
            else:
                waited += 1
                if waited == w.RECIPE["patience"]:
                    print(f"early stop after epoch {epoch + 1} (best test_acc {best:.4f})")
                    break


def banner(args):
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    where = torch.cuda.get_device_name(0) if args.device == "cuda" else f"{torch.get_num_threads()} threads"
    graphs = ", the step as one CUDA graph" if args.graphs else ""
    return f"torch {torch.__version__}, {args.device}: {where}, {args.precision}{graphs}"


if __name__ == "__main__":
    w.main("PyTorch", banner, chapter, classify, graphs=True)
