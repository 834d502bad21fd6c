#!/usr/bin/env python3
"""Turns benchmark results into one self-contained HTML page with plots.

    python3 bench/report.py -o report.html infer.json [more.json ...] \\
        [--peer llama-bench.json ...] [--history OLD_RUN.json|DIR ...] \\
        [--bandwidth [DEVICE=]GBPS ...] [--threshold PCT] [--title TEXT]

Inputs are the JSON lists that `infer bench -o json` prints and, as --peer,
what llama.cpp's `llama-bench -o json` (or -o jsonl) prints. Any file may be
written LABEL=PATH (a commit, a date) to name the run it belongs to. The main
files without a label make one run, labelled by the newest one's modification
time (likewise the peer's); each unlabelled --history file is a run labelled by
its own. Rows are tagged with their file and run.

The page has five plots (each says so where it has no data) and a table:
  1. tokens/s per test, per model, format, threads and device (error bars: stddev);
  2. tokens/s against the depth (tokens already in the context);
  3. infer / peer for the tests both measured (same model file or size, same
     n_prompt, n_gen, n_depth and threads);
  4. generation's achieved GB/s as a share of a memory-bandwidth ceiling
     (--bandwidth, or one measured here with numpy, which the page states);
  5. the history: --history runs, in the order given, then the main inputs;
     a drop of more than --threshold percent (default 5) that is also larger
     than the two runs' stddevs together is marked and listed.

Bad input (a missing file, not JSON, not a list of benchmark rows) is one
line on stderr and exit status 1. Needs matplotlib (and numpy to measure the
bandwidth ceiling).
"""
import argparse
import datetime
import glob
import html
import io
import json
import math
import os
import re
import socket
import statistics
import sys
import time
from dataclasses import dataclass

PROG = "report.py"


class InputError(Exception):
    """Bad input: reported as one line, exit status 1."""


class NoData(Exception):
    """A plot with nothing to draw: its message goes on the page instead."""


# --------------------------------------------------------------------------
# Reading the inputs

@dataclass
class Row:
    tool: str          # "infer", or the peer's name
    label: str         # the run it belongs to (given, or the file's mtime)
    source: str        # the file it came from
    model: str         # the model file's basename
    model_size: int    # bytes of weights; 0 where unknown
    fmt: str           # weight format, e.g. Q4_0
    threads: int
    device: str        # "cpu", "cuda", "cuda (NVIDIA H100)", ...
    isa: str
    n_prompt: int
    n_gen: int
    n_depth: int
    n_parallel: int
    avg: float         # tokens/s
    std: float
    samples: list
    gen_gbs: float     # generation's bytes read per second / 1e9; 0 for prompts
    ttft_ms: float = None
    load_ms: float = None
    rss_bytes: int = None
    series: str = ""   # the legend entry it is drawn under (set later)
    device_gbs: float = 0.0  # infer bench on a GPU: the copy kernel's GB/s there (its ceiling)

    @property
    def test(self):
        return self.base_test + (f" @ d{self.n_depth}" if self.n_depth else "")

    @property
    def base_test(self):
        """The test without its depth: what the depth plot draws a line for."""
        if self.n_gen == 0:
            return f"pp{self.n_prompt}"
        par = f" x{self.n_parallel}" if self.n_parallel > 1 else ""
        if self.n_prompt == 0:
            return f"tg{self.n_gen}{par}"
        return f"pp{self.n_prompt}+tg{self.n_gen}{par}"

    @property
    def is_prompt(self):
        return self.n_gen == 0

    @property
    def is_generation(self):
        return self.n_prompt == 0 and self.n_gen > 0

    @property
    def test_order(self):
        return (not self.is_prompt, self.n_prompt, self.n_gen, self.n_parallel, self.n_depth)

    @property
    def device_kind(self):
        return self.device.split(" ", 1)[0]

    @property
    def config(self):
        """Model, format, threads and device: what a colour stands for."""
        name = self.model[:-5] if self.model.endswith(".gguf") else self.model
        fmt = "" if self.fmt == "?" or self.fmt.lower() in name.lower() else f" [{self.fmt}]"
        return f"{name}{fmt} · t{self.threads} · {self.device}"


REQUIRED_KEYS = {"model_filename": str, "n_threads": int, "n_prompt": int, "n_gen": int,
                 "avg_ts": float, "stddev_ts": float}
OPTIONAL_KEYS = {"model_size": int, "n_depth": int, "n_parallel": int, "gen_gbs": float,
                 "ttft_ms": float, "load_ms": float, "peak_rss_bytes": int, "samples_ts": list,
                 "device_gbs": float, "gen_bw_share": (float, type(None)),
                 "device": str, "device_name": str, "isa": str, "model_type": str,
                 "backends": str, "gpu_info": str, "n_gpu_layers": int}
# Keys only llama-bench writes: infer's inputs holding them were put in the wrong place.
LLAMA_BENCH_KEYS = ("build_commit", "backends", "n_ubatch")

FORMAT_IN_NAME = re.compile(r"(?:^|[-_.])(i?q\d(?:_[a-z0-9]+)*|bf16|f16|f32)(?=$|[-_.])", re.I)


def weight_format(model_filename, model_type):
    """The weight format from the file's name (as both tools bench the same
    files, they then agree), else from llama-bench's model_type."""
    stem = os.path.basename(model_filename)
    stem = stem[:-5] if stem.endswith(".gguf") else stem
    found = FORMAT_IN_NAME.findall(stem)
    if found:
        return found[-1].upper()
    parts = (model_type or "").split(" ", 2)  # "llama 1B Q4_K - Medium"
    return parts[2] if len(parts) == 3 else "?"


