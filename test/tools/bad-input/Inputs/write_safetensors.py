#!/usr/bin/env python3
"""Writes a safetensors file of zero-filled tensors.

    write_safetensors.py OUT [NAME:DTYPE:SHAPE ...]

SHAPE is dimensions joined with 'x' (2x4), or empty for a scalar; DTYPE is one of F32, F16, BF16,
I32. With no tensors the file holds an empty header ({}). The zeros are written as a hole.
"""
import json
import struct
import sys

SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4}


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    header, offset = {}, 0
    for spec in argv[2:]:
        name, dtype, shape = spec.split(":")
        dims = [int(d) for d in shape.split("x")] if shape else []
        size = SIZES[dtype]
        for d in dims:
            size *= d
        header[name] = {"dtype": dtype, "shape": dims, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    # The data area is a hole where the file system has them: large tensors cost no disk.
    with open(argv[1], "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.truncate(8 + len(text) + offset)


if __name__ == "__main__":
    main(sys.argv)
