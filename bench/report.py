#!/usr/bin/env python3
r"""Turn a Daybreak benchmark JSON (and optional baseline JSONs) into a Markdown report and a latency plot.

Inputs:
  * --daybreak: the JSON written by `daybreak-run bench` (schema "daybreak-bench/1"): probes, decode cases
    (batch, context) with their roofline floors, prefill cases, and optionally per-kernel launch times;
  * --baseline (any number): JSONs written by bench/baseline.py (schema "daybreak-baseline/1").

Outputs:
  * --markdown: probe numbers, a decode table (floor bytes, floor ms at the measured copy bandwidth, Daybreak
    median/p90, fraction of the floor, tokens/s, and per baseline its median and baseline_ms / daybreak_ms),
    a prefill table (floor FLOPs, floor ms at the measured tensor rate, ...) and the per-kernel breakdown;
  * --plot: decode latency against context (log-log), one colour per batch size: Daybreak solid, its
    roofline floor dashed, baselines dotted with markers.

    python3 bench/report.py --daybreak db.json --baseline baseline_eager.json baseline_compile.json \
        --markdown bench/report.md --plot bench/report.png

Needs matplotlib (Agg backend, no display).
"""

import argparse
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen before pyplot is imported)
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

BASELINE_MARKERS = ["s", "^", "v", "D", "P", "X"]


# --------------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------------
def load(path: str, schema: str) -> dict:
    if not os.path.isfile(path):
        sys.exit(f"{path}: no such file")
    with open(path) as f:
        data = json.load(f)
    if data.get("schema") != schema:
        sys.exit(f"{path}: schema {data.get('schema')!r}, expected {schema!r}")
    return data


def merge(runs: list) -> dict:
    """One report of the runs of one artifact: the first run's probes and model, every run's cases and kernels
    (a case measured twice keeps its last measurement)."""
    db = dict(runs[0])
    for key, case_key in (("decode", decode_key), ("prefill", prefill_key)):
        cases = {}
        for run in runs:
            cases.update(index_cases(run.get(key), case_key))
        db[key] = sorted(cases.values(), key=case_key)
    if any(run.get("kernels") for run in runs):
        profiles = {}
        for run in runs:
            profiles.update({(k.get("step"), k.get("batch"), k.get("context"), k.get("tokens")): k
                             for k in run.get("kernels") or []})
        db["kernels"] = list(profiles.values())
    return db


def baseline_names(baselines: list, paths: list) -> list:
    """The baselines' own names ("transformers eager bf16"), made unique with the file name if two agree."""
    names = [b.get("baseline", os.path.basename(p)) for b, p in zip(baselines, paths)]
    return [f"{n} ({os.path.basename(p)})" if names.count(n) > 1 else n for n, p in zip(names, paths)]


def index_cases(entries: list, key) -> dict:
    return {key(e): e for e in entries or []}


def decode_key(e):
    return (e["batch"], e["context"])


def prefill_key(e):
    return e["tokens"]


# --------------------------------------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------------------------------------
def num(x, digits: int = 3) -> str:
    """Fixed-point with at least `digits` significant digits, 'n/a' for missing values."""
    if x is None:
        return "n/a"
    if x == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{x:,.{decimals}f}"


def scaled(x, scale: float, unit: str = "") -> str:
    return "n/a" if x is None else f"{num(x / scale)} {unit}".rstrip()


def pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def ratio(base_ms, db_ms) -> str:
    return "n/a" if base_ms is None or not db_ms else f"{num(base_ms / db_ms)}x"


def skipped(e) -> str:
    # The first sentence says why (e.g. "out of memory: ... Tried to allocate 64.00 GiB"); the rest of a
    # CUDA error's text is in the JSON.
    reason = e["skipped"]
    cut = reason.find(". ", reason.find("Tried to allocate"))
    if "Tried to allocate" in reason and cut > 0:
        reason = reason[:cut]
    return f"skipped: {reason}".replace("|", "/")