def describe_device(raw):
    if "device" in raw:  # infer's
        name = raw.get("device_name", "")
        return raw["device"] if name in ("", raw["device"]) else f"{raw['device']} ({name})"
    backends = [b.strip().lower() for b in raw.get("backends", "cpu").split(",")]
    accel = [b for b in backends if b not in ("cpu", "blas", "")]
    if accel and raw.get("n_gpu_layers", 1) > 0:
        gpu = raw.get("gpu_info", "")
        return f"{accel[0]} ({gpu})" if gpu else accel[0]
    return "cpu"


def check_type(value, kind):
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return (isinstance(value, int) and not isinstance(value, bool)) or \
            (isinstance(value, float) and value.is_integer())
    return isinstance(value, kind)


def parse_json_rows(path, text):
    """A JSON list of objects, or JSON lines (llama-bench -o jsonl)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as whole_error:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        try:
            data = [json.loads(ln) for ln in lines]
        except json.JSONDecodeError:
            data = None
        if not lines or data is None or len(lines) < 2:
            raise InputError(f"{path} is not JSON ({whole_error.msg} at line {whole_error.lineno}, "
                             f"column {whole_error.colno})")
    if isinstance(data, dict) and "avg_ts" in data:
        data = [data]  # one line of llama-bench -o jsonl
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of benchmark rows, found {json_kind(data)}")
    if not data:
        raise InputError(f"{path}: the list holds no benchmark rows")
    return data


def json_kind(value):
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def load_rows(path, label, tool, peer_name, allow_llama_bench):
    """Reads one file's rows, tagged `tool` (llama-bench's rows: `peer_name`);
    InputError with a one-line reason if it cannot."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file")
    except IsADirectoryError:
        raise InputError(f"{path} is a directory (only --history takes directories)")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read it ({getattr(e, 'strerror', None) or e})")
    rows = []
    for i, raw in enumerate(parse_json_rows(path, text), 1):
        if not isinstance(raw, dict):
            raise InputError(f"{path}: row {i} is {json_kind(raw)}, not an object")
        for key, kind in REQUIRED_KEYS.items():
            if key not in raw:
                raise InputError(f"{path}: row {i} lacks \"{key}\" (not `infer bench -o json` "
                                 f"or `llama-bench -o json` output?)")
        for key, kind in {**REQUIRED_KEYS, **OPTIONAL_KEYS}.items():
            if key in raw and not check_type(raw[key], kind):
                raise InputError(f"{path}: row {i}: \"{key}\" should be "
                                 f"{'a number' if kind in (int, float) else json_kind(kind())}, "
                                 f"found {json.dumps(raw[key])[:40]}")
        is_llama_bench = any(k in raw for k in LLAMA_BENCH_KEYS)
        if is_llama_bench and not allow_llama_bench:
            raise InputError(f"{path} is llama-bench output: pass it with --peer")
        samples = [float(s) for s in raw.get("samples_ts", []) if check_type(s, float)]
        n_parallel = int(raw.get("n_parallel", 1)) or 1
        model_size = int(raw.get("model_size", 0))
        avg = float(raw["avg_ts"])
        n_prompt, n_gen = int(raw["n_prompt"]), int(raw["n_gen"])
        if n_prompt == 0 and n_gen == 0:
            raise InputError(f"{path}: row {i} has neither n_prompt nor n_gen")
        if "gen_gbs" in raw:
            gen_gbs = float(raw["gen_gbs"])
        elif n_prompt == 0:
            # one pass per token of each sequence reads the weights once
            gen_gbs = model_size * avg / n_parallel / 1e9
        else:
            gen_gbs = 0.0
        rows.append(Row(
            tool=peer_name if is_llama_bench else tool,
            label=label, source=os.path.basename(path),
            model=os.path.basename(raw["model_filename"]), model_size=model_size,
            fmt=weight_format(raw["model_filename"], raw.get("model_type")),
            threads=int(raw["n_threads"]), device=describe_device(raw), isa=raw.get("isa", ""),
            n_prompt=n_prompt, n_gen=n_gen, n_depth=int(raw.get("n_depth", 0)), n_parallel=n_parallel,
            avg=avg, std=float(raw["stddev_ts"]), samples=samples, gen_gbs=gen_gbs,
            ttft_ms=raw.get("ttft_ms"), load_ms=raw.get("load_ms"), rss_bytes=raw.get("peak_rss_bytes"),
            device_gbs=float(raw.get("device_gbs") or 0.0)))
    return rows


def split_label(arg):
    """LABEL=PATH, or PATH (a path that exists as written wins over a split)."""
    if "=" in arg and not os.path.exists(arg):
        label, path = arg.split("=", 1)
        if label and path:
            return label, path
    return None, arg


def mtime_label(paths):
    """The run label of unlabelled files: the newest one's modification time."""
    times = [os.path.getmtime(p) for p in paths if os.path.isfile(p)]
    return datetime.datetime.fromtimestamp(max(times)).strftime("%Y-%m-%d %H:%M:%S") if times else "?"


def labelled_files(args):
    """(label, path) of several files that make one run: those without a
    label of their own share their newest modification time."""
    pairs = [split_label(a) for a in args]
    shared = mtime_label([path for label, path in pairs if label is None])
    return [(label or shared, path) for label, path in pairs]


