#!/usr/bin/env python3
"""The SASS size of each kernel in a cubin (the build's
build/runtime/devices/cuda/CudaKernels.cubin, which ptxas assembles from the
PTX the runtime embeds), largest first; with --budget, a check.

A decode step at small batch launches most kernels once a layer, and between
two launches of one kernel the step streams gigabytes of weights through L2:
each launch fetches its code from HBM. A kernel that runs through its code
once (one tile a block) then waits on instruction fetch. The DSA indexer's
per-token form was 466 KB and took 40 us a launch for a few microseconds of
work; at 107 KB, 23 us (bench/NOTES.md, session 37).

    scripts/kernel-code-size.py build/runtime/devices/cuda/CudaKernels.cubin
    scripts/kernel-code-size.py CUBIN --budget 131072 --kernels a,b,c

--budget BYTES with --kernels NAMES (comma-separated, without the
daybreak_ prefix): exit 1 naming every listed kernel over the budget, and 2
for a listed kernel the cubin lacks.
"""
import argparse
import struct
import sys


def text_sizes(path):
    """{kernel: bytes} of the .text.<kernel> sections of an ELF64 file."""
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        sys.exit(f"{path}: not an ELF64 file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def section(i):
        # name, type, flags, addr, offset, size
        return struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)

    names = section(shstrndx)
    sizes = {}
    for i in range(shnum):
        name_offset, _, _, _, _, size = section(i)
        start = names[4] + name_offset
        name = data[start:data.index(b"\0", start)].decode()
        if name.startswith(".text."):
            sizes[name[len(".text."):]] = size
    return sizes


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cubin")
    parser.add_argument("--budget", type=int)
    parser.add_argument("--kernels", default="")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    sizes = text_sizes(args.cubin)
    listed = [k for k in args.kernels.split(",") if k]
    if args.budget is None:
        for name, size in sorted(sizes.items(), key=lambda kv: -kv[1])[: args.top]:
            print(f"{size:8d} {name}")
        return 0
    status = 0
    for kernel in listed:
        name = "daybreak_" + kernel
        if name not in sizes:
            print(f"{name}: not in {args.cubin}")
            status = 2
        elif sizes[name] > args.budget:
            print(f"{name}: {sizes[name]} bytes of SASS, over the budget of {args.budget}")
            status = max(status, 1)
        else:
            print(f"{name}: {sizes[name]} bytes")
    return status


if __name__ == "__main__":
    sys.exit(main())
