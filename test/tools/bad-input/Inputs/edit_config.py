#!/usr/bin/env python3
"""Writes a checkpoint folder holding only an edited copy of a fixture's config.json.

    edit_config.py SRC DST [KEY=JSON | KEY=DELETE ...]

SRC is a checkpoint folder (a fixture); DST is replaced by a folder with SRC's config.json alone, its
fields edited in order. KEY names a field, nested keys joined with dots (`rope_scaling.factor`,
`text_config.index_topk`); JSON is its new value, parsed as JSON (so 0 is an integer and '"gelu"' a
string), and DELETE removes a field that must be there. A field that is set may be new.

Only config.json is copied: the config checks run before any tensor is read, so the tests that use
this need no weights (a test that gets past the config sees the missing model.safetensors instead).
"""
import json
import os
import shutil
import sys


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    src, dst, edits = argv[1], argv[2], argv[3:]
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    for edit in edits:
        key, sep, value = edit.partition("=")
        if not sep:
            sys.exit(f"edit_config.py: '{edit}' is not KEY=JSON or KEY=DELETE")
        *parents, leaf = key.split(".")
        obj = config
        for parent in parents:
            if not isinstance(obj.get(parent), dict):
                sys.exit(f"edit_config.py: {src}/config.json has no object '{parent}' in '{key}'")
            obj = obj[parent]
        if value == "DELETE":
            if leaf not in obj:
                sys.exit(f"edit_config.py: {src}/config.json has no field '{key}' to delete")
            del obj[leaf]
        else:
            obj[leaf] = json.loads(value)
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


if __name__ == "__main__":
    main(sys.argv)