def expand_history(arg):
    """A history argument: a file, or a directory's *.json files oldest
    first; each is a run of its own, labelled by its time unless a label is
    given (a labelled directory is one run)."""
    label, path = split_label(arg)
    if os.path.isdir(path):
        files = sorted(glob.glob(os.path.join(path, "*.json")), key=lambda p: (os.path.getmtime(p), p))
        if not files:
            raise InputError(f"{path}: the directory holds no *.json files")
        return [(label or mtime_label([p]), p) for p in files]
    return [(label or mtime_label([path]), path)]


# --------------------------------------------------------------------------
# Grouping

def assign_series(rows):
    """Each row's legend entry: tool and config, plus its label (or file)
    where the same config measured the same test in more than one run."""
    runs_per_test = {}
    for r in rows:
        runs_per_test.setdefault((r.tool, r.config, r.test), set()).add((r.label, r.source))
    clashing = {(tool, config) for (tool, config, _), runs in runs_per_test.items() if len(runs) > 1}
    for r in rows:
        r.series = f"{r.tool} · {r.config}"
        if (r.tool, r.config) in clashing:
            labels = {lbl for (t, c, _), runs in runs_per_test.items() if (t, c) == (r.tool, r.config)
                      for lbl, _ in runs}
            r.series += f" · {r.label if len(labels) > 1 else r.source}"


def pooled(rows):
    """Mean and stddev of several rows of one test: over all their samples
    where each has them, else the mean of means (and the largest stddev)."""
    if len(rows) == 1:
        return rows[0].avg, rows[0].std
    if all(r.samples for r in rows):
        samples = [s for r in rows for s in r.samples]
        return statistics.fmean(samples), statistics.stdev(samples) if len(samples) > 1 else 0.0
    return statistics.fmean(r.avg for r in rows), max(r.std for r in rows)


class Palette:
    """One colour per config, kept across every plot; a peer's bars are hatched."""

    def __init__(self, plt):
        self.colors = list(plt.get_cmap("tab10").colors) + list(plt.get_cmap("Dark2").colors)
        self.assigned = {}

    def color(self, config):
        if config not in self.assigned:
            self.assigned[config] = self.colors[len(self.assigned) % len(self.colors)]
        return self.assigned[config]


# --------------------------------------------------------------------------
# Plots: each returns (figure, note as HTML) or raises NoData

def figure_svg(plt, fig, salt):
    # A fixed salt per figure keeps element ids distinct between the inline
    # SVGs and the page the same from run to run.
    plt.rcParams["svg.hashsalt"] = salt
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]


def plot_tests(plt, rows, palette, peer_name):
    from matplotlib.patches import Patch
    panels = [(title, part) for title, part in (
        ("Prompt processing", [r for r in rows if r.is_prompt]),
        ("Generation", [r for r in rows if not r.is_prompt])) if part]
    if not panels:
        raise NoData("No results were given besides the history (infer's FILEs, or --peer).")
    series = sorted({(r.series, r.config, r.tool) for r in rows}, key=lambda s: (s[1], s[2] != "infer", s[0]))
    fig, axes = plt.subplots(len(panels), 1, figsize=(13, 4.4 * len(panels)), squeeze=False)
    for ax, (title, part) in zip(axes[:, 0], panels):
        tests = sorted({r.test: r.test_order for r in part}.items(), key=lambda t: t[1])
        for x, (test, _) in enumerate(tests):
            here = [s for s in series if any(r.series == s[0] and r.test == test for r in part)]
            width = min(0.8 / len(here), 0.3)  # a lone bar stays a bar, not a block
            start = x - width * len(here) / 2
            for j, (name, config, tool) in enumerate(here):
                avg, std = pooled([r for r in part if r.series == name and r.test == test])
                pos = start + width * (j + 0.5)
                ax.bar(pos, avg, width * 0.92, yerr=std, capsize=3, color=palette.color(config),
                       hatch=None if tool == "infer" else "///", edgecolor="white" if tool == "infer" else "black",
                       linewidth=0.5, error_kw={"elinewidth": 1, "ecolor": "#222"})
                ax.annotate(f"{avg:.0f}" if avg >= 10 else f"{avg:.1f}", (pos, avg + std), xytext=(0, 4),
                            textcoords="offset points", ha="center", va="bottom", fontsize=7,
                            rotation=90 if len(here) > 3 else 0)
        ax.set_xticks(range(len(tests)), [t for t, _ in tests])
        ax.set_ylabel("tokens/s")
        ax.set_title(title, loc="left", fontweight="bold")
        ax.margins(y=0.15)
        ax.set_ylim(bottom=0)  # a stddev larger than the mean must not push the axis below zero
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    handles = [Patch(facecolor=palette.color(config), hatch=None if tool == "infer" else "///",
                     edgecolor="white" if tool == "infer" else "black", label=name)
               for name, config, tool in series]
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0), ncol=2, fontsize=9, frameon=False)
    fig.tight_layout()
    return fig, ("Bars: mean tokens/s over the repetitions; whiskers: ±1 stddev. "
                 f"Hatched bars: {html.escape(peer_name)}. A test measured with several threads counts, "
                 "devices or formats has a bar for each; one measured in several runs, a bar per run.")


