#!/usr/bin/env python3
"""Writes the logits files of test/tools/compare-spread.test into DIR.

    spread_files.py DIR

One F32 tensor `x` [2, 3] in each: expected.safetensors; noise1..noise32.safetensors, each the
expected values + 0.01 or - 0.01 (alternating), so every value's RMS spread is 0.01 exactly and
its derived tolerance 1e-4 + 7 x 0.01 = 0.0701; within.safetensors, every value within that
(row 1's top-1 flips, but its margin of 0.05 is inside the two tolerances, so the row is not
decided); beyond.safetensors, one value 0.08 off.
"""
import json
import os
import struct
import sys

EXPECTED = [3.0, 1.0, 0.0, 1.0, 1.05, 0.0]


def write(path, values):
    header = json.dumps({"x": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + struct.pack("<6f", *values))


def main(out):
    write(os.path.join(out, "expected.safetensors"), EXPECTED)
    for s in range(1, 33):
        sign = 1 if s % 2 else -1
        write(os.path.join(out, f"noise{s}.safetensors"), [v + sign * 0.01 for v in EXPECTED])
    within = [0.07, -0.07, 0.07, 0.07, -0.07, 0.0]
    write(os.path.join(out, "within.safetensors"), [v + d for v, d in zip(EXPECTED, within)])
    write(os.path.join(out, "beyond.safetensors"), [v + (0.08 if i == 2 else 0) for i, v in enumerate(EXPECTED)])


if __name__ == "__main__":
    main(sys.argv[1])
