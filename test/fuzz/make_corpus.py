#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (test/fuzz/corpus/<target>/) from the fixtures.

Usage: test/fuzz/make_corpus.py [daybreak-compile]

Seeds are small real files: safetensors files cut from the fixtures' checkpoints (their smallest
tensors, bytes and header entries as stored), the fixtures' config.json and inputs.json, index files
over the fuzz target's two shards, command lines, and artifacts compiled from the smallest fixtures
with --weights=reference (the checkpoint tensors stay in the fixture's file, so the artifact is small;
it names that file by absolute path, so its external-file checks pass only in this checkout).
Without a daybreak-compile the artifact corpus is left as it is.
"""

import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "test", "fixtures")
CORPUS = os.path.join(ROOT, "test", "fuzz", "corpus")


def fixture_dirs():
    """Every fixture folder holding a config.json: test/fixtures/* and test/fixtures/shared/*."""
    found = []
    for base in (FIXTURES, os.path.join(FIXTURES, "shared")):
        for name in sorted(os.listdir(base)):
            if os.path.exists(os.path.join(base, name, "config.json")):
                found.append(os.path.join(base, name))
    return found


def write(target, name, data):
    """Writes one seed, skipping one whose bytes another seed of the target already has."""
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    digest = hashlib.sha1(data).hexdigest()
    for existing in os.listdir(folder):
        with open(os.path.join(folder, existing), "rb") as f:
            if hashlib.sha1(f.read()).hexdigest() == digest:
                return
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def safetensors_bytes(entries, metadata=None, pad=True):
    """A safetensors file of (name, dtype, shape, bytes) entries, in order."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def cut_safetensors(path, budget):
    """The smallest tensors of a checkpoint, distinct dtypes first, within `budget` data bytes."""
    with open(path, "rb") as f:
        raw = f.read()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    metadata = header.pop("__metadata__", None)
    start = 8 + length
    by_size = sorted(header.items(), key=lambda kv: (kv[1]["data_offsets"][1] - kv[1]["data_offsets"][0], kv[0]))
    chosen, dtypes, used = [], set(), 0
    for first_pass in (True, False):
        for name, entry in by_size:
            begin, end = entry["data_offsets"]
            if any(name == c[0] for c in chosen) or used + end - begin > budget:
                continue
            if first_pass and entry["dtype"] in dtypes:
                continue
            dtypes.add(entry["dtype"])
            chosen.append((name, entry["dtype"], entry["shape"], raw[start + begin:start + end]))
            used += end - begin
            if len(chosen) >= 8:
                break
    return safetensors_bytes(chosen, metadata)


def make_safetensors():
    for folder in fixture_dirs():
        name = os.path.basename(folder)
        write("safetensors", name + ".safetensors", cut_safetensors(os.path.join(folder, "model.safetensors"), 1024))
    write("safetensors", "empty.safetensors", safetensors_bytes([]))
    write("safetensors", "metadata-unpadded.safetensors",
          safetensors_bytes([("x", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)),
                             ("empty", "BF16", [0, 3], b""),
                             ("flag", "BOOL", [3], b"\x01\x00\x01"),
                             ("ids", "I64", [2], struct.pack("<2q", 7, -1))],
                            metadata={"format": "pt"}, pad=False))


def make_index():
    shards = {"a": 1, "b": 1, "c": 2}
    full = {"metadata": {"total_size": 20},
            "weight_map": {name: "model-%05d-of-00002.safetensors" % shard for name, shard in shards.items()}}
    write("safetensors-index", "two-shards.json", json.dumps(full, indent=2) + "\n")
    write("safetensors-index", "one-shard.json",
          json.dumps({"weight_map": {"c": "model-00002-of-00002.safetensors"}}) + "\n")
    write("safetensors-index", "subfolder.json",
          json.dumps({"metadata": {}, "weight_map": {"a": "./model-00001-of-00002.safetensors"}}) + "\n")


def make_configs_and_inputs():
    shared = os.path.join(os.path.dirname(ROOT), "shared", "fixtures")  # ../shared, where present
    extra = [os.path.join(shared, n) for n in sorted(os.listdir(shared))] if os.path.isdir(shared) else []
    for folder in fixture_dirs() + extra:
        name = os.path.basename(folder)
        for target, file in (("hf-config", "config.json"), ("inputs-json", "inputs.json")):
            path = os.path.join(folder, file)
            if os.path.exists(path):
                with open(path, "rb") as f:
                    write(target, name + ".json", f.read())


def make_options():
    run = {
        "generate": ["--prompt-ids", "1,2,3", "--max-new-tokens", "16", "--temperature", "0.7", "--top-p", "0.9",
                     "--seed", "42", "--threads", "2"],
        "bench": ["--batch", "1,8,64", "--context", "1024,8192", "--prefill", "1024", "--warmup", "3",
                  "--iterations", "20", "--prefill-iterations", "3", "--fill-tokens", "512",
                  "--max-case-seconds", "60", "--kernels", "1", "--seed", "1", "--json", "out.json"],
        "compare": ["--expected", "expected.safetensors", "--atol", "1e-4"],
        "load": ["--device=cpu", "--threads=0", "--attention=exact", "--check-finite=1"],
        "logits": ["--inputs", "inputs.json", "--output", "logits.safetensors", "--device", "cuda:0",
                   "--attention", "tensor-cores"],
    }
    for name, args in run.items():
        write("run-options", name + ".txt", "\n".join(args) + "\n")
    # Lines: --max-seq-len, --max-batch, --max-tokens, --kv-cache-tokens (empty: not given), then the
    # model's max_position_embeddings.
    compile_ = {
        "defaults": ["", "", "", "", "2560"],
        "given": ["64", "2", "64", "", "2560"],
        "kv-tokens": ["2560", "8", "", "4096", "163840"],
        "clamped": ["64", "2", "1000000000000", "", "2560"],
        "radix": ["0x40", "0b10", "010", "", "200"],
    }
    for name, lines in compile_.items():
        write("compile-options", name + ".txt", "\n".join(lines) + "\n")


def strip_artifact(data, launches):
    """The artifact with its manifest rewritten by protoc: no external weights files, every weight of
    shape [0], no code section and each step's first `launches` launches only (those that do not check
    a weight's shape), so that it opens in any checkout and decodes every launch it keeps, in a file
    of about the manifest's size."""
    proto = os.path.join(ROOT, "runtime", "artifact", "Manifest.proto")
    protoc = ["protoc", "--proto_path=" + os.path.dirname(proto)]
    offset, size = struct.unpack("<QQ", data[16:32])
    text = subprocess.run(protoc + ["--decode=daybreak.artifact.Manifest", proto], input=data[offset:offset + size],
                          check=True, capture_output=True).stdout.decode()
    lines, out, i = text.split("\n"), [], 0

    def end_of(i):
        depth = 0
        for j in range(i, len(lines)):
            depth += lines[j].count("{") - lines[j].count("}")
            if depth == 0:
                return j

    sections, kept = [], 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("steps {"):
            kept = 0
        if line.startswith("  launches {"):
            j = end_of(i)
            if kept < launches:
                out += lines[i:j + 1]
            kept += 1
            i = j + 1
            continue
        if line.startswith(("external_files {", "sections {")):
            j = end_of(i)
            if line.startswith("sections {") and '"weights"' in "".join(lines[i:j]):
                sections = lines[i:j + 1]
            i = j + 1
            continue
        if line.startswith("weights {"):
            j, body, k = end_of(i), [], i + 1
            while k < j:
                if lines[k].strip().startswith("pieces {"):
                    k = end_of(k) + 1
                    continue
                if not re.match(r"\s*(shape|section|offset|size):", lines[k]):
                    body.append(lines[k])
                k += 1
            out += [line] + body + ["  shape: 0", "}"]
            i = j + 1
            continue
        out.append(line)
        i += 1
    # The weights section keeps its bytes and checksum and moves to the first 4 KiB boundary after
    # the manifest.
    old_offset = int(re.search(r"offset: (\d+)", "\n".join(sections)).group(1))
    old_size = int(re.search(r"size: (\d+)", "\n".join(sections)).group(1))
    manifest = b""
    for _ in range(2):
        start = (64 + len(manifest) + 4095) // 4096 * 4096
        moved = [re.sub(r"offset: \d+", "offset: %d" % start, l) for l in sections]
        manifest = subprocess.run(protoc + ["--encode=daybreak.artifact.Manifest", proto],
                                  input="\n".join(moved + out).encode(), check=True, capture_output=True).stdout
    result = bytearray(data[:64]) + manifest
    result += b"\0" * (start - len(result)) + data[old_offset:old_offset + old_size]
    result[24:32] = struct.pack("<Q", len(manifest))
    result[32:40] = struct.pack("<Q", fnv1a64(manifest))
    result[40:48] = struct.pack("<Q", len(result))
    return bytes(result)


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def make_artifacts(compiler):
    for fixture in ("gpt_oss_small", "glm5_next_small_pool"):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "a.daybreak")
            subprocess.run([compiler, os.path.join(FIXTURES, fixture), "--max-seq-len=64", "--max-batch=2",
                            "--max-tokens=16", "--weights=reference", "-o", out],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(out, "rb") as f:
                data = f.read()
            write("artifact", fixture + ".daybreak", data)
            if fixture == "gpt_oss_small":
                write("artifact", fixture + "-stripped.daybreak", strip_artifact(data, launches=9))


def dict_line(token):
    """A libFuzzer dictionary entry: the token quoted, with quotes, backslashes and bytes escaped."""
    out = ""
    for byte in token.encode():
        ch = chr(byte)
        out += "\\" + ch if ch in '"\\' else ch if 32 <= byte < 127 else "\\x%02x" % byte
    return '"%s"\n' % out


def write_dict(target, tokens, comment, json_tokens=True):
    """test/fuzz/<target>.dict: `tokens` (which libFuzzer cannot learn from compares inside libLLVM's
    uninstrumented JSON parser), after JSON's own tokens unless `json_tokens` is false."""
    # Numbers at the bounds of int32, int64 and uint64 and beyond: mutating digits one at a time
    # rarely gets there, and sizes that large are what a hostile file sends.
    json_tokens = ["{", "}", "[", "]", ":", ",", '"', "null", "true", "false", "-1", "0", "0.5",
                   "1e400", "\\u0000", "2147483648", "4294967297", "1000000000000",
                   "9223372036854775807", "-9223372036854775808", "18446744073709551615"
                   ] if json_tokens else []
    lines = ["# " + comment + " (written by make_corpus.py)\n"]
    lines += [dict_line(t) for t in json_tokens + sorted(set(tokens))]
    with open(os.path.join(ROOT, "test", "fuzz", target + ".dict"), "w") as f:
        f.writelines(lines)


def make_dicts():
    keys = set()

    def collect(value):
        if isinstance(value, dict):
            for k, v in value.items():
                keys.add(k)
                collect(v)
        elif isinstance(value, list):
            for v in value:
                collect(v)
        elif isinstance(value, str) and len(value) < 32:
            keys.add(value)

    for name in os.listdir(os.path.join(CORPUS, "hf-config")):
        with open(os.path.join(CORPUS, "hf-config", name)) as f:
            collect(json.load(f))
    # The field names the parsers read, as their sources spell them.
    with open(os.path.join(ROOT, "compiler", "importers", "HfConfig.cpp")) as f:
        keys.update(re.findall(r'"([a-z][a-z0-9_]*)"', f.read()))
    write_dict("hf-config", keys, "config.json field names and values")
    write_dict("safetensors", ["dtype", "shape", "data_offsets", "__metadata__", "format", "pt", "BF16", "F16",
                               "F32", "F64", "F8_E4M3", "I8", "U8", "I16", "I32", "I64", "BOOL",
                               "18446744073709551615", "9223372036854775807"],
               "safetensors header keys and dtypes")
    write_dict("safetensors-index", ["weight_map", "metadata", "total_size", "a", "b", "c", "..", "/", ".",
                                     "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                     "model.safetensors"],
               "index keys and the fuzz target's shard names")
    write_dict("inputs-json", ["sequences", "prompt_ids", "decode_ids", "2147483647", "2147483648",
                               "-2147483649", "4294967297", "1.5"],
               "inputs.json keys and ids at the int32 bounds")
    with open(os.path.join(ROOT, "runtime", "executor", "RunInputs.cpp")) as f:
        flags = ["--" + n for n in re.findall(r'"([a-z][a-z-]*)"', f.read())]
    write_dict("run-options", flags + ["=", ",", "\n", "exact", "tensor-cores", "cpu", "cuda:0", "nan", "inf",
                                       "1e308", "-1", "0x10", "4096", "4097", "2147483648",
                                       "9223372036854775808", "1e-4"],
               "daybreak-run flags and values at their bounds", json_tokens=False)


def main():
    make_safetensors()
    make_index()
    make_configs_and_inputs()
    make_options()
    make_dicts()
    if len(sys.argv) > 1:
        make_artifacts(sys.argv[1])


if __name__ == "__main__":
    main()