def plot_depth(plt, rows, palette, peer_name):
    lines = {}
    for r in rows:
        lines.setdefault((r.series, r.base_test, r.is_prompt), []).append(r)
    deep = {k: v for k, v in lines.items() if len({r.n_depth for r in v}) > 1}
    if not deep:
        raise NoData("No test was measured at more than one depth (run `infer bench -d N` "
                     "for several N, or llama-bench -d 0,N).")
    panels = [(title, {k: v for k, v in deep.items() if k[2] == prompt})
              for title, prompt in (("Prompt processing", True), ("Generation", False))]
    panels = [p for p in panels if p[1]]
    fig, axes = plt.subplots(1, len(panels), figsize=(13 if len(panels) > 1 else 8, 4.6), squeeze=False)
    markers = "osD^v<>"
    for ax, (title, group) in zip(axes[0], panels):
        bases = sorted({k[1] for k in group})
        depths = set()
        for (name, base, _), members in sorted(group.items()):
            points = sorted({r.n_depth for r in members})
            depths.update(points)
            stats = [pooled([r for r in members if r.n_depth == d]) for d in points]
            r0 = members[0]
            ax.errorbar(points, [s[0] for s in stats], yerr=[s[1] for s in stats], capsize=3,
                        color=palette.color(r0.config), linestyle="-" if r0.tool == "infer" else "--",
                        marker=markers[bases.index(base) % len(markers)], label=f"{name} · {base}")
        ax.set_xticks(sorted(depths))
        ax.set_xlabel("depth (tokens already in the context)")
        ax.set_ylabel("tokens/s")
        ax.set_ylim(bottom=0)
        ax.set_title(title, loc="left", fontweight="bold")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
    fig.tight_layout()
    left_out = len(lines) - len(deep)
    return fig, (f"Mean tokens/s at each depth, ±1 stddev; dashed lines: {html.escape(peer_name)}." +
                 (f" {left_out} test(s) measured at one depth only are not drawn." if left_out else ""))


def match_peer(infer_rows, peer_rows):
    """Pairs of (infer rows, peer rows) of one test: the same model file
    (by name, or by size where the names differ), prompt, generation, depth
    and threads. Several rows of one side are pooled."""
    pairs = {}
    for r in infer_rows:
        if r.n_parallel != 1:
            continue  # llama-bench generates one sequence
        matched = [p for p in peer_rows
                   if (p.model == r.model or (r.model_size and p.model_size == r.model_size))
                   and (p.n_prompt, p.n_gen, p.n_depth, p.threads) == (r.n_prompt, r.n_gen, r.n_depth, r.threads)]
        if matched:
            entry = pairs.setdefault((r.config, r.test_order, r.test), ([], []))
            entry[0].append(r)
            entry[1].extend(p for p in matched if p not in entry[1])
    return [pairs[k] for k in sorted(pairs)]


def plot_ratio(plt, infer_rows, peer_rows, palette, peer_name):
    if not peer_rows:
        raise NoData("No peer results were given (--peer llama-bench.json).")
    if not infer_rows:
        raise NoData("No infer results were given to compare with the peer.")
    pairs = match_peer(infer_rows, peer_rows)
    if not pairs:
        raise NoData("No test matches between infer's and the peer's results (same model file or size, "
                     "n_prompt, n_gen, n_depth and threads).")
    labels, ratios, spreads, colors = [], [], [], []
    for ours, theirs in pairs:
        a, sa = pooled(ours)
        b, sb = pooled(theirs)
        if a <= 0 or b <= 0:
            continue
        ratios.append(a / b)
        # relative stddevs combined, applied as a factor: symmetric on the log axis
        spreads.append(math.exp(math.hypot(sa / a, sb / b)))
        r0, p0 = ours[0], theirs[0]
        other = f" (peer: {p0.model})" if p0.model != r0.model else ""
        device = f" ({r0.device} vs {p0.device})" if r0.device != p0.device else ""
        labels.append(f"{r0.config.rsplit(' · ', 1)[0]} · {r0.test}{other}{device}")
        colors.append(palette.color(r0.config))
    if not ratios:
        raise NoData("The matching tests have no positive tokens/s to divide.")
    from matplotlib.ticker import FuncFormatter, LogLocator
    fig, ax = plt.subplots(figsize=(13, 0.42 * len(ratios) + 1.4))
    y = list(range(len(ratios)))[::-1]
    # Bars grow from 1 on a log axis, so 2x faster and 2x slower are as long.
    lows = [r - r / f for r, f in zip(ratios, spreads)]
    highs = [r * f - r for r, f in zip(ratios, spreads)]
    ax.set_xscale("log")
    ax.barh(y, [r - 1 for r in ratios], left=1, color=colors, height=0.65)
    ax.errorbar(ratios, y, xerr=[lows, highs], fmt="none", capsize=3, ecolor="#222")
    ax.axvline(1.0, color="black", linewidth=1)
    for yi, ratio, high, low in zip(y, ratios, highs, lows):
        right = ratio >= 1
        ax.annotate(f"{ratio:.2f}×", (ratio + high if right else ratio - low, yi), xytext=(4 if right else -4, 0),
                    textcoords="offset points", va="center", ha="left" if right else "right", fontsize=8)
    ax.set_yticks(y, labels, fontsize=9)
    ax.set_xlabel(f"tokens/s, infer / {peer_name}  (log scale; right of 1: infer is faster)")
    lo = min(min(r - l for r, l in zip(ratios, lows)), 1 / 1.5)
    hi = max(max(r + h for r, h in zip(ratios, highs)), 1.5)
    ax.set_xlim(lo / 1.3, hi * 1.3)
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
    ax.xaxis.set_minor_locator(LogLocator(base=10, subs="auto"))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    fig.tight_layout()
    unmatched = len({(r.config, r.test) for r in infer_rows}) - len(pairs)
    return fig, (f"Mean tokens/s of infer divided by {html.escape(peer_name)}'s for the same model file (or size), "
                 "n_prompt, n_gen, n_depth and threads; whiskers: both stddevs combined."
                 + (f" {unmatched} infer test(s) have no match in the peer's results." if unmatched > 0 else ""))


