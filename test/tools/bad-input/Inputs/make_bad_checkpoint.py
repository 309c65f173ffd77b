#!/usr/bin/env python3
"""Builds broken inputs for the bad-input lit tests from the small DeepSeek-V3.2 fixture.

  make_bad_checkpoint.py checkpoint KIND OUTDIR   copy the fixture to OUTDIR and apply corruption KIND
  make_bad_checkpoint.py inputs KIND OUT          write a broken or oversized inputs.json to OUT
  make_bad_checkpoint.py flip-weights ARTIFACT INSPECT
                                                  flip one byte inside the artifact's weights section,
                                                  found in INSPECT (`daybreak-run inspect` output)
  make_bad_checkpoint.py truncate FILE N          cut FILE to its first N bytes (negative: drop -N bytes)
  make_bad_checkpoint.py truncate-keep-size FILE N
                                                  as truncate, then rewrite the file size recorded in
                                                  the header so only the section bounds can catch it

Everything is derived from the fixture at run time so the tests follow it if it is regenerated.
"""
import json
import os
import re
import shutil
import struct
import sys

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                       "fixtures", "deepseek_v32_small")

# Tensors the corruptions touch; all exist in the fixture (checked below).
NORM = "model.norm.weight"                                      # BF16 [hidden]
BIAS = "model.layers.1.mlp.gate.e_score_correction_bias"        # F32 [n_routed_experts]
DROPPED = "model.layers.1.self_attn.kv_a_layernorm.weight"      # BF16 [kv_lora_rank]
OVERLAP_A = "model.layers.0.input_layernorm.weight"
OVERLAP_B = "model.layers.0.mlp.down_proj.weight"               # stored right after OVERLAP_A


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    return header, blob[8 + n:]


def write_safetensors(path, header, data, header_len=None):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    n = len(text) if header_len is None else header_len
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", n) + text + data)


def tensors(header):
    return {k: v for k, v in header.items() if k != "__metadata__"}


def repack(header, data, drop):
    """Drops tensor `drop` and rewrites every offset so the data area stays dense."""
    out, chunks, pos = {}, [], 0
    if "__metadata__" in header:
        out["__metadata__"] = header["__metadata__"]
    for name, t in sorted(tensors(header).items(), key=lambda kv: kv[1]["data_offsets"][0]):
        if name == drop:
            continue
        b, e = t["data_offsets"]
        chunks.append(data[b:e])
        out[name] = dict(t, data_offsets=[pos, pos + e - b])
        pos += e - b
    return out, b"".join(chunks)


