#!/usr/bin/env bash
# TensorBoard from PyPI, in a virtual environment of its own: the independent reader that
# tests/cli/tensorboard.rs reads `ember train --tensorboard`'s event files with
# (tests/tensorboard/read.py). The tests find its Python at $EMBER_TENSORBOARD_PYTHON, or at
# the path this script prints.
set -euo pipefail
venv="${EMBER_TENSORBOARD_VENV:-$HOME/.cache/ember/tensorboard-venv}"
if ! "$venv/bin/python" -c 'import tensorboard' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check tensorboard==2.21.0
fi
echo "$venv/bin/python"
