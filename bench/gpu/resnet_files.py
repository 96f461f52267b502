"""The ResNet check's files (bench/gpu/resnet_check.py): Fashion-MNIST cut to its first
examples, and ember's saved parameters read without ember: each tensor, the BatchNorm
statistics, and the test accuracy PyTorch's own copy of the network gets from them.
"""
import argparse
import gzip
import json
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "bench/peers"))
import workloads as w  # noqa: E402

FILES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
         "t10k-labels-idx1-ubyte"]


def cut(data_dir, train, test, into):
    """The first `train` training and `test` test examples of the IDX files in `data_dir`,
    written into `into`; returns `into`."""
    for name in FILES:
        path = Path(data_dir) / name
        raw = (gzip.open(f"{path}.gz") if Path(f"{path}.gz").exists() else open(path, "rb")).read()
        dims = raw[3]
        shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
        keep = min(train if name.startswith("train") else test, shape[0])
        item = 1
        for d in shape[1:]:
            item *= d
        head = raw[:4] + keep.to_bytes(4, "big") + raw[8:4 + 4 * dims]
        (into / name).write_bytes(head + raw[4 + 4 * dims:4 + 4 * dims + keep * item])
    return into


def safetensors(path):
    """Each F32 tensor of a safetensors file: {name: (shape, bytes)}."""
    data = Path(path).read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    body = data[8 + length:]
    return {name: (info["shape"], body[info["data_offsets"][0]:info["data_offsets"][1]])
            for name, info in header.items() if name != "__metadata__" and info["dtype"] == "F32"}


def running_statistics(path):
    """Each BatchNorm statistic in ember's file `path`: {name: [values]}."""
    import array

    out = {}
    for name, (shape, raw) in safetensors(path).items():
        if name.endswith(("running_mean", "running_var")):
            values = array.array("f")
            values.frombytes(raw)
            out[name] = list(values)
    return out


def pytorch_eval(path, data_dir):
    """The test accuracy of the network in ember's file `path`, as PyTorch computes it with its
    own copy of the network in eval mode (BatchNorm's running statistics)."""
    import torch
    import torch_peer

    net = torch_peer.small_resnet()
    state = net.state_dict()
    tensors = safetensors(path)
    # The same blocks in the same order, numbered by their place in each Sequential: ember's
    # global pooling flattens too, where PyTorch's network has a Flatten of its own, so the
    # Dense is 6 in ember and 7 in PyTorch. The blocks with parameters pair up in order.
    tops = lambda names: sorted({int(n.split(".")[0]) for n in names})
    ours, theirs = tops(tensors), tops(k for k in state if not k.endswith("num_batches_tracked"))
    if len(ours) != len(theirs):
        raise ValueError(f"{path} has parameters in blocks {ours}, PyTorch's network in {theirs}")
    to_torch = dict(zip(ours, theirs))
    tensors = {".".join([str(to_torch[int(n.split(".")[0])])] + n.split(".")[1:]): v
               for n, v in tensors.items()}
    missing = sorted(set(state) - set(tensors) - {k for k in state if k.endswith("num_batches_tracked")})
    if missing:
        raise ValueError(f"{path} lacks {missing[:4]} (it has {sorted(tensors)[:6]} ...)")
    for name, (shape, raw) in tensors.items():
        if name not in state:
            raise ValueError(f"{path} has {name}, which PyTorch's network does not")
        value = torch.frombuffer(bytearray(raw), dtype=torch.float32).reshape(shape)
        if tuple(value.shape) != tuple(state[name].shape):
            raise ValueError(f"{name}: {list(value.shape)} in {path}, {list(state[name].shape)} in PyTorch")
        state[name] = value
    net.load_state_dict(state)
    x, y = map(torch.from_numpy, w.fashion_mnist(data_dir, "t10k", True))
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    net = net.to(dev).eval()
    with torch.no_grad():
        return (net(x.to(dev)).argmax(1) == y.to(dev)).float().mean().item()


def check_parser(doc):
    """The arguments a check of the suite on Fashion-MNIST takes: --ember, --device, --out,
    --data-dir; the check adds its own."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--ember", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--data-dir", default=w.FASHION_MNIST)
    return p
