"""Reads a directory of TensorBoard event files with TensorBoard's own reader (the one
`tensorboard --logdir` uses) and prints its scalars as JSON: {"file_version": ..., "scalars":
{tag: [[step, value], ...]}}. tests/cli/tensorboard.rs runs it on ember's files.

Run: python tests/tensorboard/read.py DIR   (tensorboard from PyPI: scripts/install-tensorboard-check.sh)
"""
import json
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

accumulator = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
accumulator.Reload()
scalars = {tag: [[e.step, e.value] for e in accumulator.Scalars(tag)]
           for tag in accumulator.Tags()["scalars"]}
print(json.dumps({"file_version": accumulator.file_version, "scalars": scalars}))
