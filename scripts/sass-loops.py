#!/usr/bin/env python3
"""The SASS of one kernel in a cubin, by loop: each backward branch's body
(its instruction count and opcode mix), then the kernel's whole mix. A
static view for sessions without a GPU: where a kernel is issue-bound, the
instructions a loop iteration issues bound its time; where a loop has no
global load (cp.async staging, say), its waits are the shared memory's.

    scripts/sass-loops.py build/runtime/devices/cuda/CudaKernels.cubin \\
        daybreak_expert_gemv_tc_e2m1
    scripts/sass-loops.py probe.cubin probe_decode --top 12

A kernel template is easiest to read one instantiation at a time: compile a
probe that includes runtime/devices/cuda/CudaKernels.cu and instantiates it
in a kernel of its own (nvcc -gencode=arch=compute_90a,code=sm_90a -O3
-std=c++17 -cubin; bench/NOTES.md, session 53).

Static counts are not dynamic ones: a loop's body runs its trip count
times, and the branches back from the divergence fallbacks (BRA.DIV paths,
far from their targets) are listed too; read the bodies, not the sum.

Needs cuobjdump, which this machine's CUDA toolkit lacks: the CUDA_CUOBJDUMP
variable, or `pip download --no-deps nvidia-cuda-cuobjdump` and the
wheel's nvidia/cu13/bin/cuobjdump (unzip it), or one on the PATH.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

INSTRUCTION = re.compile(r"\s+/\*([0-9a-f]{4,6})\*/\s+(.*?)\s*;")


def cuobjdump():
    for candidate in (os.environ.get("CUDA_CUOBJDUMP"), shutil.which("cuobjdump"),
                      "/usr/local/cuda/bin/cuobjdump"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    sys.exit("sass-loops.py: no cuobjdump (set CUDA_CUOBJDUMP; see --help)")


def opcode(text):
    """The opcode of one instruction without its predicate and modifiers."""
    text = re.sub(r"^@!?U?P[0-9T]+\s+", "", text)
    return text.split()[0].split(".")[0]


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cubin")
    parser.add_argument("kernel", help="the kernel's (mangled) name")
    parser.add_argument("--top", type=int, default=8,
                        help="opcodes shown a loop (default 8)")
    args = parser.parse_args()
    sass = subprocess.run([cuobjdump(), "-sass", "-fun", args.kernel, args.cubin],
                          capture_output=True, text=True)
    if sass.returncode != 0:
        sys.exit(f"sass-loops.py: cuobjdump failed on {args.cubin}: {sass.stderr.strip()}")
    code = [(int(m.group(1), 16), m.group(2))
            for m in map(INSTRUCTION.match, sass.stdout.splitlines()) if m]
    if not code:
        sys.exit(f"sass-loops.py: {args.cubin} has no kernel {args.kernel}")
    for address, text in code:
        if not re.search(r"\bBRA\b", text) or "BRA.DIV" in text:
            continue
        target = re.search(r"0x([0-9a-f]+)", text)
        if not target or int(target.group(1), 16) >= address:
            continue
        first = int(target.group(1), 16)
        body = collections.Counter(opcode(t) for a, t in code if first <= a <= address)
        mix = ", ".join(f"{op} {n}" for op, n in body.most_common(args.top))
        print(f"loop {first:#07x}..{address:#07x}: {sum(body.values()):5d}  {mix}")
    whole = collections.Counter(opcode(t) for _, t in code)
    print(f"kernel: {len(code)} instructions; " +
          ", ".join(f"{op} {n}" for op, n in whole.most_common(2 * args.top)))
    local = sum(n for op, n in whole.items() if op in ("LDL", "STL"))
    if local:
        print(f"local memory: {local} LDL/STL (spills or a stack frame)")


if __name__ == "__main__":
    main()
