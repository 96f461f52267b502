"""ember's ONNX files, read by ONNX's own checker and run by ONNX Runtime: the independent
client of `ember export` in tests/onnx.rs.

    check.py compare MODEL.onnx INPUT.f32 D0,D1,... EXPECTED.f32
        runs MODEL on the input (raw little-endian float32 of that shape) and prints, as JSON,
        the output's shape and the largest difference from EXPECTED (raw float32).
    check.py accuracy MODEL.onnx DIR
        prints, as JSON, the accuracy on Fashion-MNIST's test set (DIR's t10k IDX files,
        gzipped or not), pixels scaled to [0, 1] as ember reads them.
"""

import gzip
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort


def session(path):
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    opset = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]), opset


def compare(path, x_path, shape, expected_path):
    sess, opset = session(path)
    shape = [int(d) for d in shape.split(",")]
    x = np.fromfile(x_path, dtype="<f4").reshape(shape)
    (y,) = sess.run(["output"], {"input": x})
    expected = np.fromfile(expected_path, dtype="<f4")
    diff = float(np.max(np.abs(y.reshape(-1) - expected))) if y.size == expected.size else None
    print(json.dumps({"shape": list(y.shape), "max_diff": diff, "opset": opset}))


def idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(directory, name):
    for candidate in (name, name + ".gz"):
        path = os.path.join(directory, candidate)
        if os.path.exists(path):
            return path
    raise SystemExit(f"no {name}[.gz] in {directory}")


def accuracy(path, directory):
    sess, _ = session(path)
    images = idx(find(directory, "t10k-images-idx3-ubyte")).astype(np.float32) / 255.0
    labels = idx(find(directory, "t10k-labels-idx1-ubyte"))
    x = images.reshape(len(images), 1, images.shape[1], images.shape[2])
    correct = 0
    for start in range(0, len(x), 1000):
        (logits,) = sess.run(["output"], {"input": x[start : start + 1000]})
        correct += int((logits.argmax(axis=1) == labels[start : start + 1000]).sum())
    print(json.dumps({"accuracy": correct / len(x), "examples": len(x)}))


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"compare": compare, "accuracy": accuracy}[command](*args)