def corrupt_checkpoint(kind, outdir):
    if os.path.exists(outdir):
        shutil.rmtree(outdir)
    shutil.copytree(FIXTURE, outdir)
    st = os.path.join(outdir, "model.safetensors")
    cfg_path = os.path.join(outdir, "config.json")
    header, data = read_safetensors(st)
    for name in (NORM, BIAS, DROPPED, OVERLAP_A, OVERLAP_B):
        assert name in header, name
    with open(cfg_path) as f:
        cfg = json.load(f)

    if kind == "truncated":
        # Keep the header intact and cut the data area in half.
        with open(st, "rb") as f:
            blob = f.read()
        (n,) = struct.unpack("<Q", blob[:8])
        with open(st, "wb") as f:
            f.write(blob[:8 + n + len(data) // 2])
    elif kind == "header-too-long":
        size = 8 + len(json.dumps(header).encode()) + len(data)
        write_safetensors(st, header, data, header_len=size * 2)
    elif kind == "offsets-out-of-range":
        # Same byte size as the shape needs, but placed past the end of the data area.
        b, e = header[NORM]["data_offsets"]
        header[NORM]["data_offsets"] = [len(data) + 4096, len(data) + 4096 + e - b]
        write_safetensors(st, header, data)
    elif kind == "offsets-overlap":
        # OVERLAP_B starts half way into OVERLAP_A; its size still matches its shape.
        a0, a1 = header[OVERLAP_A]["data_offsets"]
        b0, b1 = header[OVERLAP_B]["data_offsets"]
        assert a1 == b0
        shift = (a1 - a0) // 2
        header[OVERLAP_B]["data_offsets"] = [b0 - shift, b1 - shift]
        write_safetensors(st, header, data)
    elif kind == "dtype-i32":
        # F32 -> I32 keeps the shape and the byte size; only the dtype is wrong.
        assert header[BIAS]["dtype"] == "F32"
        header[BIAS]["dtype"] = "I32"
        write_safetensors(st, header, data)
    elif kind == "dtype-i16":
        # BF16 -> I16 keeps the shape and the byte size; only the dtype is wrong.
        assert header[NORM]["dtype"] == "BF16"
        header[NORM]["dtype"] = "I16"
        write_safetensors(st, header, data)
    elif kind == "hidden-size":
        cfg["hidden_size"] = cfg["hidden_size"] // 2
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=2)
    elif kind == "missing-tensor":
        header, data = repack(header, data, DROPPED)
        write_safetensors(st, header, data)
    elif kind == "model-type":
        cfg["model_type"] = "deepseek_v99"
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=2)
    elif kind == "config-syntax":
        with open(cfg_path) as f:
            text = f.read()
        with open(cfg_path, "w") as f:
            f.write(text[: len(text) // 2])  # cut mid-object
    elif kind == "config-not-object":
        with open(cfg_path, "w") as f:
            f.write("[1, 2, 3]\n")
    elif kind == "config-missing":
        os.remove(cfg_path)
    elif kind == "config-wrong-type":
        cfg["num_hidden_layers"] = "two"
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=2)
    elif kind == "safetensors-missing":
        os.remove(st)
    else:
        sys.exit("unknown checkpoint corruption: " + kind)


def write_inputs(kind, out):
    with open(os.path.join(FIXTURE, "inputs.json")) as f:
        text = f.read()
    inputs = json.loads(text)
    if kind == "syntax":
        text = text[: len(text) // 2]
    elif kind == "no-sequences":
        text = json.dumps({"description": "no sequences key"})
    elif kind == "ids-not-ints":
        inputs["sequences"][0]["prompt_ids"] = ["a", "b"]
        text = json.dumps(inputs)
    elif kind == "id-out-of-vocab":
        inputs["sequences"][0]["prompt_ids"][0] = 1 << 20
        text = json.dumps(inputs)
    elif kind.startswith("long-prompt="):
        # One sequence whose prompt alone has N tokens, no decode steps.
        n = int(kind.split("=")[1])
        seq = dict(inputs["sequences"][0])
        seq["prompt_ids"] = [(7 * i + 3) % 200 + 2 for i in range(n)]
        inputs["sequences"] = [seq]
        text = json.dumps(inputs)
    else:
        sys.exit("unknown inputs corruption: " + kind)
    with open(out, "w") as f:
        f.write(text)


def flip_weights(path, inspect_path):
    # Find the weights section the way a user would: through `daybreak-run inspect`.
    with open(inspect_path) as f:
        m = re.search(r"section weights: .* at offset (\d+)", f.read())
    if not m:
        sys.exit("no 'section weights: ... at offset N' line in " + inspect_path)
    offset = int(m.group(1)) + 1000
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x40]))


def truncate(path, n):
    size = os.path.getsize(path)
    keep = n if n >= 0 else size + n
    with open(path, "r+b") as f:
        f.truncate(keep)


def truncate_keep_size(path, n):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(64)
    # The header records the file size as a little-endian u64; find it without hard-coding the layout.
    field = struct.pack("<Q", size)
    at = [i for i in range(0, 64 - 7, 8) if head[i:i + 8] == field]
    if len(at) != 1:
        sys.exit("cannot find the file size in the header of " + path)
    truncate(path, n)
    with open(path, "r+b") as f:
        f.seek(at[0])
        f.write(struct.pack("<Q", os.path.getsize(path)))


def main(argv):
    if len(argv) == 4 and argv[1] == "checkpoint":
        corrupt_checkpoint(argv[2], argv[3])
    elif len(argv) == 4 and argv[1] == "inputs":
        write_inputs(argv[2], argv[3])
    elif len(argv) == 4 and argv[1] == "flip-weights":
        flip_weights(argv[2], argv[3])
    elif len(argv) == 4 and argv[1] == "truncate":
        truncate(argv[2], int(argv[3]))
    elif len(argv) == 4 and argv[1] == "truncate-keep-size":
        truncate_keep_size(argv[2], int(argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