def table(header: list, rows: list, text_columns: int = 0) -> list:
    """A Markdown table; the first text_columns columns are left-aligned, the (numeric) rest right-aligned."""
    align = ["---" if i < text_columns else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def fraction(e: dict, floor_key: str, measured_key: str):
    """The JSON's fraction_of_floor, or floor / measured where only those are given."""
    if e.get("fraction_of_floor") is not None:
        return e["fraction_of_floor"]
    if e.get(floor_key) is not None and e.get(measured_key):
        return e[floor_key] / e[measured_key]
    return None


# --------------------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------------------
def probe_lines(db: dict, baselines: list, names: list) -> list:
    p = db.get("probes", {})
    tensor = p.get("tensor_flops_per_s")
    lines = ["## Probes (same GPU, same run)", ""]
    rows = [["Daybreak", db.get("gpu", "?"),
             scaled(p.get("copy_bandwidth_bytes_per_s"), 1e12, "TB/s")
             + (f" ({p['copy_bytes'] / 2**30:.2f} GiB copy)" if p.get("copy_bytes") else ""),
             (scaled(tensor, 1e12, "TFLOP/s") if tensor is not None else "unavailable")
             + (f" ({p['tensor_probe']})" if p.get("tensor_probe") else "")]]
    for b, name in zip(baselines, names):
        bp = b.get("probes", {})
        rows.append([name, b.get("gpu", "?"), scaled(bp.get("copy_bandwidth_bytes_per_s"), 1e12, "TB/s"),
                     scaled(bp.get("tensor_flops_per_s"), 1e12, "TFLOP/s") + " (torch.matmul bf16)"])
    lines += table(["run", "GPU", "copy bandwidth (read + write)", "tensor rate"], rows, text_columns=2)
    lines.append("")
    lines.append("Floors use Daybreak's probes: decode floor ms = floor bytes / copy bandwidth, prefill floor ms = "
                 "floor FLOPs / tensor rate. Fraction of floor = floor ms / measured ms (1 = at the roofline).")
    other_gpus = {b.get("gpu") for b in baselines} - {db.get("gpu")}
    if other_gpus:
        lines.append(f"\n**Note:** baselines ran on a different device ({', '.join(sorted(map(str, other_gpus)))}) "
                     f"than Daybreak ({db.get('gpu')}); their ratios are not like for like.")
    lines.append("")
    return lines


def case_rows(mine: dict, theirs: list, db_cells, n_db_cells: int, ms_key: str) -> list:
    """One row per case that any run has: the case's key, Daybreak's cells (db_cells(entry); the third one is
    the measured time, where a skip reason goes), then each baseline's time and ratio."""
    rows = []
    for key in sorted(set(mine).union(*theirs)):
        e = mine.get(key)
        row = list(key) if isinstance(key, tuple) else [key]
        db_ms = None
        if e is None or "skipped" in e:
            row += ["", "", "not run" if e is None else skipped(e)] + [""] * (n_db_cells - 3)
        else:
            db_ms = e[ms_key]
            row += db_cells(e)
        for cases in theirs:
            b = cases.get(key)
            if b is None:
                row += ["not run", ""]
            elif "skipped" in b:
                row += [skipped(b), ""]
            else:
                row += [num(b[ms_key]), ratio(b[ms_key], db_ms)]
        rows.append(row)
    return rows


def decode_lines(db: dict, baselines: list, names: list) -> list:
    header = ["batch", "context", "floor GB", "floor ms", "Daybreak median ms", "p90 ms", "fraction of floor",
              "tokens/s"]
    for name in names:
        header += [f"{name} ms", f"{name} / Daybreak"]

    def cells(e):
        return [scaled(e.get("floor_bytes"), 1e9), num(e.get("floor_ms")), num(e["median_ms"]), num(e.get("p90_ms")),
                pct(fraction(e, "floor_ms", "median_ms")), num(e.get("tokens_per_s"))]

    rows = case_rows(index_cases(db.get("decode"), decode_key),
                     [index_cases(b.get("decode"), decode_key) for b in baselines], cells, 6, "median_ms")
    lines = ["## Decode (one step: one new token for each of `batch` sequences, `context` tokens cached)", ""]
    lines += table(header, rows) if rows else ["No decode cases."]
    lines.append("")
    return lines


def prefill_lines(db: dict, baselines: list, names: list) -> list:
    header = ["tokens", "floor TFLOP", "floor ms", "Daybreak ms", "fraction of floor", "tokens/s", "steps"]
    for name in names:
        header += [f"{name} ms", f"{name} / Daybreak"]

    def cells(e):
        return [scaled(e.get("floor_flops"), 1e12), num(e.get("floor_ms")), num(e["ms"]),
                pct(fraction(e, "floor_ms", "ms")), num(e.get("tokens_per_s")), e.get("steps", "")]

    rows = case_rows(index_cases(db.get("prefill"), prefill_key),
                     [index_cases(b.get("prefill"), prefill_key) for b in baselines], cells, 6, "ms")
    lines = ["## Prefill (one sequence of `tokens` tokens, empty cache)", ""]
    lines += table(header, rows) if rows else ["No prefill cases."]
    lines.append("")
    return lines


def kernel_lines(db: dict) -> list:
    if not db.get("kernels"):
        return []
    lines = ["## Per-kernel breakdown", ""]
    for k in db["kernels"]:
        what = [k.get("step", "?")]
        what += [f"{name} {k[name]}" for name in ("batch", "context", "tokens") if k.get(name) is not None]
        launches = sorted(k.get("launches", []), key=lambda x: -x["total_ms"])
        total = sum(x["total_ms"] for x in launches)
        lines += [f"### {', '.join(what)}: {num(total)} ms in {sum(x['count'] for x in launches)} launches", ""]
        rows = [[f"`{x['kernel']}`", x["count"], num(x["total_ms"]), num(1e3 * x["total_ms"] / x["count"]),
                 pct(x["total_ms"] / total if total else None)] for x in launches]
        lines += table(["kernel", "launches", "total ms", "us per launch", "share"], rows, text_columns=1)
        lines.append("")
    return lines


def markdown(db: dict, db_path: str, baselines: list, paths: list, names: list) -> str:
    model = db.get("model", {})
    settings = db.get("settings", {})
    lines = [f"# Daybreak benchmark: {model.get('name', '?')} on {db.get('gpu', '?')}", ""]
    lines.append(f"* Daybreak: `{db_path}` (artifact `{db.get('artifact', '?')}`, device {db.get('device', '?')}); "
                 f"{settings.get('warmup', '?')} warm-up + {settings.get('iterations', '?')} timed iterations per "
                 f"case, cache filled with {settings.get('fill_tokens', '?')} tokens per fill step.")
    # Runs before the bench read text_config (GLM-5.3's nested hub config) recorded null here.
    lines.append(f"* Model: {model.get('layers') or '?'} layers, hidden {model.get('hidden') or '?'}, weights "
                 f"{scaled(model.get('weight_bytes'), 1e9, 'GB')}; limits: max batch "
                 f"{model.get('max_batch', '?')}, max sequence {model.get('max_seq_len', '?')}, max tokens per step "
                 f"{model.get('max_tokens', '?')}.")
    for b, p, name in zip(baselines, paths, names):
        bs = b.get("settings", {})
        lines.append(f"* Baseline {name}: `{p}`, torch {b.get('torch', '?')}, transformers "
                     f"{b.get('transformers', '?')}, checkpoint `{b.get('checkpoint', '?')}`, "
                     f"{bs.get('warmup', '?')} warm-up + {bs.get('iterations', '?')} timed iterations. "
                     f"Cache: {b.get('cache_fill', '?')}.")
    if baselines:
        lines.append("* `X / Daybreak` = baseline ms / Daybreak ms: above 1 means Daybreak is faster.")
    lines.append("")
    lines += probe_lines(db, baselines, names)
    lines += decode_lines(db, baselines, names)
    lines += prefill_lines(db, baselines, names)
    lines += kernel_lines(db)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------
# Plot
# --------------------------------------------------------------------------------------------------------
def measured(entries: list, batch: int, value: str) -> list:
    """(context, value) points of one batch size, measured cases with a value only, by context."""
    pts = [(e["context"], e.get(value)) for e in entries or []
           if e["batch"] == batch and "skipped" not in e and e.get(value) is not None]
    return sorted(pts)


def plot(db: dict, baselines: list, names: list, path: str) -> None:
    batches = sorted({e["batch"] for e in db.get("decode") or []}
                     | {e["batch"] for b in baselines for e in b.get("decode") or []})
    colours = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(12, 6))
    drawn = False
    for i, batch in enumerate(batches):
        colour = colours(i % 10)
        for pts, style in ((measured(db.get("decode"), batch, "median_ms"),
                            dict(linestyle="-", marker="o", label=f"Daybreak, batch {batch}")),
                           (measured(db.get("decode"), batch, "floor_ms"),
                            dict(linestyle="--", label=f"roofline floor, batch {batch}"))):
            if pts:
                ax.plot(*zip(*pts), color=colour, **style)
                drawn = True
        for j, (b, name) in enumerate(zip(baselines, names)):
            pts = measured(b.get("decode"), batch, "median_ms")
            if pts:
                ax.plot(*zip(*pts), color=colour, linestyle=":", marker=BASELINE_MARKERS[j % len(BASELINE_MARKERS)],
                        label=f"{name}, batch {batch}")
                drawn = True
    if drawn:
        ax.set_xscale("log")
        ax.set_yscale("log")
        # Plain numbers instead of 4x10^1 (minor ticks: only 2 and 5 of each decade, to stay legible), and the
        # measured contexts as the x ticks.
        plain = FuncFormatter(lambda v, _: f"{v:g}")
        two_five = FuncFormatter(lambda v, _: f"{v:g}" if round(v / 10 ** math.floor(math.log10(v))) in (2, 5) else "")
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(two_five)
        contexts = sorted({e["context"] for run in [db] + baselines for e in run.get("decode") or []})
        ax.set_xticks(contexts)
        ax.tick_params(axis="y", which="minor", labelsize=7)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    else:
        ax.text(0.5, 0.5, "no measured decode cases", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("context (tokens in the cache)")
    ax.set_ylabel("decode step latency (ms)")
    ax.set_title(f"{db.get('model', {}).get('name', 'model')} decode latency on {db.get('gpu', '?')}")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daybreak", required=True, nargs="+",
                    help="JSONs from `daybreak-run bench` of one artifact (cases split over calls are merged)")
    ap.add_argument("--baseline", nargs="+", action="extend", default=[], help="JSONs from bench/baseline.py")
    ap.add_argument("--markdown", required=True, help="Markdown file to write")
    ap.add_argument("--plot", required=True, help="PNG file to write")
    args = ap.parse_args()

    db = merge([load(p, "daybreak-bench/1") for p in args.daybreak])
    # A baseline whose cases were split over calls (h200.sh's RUN_TAG) is merged by its name.
    by_name = {}
    for p in args.baseline:
        b = load(p, "daybreak-baseline/1")
        by_name.setdefault(b.get("baseline", os.path.basename(p)), []).append((b, p))
    baselines = [merge([b for b, _ in runs]) for runs in by_name.values()]
    paths = [", ".join(p for _, p in runs) for runs in by_name.values()]
    names = baseline_names(baselines, paths)
    with open(args.markdown, "w") as f:
        f.write(markdown(db, ", ".join(args.daybreak), baselines, paths, names))
    plot(db, baselines, names, args.plot)
    print(f"wrote {args.markdown} and {args.plot}")


if __name__ == "__main__":
    main()
