#!/usr/bin/env bash
# ONNX's checker and ONNX Runtime, from PyPI, in a virtual environment of their own: the
# independent client that tests/onnx.rs runs `ember export`'s files in. The tests find its
# Python at $EMBER_ONNX_PYTHON, or at the path this script prints.
set -euo pipefail
venv="${EMBER_ONNX_VENV:-$HOME/.cache/ember/onnx-venv}"
if ! "$venv/bin/python" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check \
        onnx==1.23.2 onnxruntime==1.31.1 numpy
fi
echo "$venv/bin/python"
