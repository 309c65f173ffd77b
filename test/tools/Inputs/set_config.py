"""Copies a checkpoint directory and overrides fields of its config.json.

    python3 set_config.py SRC DST key=value [key=value ...]

Values are parsed as JSON (so 200 is an integer). DST is replaced.
"""
import json
import shutil
import sys


def main():
    src, dst, *pairs = sys.argv[1:]
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    path = f"{dst}/config.json"
    with open(path) as f:
        config = json.load(f)
    for pair in pairs:
        key, value = pair.split("=", 1)
        if key not in config:
            sys.exit(f"set_config.py: {path} has no field '{key}'")
        config[key] = json.loads(value)
    with open(path, "w") as f:
        json.dump(config, f, indent=2)


if __name__ == "__main__":
    main()