def parse_bandwidth(values):
    """--bandwidth GBPS (every device) or DEVICE=GBPS (e.g. cuda=3350)."""
    ceilings = {}
    for v in values or []:
        device, _, number = v.rpartition("=")
        try:
            gbps = float(number)
        except ValueError:
            gbps = -1
        if not gbps > 0:
            raise InputError(f"--bandwidth {v}: expected GBPS or DEVICE=GBPS with GBPS a positive number")
        ceilings[device.lower() or "*"] = gbps
    return ceilings


def measure_read_bandwidth(total_bytes=256 << 20, repeats=5):
    """GB/s of reading a large float32 array once (a read-only stream, as
    generation's weight reads), the best of a few tries of two ways: a BLAS
    dot product of its halves (BLAS brings its own threads) and np.max over
    slices in one thread per core (numpy lets go of the GIL in reductions).
    Returns (GB/s, how, bytes, tries)."""
    import numpy as np
    from concurrent.futures import ThreadPoolExecutor
    threads = os.cpu_count() or 1
    data = np.ones(total_bytes // 4, dtype=np.float32)  # written once so every page is mapped
    half = data.size // 2
    slices = np.array_split(data, threads)
    with ThreadPoolExecutor(threads) as pool:
        ways = {"a BLAS dot product of its two halves": lambda: np.dot(data[:half], data[half:]),
                f"np.max over slices in {threads} thread(s)": lambda: list(pool.map(np.max, slices))}
        rates = {}
        for how, read_once in ways.items():
            best = math.inf
            for _ in range(repeats):
                start = time.perf_counter()
                read_once()
                best = min(best, time.perf_counter() - start)
            rates[how] = total_bytes / best / 1e9
    how = max(rates, key=rates.get)
    return rates[how], how, total_bytes, repeats


def plot_bandwidth(plt, rows, ceilings, palette, peer_name):
    gen = [r for r in rows if r.is_generation and r.gen_gbs > 0]
    if not gen:
        raise NoData("No generation results (tg tests) with a known model size were given (infer's FILEs, "
                     "or --peer).")
    notes = []
    if ceilings:
        given = ", ".join(f"{'every device' if k == '*' else k}: {v:g} GB/s" for k, v in ceilings.items())
        notes.append(f"Ceiling given with --bandwidth ({html.escape(given)}).")
    measured = [r.device_gbs for r in gen if r.device_kind == "cpu" and r.device_gbs > 0]
    if measured and not any(k in ceilings for k in ("*", "cpu")):
        ceilings["cpu"] = max(measured)
        notes.append(f"The CPU ceiling, {max(measured):.1f} GB/s, is the best read bandwidth infer bench measured "
                     "after its runs (as many threads as the run reading a 512 MiB buffer).")
    if not any(k in ceilings for k in ("*", "cpu")) and any(r.device_kind == "cpu" for r in gen):
        try:
            gbps, how, size, repeats = measure_read_bandwidth()
        except ImportError:
            raise NoData("No --bandwidth was given and numpy, to measure one, is not installed.")
        ceilings["cpu"] = gbps
        notes.append(f"The CPU ceiling, {gbps:.1f} GB/s, was measured by this script when it made the page "
                     f"(on {html.escape(socket.gethostname())}): reading a {size >> 20} MiB array with numpy, "
                     f"{html.escape(how)}, the best of {repeats} tries (and of two ways). It is not necessarily "
                     "what the machine gave when the benchmarks ran; give a known figure with --bandwidth GBPS.")
    for r in gen:  # a GPU's ceiling: what infer bench's copy kernel measured there, unless given
        if r.device_kind != "cpu" and r.device_gbs > 0 and r.device_kind not in ceilings and "*" not in ceilings:
            ceilings[r.device_kind] = r.device_gbs
            notes.append(f"The {html.escape(r.device_kind)} ceiling, {r.device_gbs:.1f} GB/s, is what infer bench's "
                         "copy kernel measured on that device.")
    drawn = [r for r in gen if ceilings.get(r.device_kind, ceilings.get("*"))]
    missing = sorted({r.device_kind for r in gen} - {r.device_kind for r in drawn})
    if missing:
        notes.append(f"No ceiling for {', '.join(missing)}: those rows are left out "
                     f"(--bandwidth {missing[0]}=GBPS).")
    if not drawn:
        raise NoData(" ".join(notes))
    drawn.sort(key=lambda r: (r.config, r.tool != "infer", r.test_order, r.label))
    groups = {}
    for r in drawn:
        groups.setdefault((r.series, r.test), []).append(r)
    labels, shares, errors, colors, hatches, texts = [], [], [], [], [], []
    for (name, test), members in groups.items():
        ceiling = ceilings.get(members[0].device_kind, ceilings.get("*"))
        avg, std = pooled(members)
        gbs = statistics.fmean(r.gen_gbs for r in members)
        share = gbs / ceiling
        labels.append(f"{name} · {test}")
        shares.append(100 * share)
        errors.append(100 * share * std / avg if avg else 0)
        colors.append(palette.color(members[0].config))
        hatches.append(None if members[0].tool == "infer" else "///")
        texts.append(f"{gbs:.1f} GB/s, {100 * share:.0f}%")
    fig, ax = plt.subplots(figsize=(13, 0.42 * len(labels) + 1.4))
    y = list(range(len(labels)))[::-1]
    bars = ax.barh(y, shares, xerr=errors, capsize=3, color=colors, height=0.65, error_kw={"ecolor": "#222"})
    for bar, hatch in zip(bars, hatches):
        if hatch:
            bar.set_hatch(hatch)
            bar.set_edgecolor("black")
    for yi, share, err, text in zip(y, shares, errors, texts):
        ax.annotate(text, (share + err, yi), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    ax.axvline(100, color="black", linestyle="--", linewidth=1)
    ax.set_yticks(y, labels, fontsize=9)
    ax.set_xlabel("generation's achieved bandwidth, % of the ceiling")
    ax.set_xlim(0, max(110, max(s + e for s, e in zip(shares, errors)) * 1.2))
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    fig.tight_layout()
    notes.insert(0, "Achieved GB/s: infer's gen_gbs (the bytes a forward pass reads, the weights once and at depth "
                 f"the KV cache, × passes/s); for {html.escape(peer_name)}'s rows, model_size × tokens/s (the "
                 "weights only, so a deep row of theirs shows less than it reads). Whiskers: the tokens/s stddev. "
                 "Dashed line: the ceiling.")
    return fig, " ".join(notes)


def find_regressions(history, runs, threshold):
    """(series, test, run before, run after, (mean, stddev) before, after)
    for each drop between a test's consecutive runs larger than the
    threshold (a fraction) and than the two stddevs together."""
    found = []
    for (name, test), by_run in history.items():
        order = sorted(by_run)
        for before, after in zip(order, order[1:]):
            (a, sa), (b, sb) = by_run[before], by_run[after]
            if a > 0 and (a - b) / a > threshold and a - b > sa + sb:
                found.append((name, test, runs[before], runs[after], (a, sa), (b, sb)))
    return found


def plot_history(plt, rows, runs, threshold, palette):
    # One line per tool, config and test across the runs (rows of one run pooled).
    history = {}
    for r in rows:
        history.setdefault((f"{r.tool} · {r.config}", r.test), {}).setdefault(runs.index(r.label), []).append(r)
    history = {k: {i: pooled(v) for i, v in by_run.items()} for k, by_run in history.items()}
    repeated = {k: v for k, v in history.items() if len(v) > 1}
    if not repeated:
        raise NoData("No test was measured in more than one run (give earlier runs with --history, "
                     "labelled LABEL=FILE or by their files' times).")
    regressions = find_regressions(repeated, runs, threshold)
    order_of = {(f"{r.tool} · {r.config}", r.test): r.test_order for r in rows}
    keys = sorted(repeated, key=lambda k: (k[0], order_of[k]))
    columns = min(3, len(keys))
    grid_rows = math.ceil(len(keys) / columns)
    fig, axes = plt.subplots(grid_rows, columns, figsize=(4.4 * columns, 3.1 * grid_rows + 0.4), squeeze=False)
    config_of = {f"{r.tool} · {r.config}": r.config for r in rows}
    # Only the runs that have a point to draw get a place on the x axis.
    shown = sorted({i for key in keys for i in repeated[key]})
    place = {run: x for x, run in enumerate(shown)}
    for ax, key in zip(axes.flat, keys):
        by_run = {place[i]: stat for i, stat in repeated[key].items()}
        xs = sorted(by_run)
        ax.errorbar(xs, [by_run[i][0] for i in xs], yerr=[by_run[i][1] for i in xs], capsize=3, marker="o",
                    color=palette.color(config_of[key[0]]))
        for name, test, before, after, _, (b, sb) in regressions:
            if (name, test) == key:
                i, j = place[runs.index(before)], place[runs.index(after)]
                change = by_run[j][0] / by_run[i][0] - 1
                ax.plot([j], [b], marker="v", markersize=13, color="#d62728", zorder=5)
                ax.annotate(f"{change:+.0%}", (j, b), xytext=(8, -4), textcoords="offset points",
                            color="#d62728", fontweight="bold", fontsize=10)
        ax.set_title(f"{key[1]}\n{key[0]}", fontsize=9)
        ax.set_xticks(range(len(shown)), [tick_label(runs[i]) for i in shown], fontsize=7,
                      rotation=30 if len(shown) > 4 else 0, ha="right" if len(shown) > 4 else "center")
        ax.set_xlim(-0.5, len(shown) - 0.5)
        ax.set_ylim(bottom=0, top=max(v[0] + v[1] for v in by_run.values()) * 1.2)
        ax.set_ylabel("tokens/s", fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    fig.tight_layout()
    return fig, regressions, len(history) - len(repeated)


def tick_label(label, width=22):
    """A run's label under the x axis: a date and time on two lines, a long one cut short."""
    label = label if len(label) <= width else label[:width - 1] + "…"
    return label.replace(" ", "\n", 1) if len(label) > 12 else label


# --------------------------------------------------------------------------
# The page

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 1360px;
       padding: 0 16px; color: #1a1a1a; line-height: 1.45; }
h1 { margin-bottom: 4px; } h2 { margin-top: 36px; border-bottom: 2px solid #ddd; padding-bottom: 4px; }
.meta { color: #555; font-size: 14px; }
figure { margin: 12px 0; } figure svg { max-width: 100%; height: auto; }
.note { color: #333; font-size: 14px; max-width: 1100px; }
.no-data { background: #f4f4f4; border-left: 4px solid #999; padding: 10px 14px; color: #444; font-style: italic; }
.regressions { background: #fff0f0; border-left: 4px solid #d62728; padding: 8px 14px 8px 30px; }
.regressions li { margin: 3px 0; } .ok { color: #2a7a2a; }
table { border-collapse: collapse; font-size: 12.5px; margin: 8px 0; }
th, td { padding: 3px 7px; border-bottom: 1px solid #e2e2e2; text-align: left; white-space: nowrap; }
th { background: #f0f0f0; position: sticky; top: 0; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr:nth-child(even) td { background: #fafafa; }
"""


def fmt_ts(avg, std):
    digits = 1 if avg >= 10 else 2
    return f"{avg:.{digits}f} ± {std:.{digits}f}"


def optional_number(value, spec):
    return "" if value is None else format(value, spec)


def rows_table(rows):
    head = ["tool", "run", "file", "model", "format", "threads", "device", "isa", "test", "tokens/s",
            "reps", "TTFT ms", "gen GB/s", "load ms", "RSS MiB"]
    out = ["<table><thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"]
    for r in sorted(rows, key=lambda r: (r.model, r.fmt, r.tool != "infer", r.threads, r.device, r.test_order, r.label)):
        cells = [(r.tool, ""), (r.label, ""), (r.source, ""), (r.model, ""), (r.fmt, ""), (r.threads, "num"),
                 (r.device, ""), (r.isa, ""), (r.test, ""), (fmt_ts(r.avg, r.std), "num"),
                 (len(r.samples) or "", "num"),
                 (optional_number(r.ttft_ms, ".2f") if r.is_prompt and r.ttft_ms else "", "num"),
                 (f"{r.gen_gbs:.2f}" if r.gen_gbs else "", "num"),
                 (optional_number(r.load_ms, ".1f"), "num"),
                 (optional_number(r.rss_bytes / 2**20, ".1f") if r.rss_bytes else "", "num")]
        out.append("<tr>" + "".join(f"<td class=\"{c}\">{html.escape(str(v))}</td>" for v, c in cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def section(anchor, title, body):
    return f'<section id="{anchor}">\n<h2>{html.escape(title)}</h2>\n{body}\n</section>'


def plot_block(plt, salt, fig, note):
    return f'<figure>{figure_svg(plt, fig, salt)}</figure>\n<p class="note">{note}</p>'


def no_data(message):
    return f'<p class="no-data">{html.escape(str(message))}</p>'


def build_page(args, infer_rows, peer_rows, history_rows, runs, inputs, plt):
    palette = Palette(plt)
    current = infer_rows + peer_rows
    assign_series(current)
    parts = []

    def add(anchor, title, make):
        try:
            fig, note = make()
            parts.append(section(anchor, title, plot_block(plt, anchor, fig, note)))
        except NoData as e:
            parts.append(section(anchor, title, no_data(e)))

    add("plot-tests", "1. Tokens/s per test", lambda: plot_tests(plt, current, palette, args.peer_name))
    add("plot-depth", "2. Tokens/s against depth", lambda: plot_depth(plt, current, palette, args.peer_name))
    add("plot-ratio", f"3. infer / {args.peer_name}",
        lambda: plot_ratio(plt, infer_rows, peer_rows, palette, args.peer_name))
    ceilings = parse_bandwidth(args.bandwidth)
    add("plot-bandwidth", "4. Generation's share of the memory-bandwidth ceiling",
        lambda: plot_bandwidth(plt, current, ceilings, palette, args.peer_name))

    regression_count = 0
    all_history = history_rows + infer_rows
    try:
        if not history_rows:
            raise NoData("No history was given (--history OLD_RUN.json ... or a directory of them).")
        fig, regressions, single = plot_history(plt, all_history, runs, args.threshold / 100, palette)
        regression_count = len(regressions)
        if regressions:
            items = "".join(
                f"<li><b>{html.escape(test)}</b>, {html.escape(name)}: {html.escape(before)} {fmt_ts(*a)} → "
                f"{html.escape(after)} {fmt_ts(*b)} tokens/s (<b>{b[0] / a[0] - 1:+.1%}</b>)</li>"
                for name, test, before, after, a, b in regressions)
            listing = f'<ul class="regressions">{items}</ul>'
        else:
            listing = '<p class="ok">No regressions between consecutive runs.</p>'
        order = " → ".join(html.escape(r) for r in runs)
        note = (f"Runs, oldest first: {order}. Mean tokens/s ± stddev per run. A red triangle marks a "
                f"regression: a drop of more than {args.threshold:g}% from the test's previous run that is also "
                "larger than the two runs' stddevs together."
                + (f" {single} test(s) measured in one run only are not drawn." if single else ""))
        parts.append(section("plot-history", "5. History", plot_block(plt, "plot-history", fig, note) +
                             f"\n<h3>Regressions ({len(regressions)})</h3>\n{listing}"))
    except NoData as e:
        parts.append(section("plot-history", "5. History", no_data(e)))

    parts.append(section("table", "The numbers", rows_table(current) if current else no_data("No rows.")))
    if history_rows:
        parts.append(f"<details><summary>History rows ({len(history_rows)})</summary>{rows_table(history_rows)}"
                     "</details>")

    input_list = "".join(f"<li>{html.escape(kind)}: <code>{html.escape(path)}</code> — run "
                         f"“{html.escape(label)}”, {n} row(s)</li>" for kind, path, label, n in inputs)
    summary = (f'<p class="meta">Made {datetime.datetime.now().strftime("%Y-%m-%d %H:%M")} on '
               f"{html.escape(socket.gethostname())} by bench/report.py. "
               + (f'<a href="#plot-history"><b style="color:#d62728">{regression_count} regression(s)</b></a> '
                  "in the history." if regression_count else "") + "</p>")
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f"<title>{html.escape(args.title)}</title>\n<style>{STYLE}</style></head>\n<body>\n"
            f"<h1>{html.escape(args.title)}</h1>\n{summary}\n<details><summary>Inputs ({len(inputs)})</summary>"
            f"<ul>{input_list}</ul></details>\n" + "\n".join(parts) + "\n</body></html>\n")


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Turn `infer bench -o json` results (and llama.cpp's `llama-bench -o json`) into one "
                    "self-contained HTML page with plots.",
        epilog="Every FILE may be written LABEL=FILE (a commit, a date) to name its run. Unlabelled, the main\n"
               "FILEs are one run named by the newest one's modification time (likewise the peer's), and each\n"
               "--history file a run named by its own.\nThe flags taking several files take all the file names that "
               "follow them: put infer's files first,\nor repeat the flag.\n\nexamples:\n"
               "  build/infer bench -m model.gguf -o json > infer.json\n"
               "  llama-bench -m model.gguf -o json > llama.json\n"
               "  python3 bench/report.py -o report.html infer.json --peer llama.json\n"
               "  python3 bench/report.py -o report.html new=infer.json --history old=last-week.json\n\n"
               "exit status: 0 page written, 1 bad input (one line on stderr), 2 bad usage")
    parser.add_argument("infer", nargs="*", metavar="FILE", help="`infer bench -o json` output")
    parser.add_argument("-o", "--output", default="bench-report.html", metavar="HTML",
                        help="the page to write (default: %(default)s)")
    parser.add_argument("--peer", action="extend", nargs="+", default=[], metavar="FILE",
                        help="`llama-bench -o json` (or -o jsonl) output to compare with")
    parser.add_argument("--peer-name", default="llama.cpp", metavar="NAME",
                        help="what to call the peer on the page (default: %(default)s)")
    parser.add_argument("--history", action="extend", nargs="+", default=[], metavar="FILE|DIR",
                        help="earlier runs, oldest first (a directory: its *.json files by modification "
                             "time); the main FILEs come after them as the newest run")
    parser.add_argument("--bandwidth", action="append", metavar="[DEVICE=]GBPS",
                        help="the memory-bandwidth ceiling in GB/s, for every device or for one "
                             "(cpu=60, cuda=3350); without it the CPU's is measured with numpy")
    parser.add_argument("--threshold", type=float, default=5.0, metavar="PCT",
                        help="a drop between consecutive runs larger than this (and than the stddevs) "
                             "is a regression (default: %(default)s)")
    parser.add_argument("--title", default="Benchmark report", help="the page's title")
    args = parser.parse_args(argv)
    if not (args.infer or args.peer or args.history):
        parser.error("no input files: give infer's FILEs, --peer or --history")
    if not args.threshold >= 0:
        parser.error("--threshold must be a percentage, 0 or more")
    return args


def main(argv):
    args = parse_args(argv)
    try:
        inputs, infer_rows, peer_rows, history_rows, runs = [], [], [], [], []
        for history_arg in args.history:
            for label, path in expand_history(history_arg):
                rows = load_rows(path, label, "infer", args.peer_name, allow_llama_bench=True)
                history_rows += rows
                inputs.append(("history", path, rows[0].label, len(rows)))
        for label, path in labelled_files(args.infer):
            rows = load_rows(path, label, "infer", args.peer_name, allow_llama_bench=False)
            infer_rows += rows
            inputs.append(("infer", path, rows[0].label, len(rows)))
        for label, path in labelled_files(args.peer):
            # a peer may be another infer build too: its rows are the peer's all the same
            rows = load_rows(path, label, args.peer_name, args.peer_name, allow_llama_bench=True)
            peer_rows += rows
            inputs.append(("peer", path, rows[0].label, len(rows)))
        for r in history_rows + infer_rows:
            if r.label not in runs:
                runs.append(r.label)
        parse_bandwidth(args.bandwidth)  # bad values are input errors before any work
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise InputError("matplotlib is not installed (pip install matplotlib, or sh scripts/deps.sh)")
        plt.rcParams.update({"svg.fonttype": "none", "font.size": 10, "axes.spines.top": False,
                             "axes.spines.right": False})
        page = build_page(args, infer_rows, peer_rows, history_rows, runs, inputs, plt)
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(page)
        except OSError as e:
            raise InputError(f"{args.output}: cannot write it ({e.strerror})")
    except InputError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    print(f"{PROG}: wrote {args.output} ({len(infer_rows)} infer, {len(peer_rows)} peer, "
          f"{len(history_rows)} history rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
