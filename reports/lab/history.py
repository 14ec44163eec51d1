"""History of the tracked ratios: a sqlite store that every bench run
appends to, and the trend page drawn from it.

    /usr/bin/python3 -m reports.lab.history append RUN_DIR [REPORT_DIR]
    /usr/bin/python3 -m reports.lab.history plot WORKLOAD OUT_DIR [--baseline JSON]
    /usr/bin/python3 -m reports.lab.history list [WORKLOAD]

The store is DIR/history.sqlite, DIR = $LAB_HISTORY_DIR, else
$XDG_DATA_HOME/fscrypt-lab/history (~/.local/share/...): outside the
clone's build outputs, so that `make clean` and a fresh clone keep it. A
directory inside a build/ output of the clone is refused.

Per run (table runs): the run directory's name, workload, date, accel,
kernel release, kernel series hash, commit of the kernel tree, kernel
config hash, lab commit, reps, injected delay, and the report's directory.
Per metric, tracked ratio and phase (table ratios): the ratio with its 95%
t-interval from reports.lab.labstats.ratio_of_samples() (geometric mean of
the per-rep ratios, the report's and the check's definition; no CI when
the reps cannot support one), n, the per-rep ratios and the place of the
comparison and phase in the run's own order. Metrics: bw_bytes
(throughput) always, cpu_per_mib (CPU cost per MiB) when the run recorded
CPU time. Appending a run again replaces its rows.

A store of schema 1 (no metric column; values that were ratios of
medians) is upgraded when opened: its rows become metric bw_bytes, and
every value and CI is recomputed from the stored per-rep ratios with
today's definition, so one trend never mixes two definitions.

`plot` writes OUT_DIR/index.html: per tracked ratio and phase, the ratio
over time (SVG, each point a link to its report, its CI as a whisker),
with the baseline's ratio and its alert bound, and a table of
the points with links.
"""

import argparse
import datetime
import html
import json
import math
import os
import sqlite3
import sys

from reports.lab import labstats as L
from reports.lab import runmodel as M
from reports.lab.analysis import DEFAULT_THRESHOLD

SCHEMA_VERSION = 3
RATIOS_TABLE = """
CREATE TABLE IF NOT EXISTS ratios (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    metric TEXT NOT NULL DEFAULT 'bw_bytes',
    ratio TEXT NOT NULL,
    phase TEXT NOT NULL,
    ord INTEGER,
    value REAL NOT NULL,
    ci_lo REAL,
    ci_hi REAL,
    n_a INTEGER NOT NULL,
    n_b INTEGER NOT NULL,
    not_conclusive TEXT,
    samples TEXT NOT NULL,
    PRIMARY KEY (run_id, metric, ratio, phase)
);
"""
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    run TEXT NOT NULL UNIQUE,
    workload TEXT NOT NULL,
    date TEXT NOT NULL,
    accel TEXT,
    kernel_release TEXT,
    kernel_series_hash TEXT,
    kernel_config_sha256 TEXT,
    reps INTEGER,
    injected_lookup_delay_us INTEGER,
    report TEXT,
    kernel_tree_head TEXT,
    lab_commit TEXT,
    injected_lookup_delay_ns INTEGER,
    run_kind TEXT,
    qemu_version TEXT
);
""" + RATIOS_TABLE

# The metrics the history records, with what the trend plots call them.
METRIC_NAMES = {"bw_bytes": "throughput ratio",
                "cpu_per_mib": "CPU cost per MiB ratio"}
# CPU time measured around the whole fio process (meta cpu.window other
# than "io": the guest before 2026-12-05 13:00 UTC) holds fio's start and
# exit, the same for every arm, which pulls the ratio toward 1: another
# metric than CPU time over fio's I/O, stored under its own name so that
# one trend never mixes the two windows.
PROCESS_WINDOW = "@process"
METRIC_NAMES["cpu_per_mib" + PROCESS_WINDOW] = (
    "CPU cost per MiB ratio, window around the whole fio process (fio's "
    "start and exit included)")
RECORDED = ("bw_bytes", "cpu_per_mib")


def stored_metric(run, metric):
    """The name METRIC of RUN is stored under (see PROCESS_WINDOW)."""
    window = run.cpu.measured_window if run.cpu else "process"
    if metric.startswith("cpu") and window != "io":
        return metric + PROCESS_WINDOW
    return metric


class HistoryError(Exception):
    """Unusable store directory or input (exit 2)."""


def default_dir():
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "fscrypt-lab", "history")


def store_dir(path=None):
    """The store directory: path, else $LAB_HISTORY_DIR, else the default.
    Refuses one inside a build/ directory of this clone."""
    d = os.path.abspath(path or os.environ.get("LAB_HISTORY_DIR")
                        or default_dir())
    build = os.path.join(M.LAB_TOP, "build")
    if d == build or d.startswith(build + os.sep):
        raise HistoryError(f"history directory {d} is inside the build "
                           f"outputs ({build}), which make clean removes; "
                           "set LAB_HISTORY_DIR elsewhere")
    return d


def connect(path=None):
    d = store_dir(path)
    os.makedirs(d, exist_ok=True)
    db = sqlite3.connect(os.path.join(d, "history.sqlite"))
    db.execute("PRAGMA foreign_keys = ON")
    upgrade(db)
    db.executescript(SCHEMA)
    return db


def upgrade(db):
    """Bring a schema-1 store to SCHEMA_VERSION (see the module text):
    new columns of runs, the metric and ord columns of ratios (a new
    primary key, so the table is rebuilt), every value and CI recomputed
    from the stored samples by reports.lab.labstats.ratio_of_samples()."""
    tables = {r[0] for r in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "runs" not in tables or db.execute(
            "PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        return
    cols = {r[1] for r in db.execute("PRAGMA table_info(runs)")}
    with db:
        for col, kind in (("kernel_tree_head", "TEXT"),
                          ("lab_commit", "TEXT"),
                          ("injected_lookup_delay_ns", "INTEGER"),
                          ("run_kind", "TEXT"), ("qemu_version", "TEXT")):
            if col not in cols:
                db.execute(f"ALTER TABLE runs ADD COLUMN {col} {kind}")
        # schema 3: the injected delay in ns (the knob's unit since
        # 2026-12-07); the runs before it were single boots of make bench
        db.execute("UPDATE runs SET injected_lookup_delay_ns = "
                   "1000 * COALESCE(injected_lookup_delay_us, 0) "
                   "WHERE injected_lookup_delay_ns IS NULL")
        db.execute("UPDATE runs SET run_kind = 'bench' "
                   "WHERE run_kind IS NULL")
        rcols = {r[1] for r in db.execute("PRAGMA table_info(ratios)")}
        if "ratios" in tables and "metric" not in rcols:
            db.execute("ALTER TABLE ratios RENAME TO ratios_v1")
            db.executescript(RATIOS_TABLE)
            old = db.execute("SELECT run_id, ratio, phase, n_a, n_b, "
                             "samples FROM ratios_v1").fetchall()
            for run_id, ratio, phase, n_a, n_b, samples in old:
                r = L.ratio_of_samples(json.loads(samples))
                db.execute(
                    "INSERT INTO ratios (run_id, metric, ratio, phase, ord, "
                    "value, ci_lo, ci_hi, n_a, n_b, not_conclusive, samples)"
                    " VALUES (?, 'bw_bytes', ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?)",
                    (run_id, ratio, phase, r["value"],
                     r["ci_lo"] if r["ci_supported"] else None,
                     r["ci_hi"] if r["ci_supported"] else None, n_a, n_b,
                     r["not_conclusive"], samples))
            db.execute("DROP TABLE ratios_v1")
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def run_points(run):
    """[(metric, ratio, phase, ord, value, lo, hi, n_a, n_b,
    not_conclusive, samples)] of every tracked ratio the run measured, as
    the report computes it (reports.lab.labstats.ratio_of_samples of the
    per-rep ratios; no CI with too few reps); ord is the place of the
    comparison and phase in the run's own order (1000 x comparison +
    phase)."""
    out = []
    metrics = [m for m in RECORDED
               if not m.startswith("cpu") or run.has_cpu]
    for metric in metrics:
        for ci, (name, phases) in enumerate(
                M.tracked_ratios(run, metric).items()):
            a, b = name.split("/")
            for pi, (phase, v) in enumerate(phases.items()):
                ord_ = 1000 * ci + pi
                if isinstance(v, str):
                    continue
                r = L.ratio_of_samples(v[1])
                if not r["n"]:
                    continue  # no usable sample (0 CPU ticks)
                lo, hi = ((r["ci_lo"], r["ci_hi"]) if r["ci_supported"]
                          else (None, None))
                n_a = len(run.values(a, phase, metric))
                n_b = len(run.values(b, phase, metric))
                out.append((stored_metric(run, metric), name, phase, ord_,
                            r["value"], lo, hi,
                            n_a, n_b, r["not_conclusive"], v[1]))
    return out


def append(run_dir, report_dir=None, path=None):
    """Record RUN_DIR's tracked ratios; returns the number of points."""
    run = M.load_run(run_dir)
    info = run.run_info
    k = run.kernel
    name = os.path.basename(os.path.normpath(run_dir))
    points = run_points(run)
    with connect(path) as db:
        db.execute("DELETE FROM runs WHERE run = ?", (name,))
        cur = db.execute(
            "INSERT INTO runs (run, workload, date, accel, kernel_release, "
            "kernel_series_hash, kernel_config_sha256, reps, "
            "injected_lookup_delay_ns, report, kernel_tree_head, "
            "lab_commit, run_kind, qemu_version) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (name, run.workload, run.date or "",
             info.get("accel"), k.release, k.series_hash,
             k.config_sha256, run.reps, run.injected_delay_ns,
             os.path.abspath(report_dir) if report_dir else None,
             k.tree_head, k.lab_commit, run.kind,
             info.get("qemu_version")))
        rid = cur.lastrowid
        db.executemany(
            "INSERT INTO ratios (run_id, metric, ratio, phase, ord, value, "
            "ci_lo, ci_hi, n_a, n_b, not_conclusive, samples) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(rid, m, r, p, o, v, lo, hi, na, nb, nc, json.dumps(s))
             for m, r, p, o, v, lo, hi, na, nb, nc, s in points])
    db.close()
    return len(points)


def series(workload, path=None):
    """{(metric, ratio, phase): [point dict, ...]} of a workload, oldest
    first."""
    db = connect(path)
    db.row_factory = sqlite3.Row
    rows = db.execute(
        "SELECT runs.*, ratios.* FROM ratios JOIN runs ON runs.id = "
        "ratios.run_id WHERE runs.workload = ? ORDER BY runs.date, runs.run",
        (workload,)).fetchall()
    db.close()
    out = {}
    for r in rows:
        d = dict(r)
        d["samples"] = json.loads(d["samples"])
        out.setdefault((d["metric"], d["ratio"], d["phase"]), []).append(d)
    return out


def _when(date):
    try:
        return datetime.datetime.fromisoformat(date.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None


def _rel(target, start):
    return os.path.relpath(target, start) if target else None


def plot_ratio(key, points, base, threshold, out_dir, fname):
    """One trend plot (SVG): the ratio per run over time, CI whiskers,
    the baseline's ratio and its alert bound (THRESHOLD %); each point
    links to its report."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    # text as text (searchable, small), no creation date (reproducible)
    matplotlib.rcParams["svg.fonttype"] = "none"
    metric, name, phase = key
    fig, ax = plt.subplots(figsize=(9, 3.6))
    links = {}
    for i, p in enumerate(points):
        x = _when(p["date"]) or i
        url = _rel(os.path.join(p["report"], "index.html"), out_dir) \
            if p["report"] else None
        injected = bool(p["injected_lookup_delay_ns"])
        color = "#d62728" if injected else "#1f77b4"
        if p["ci_lo"] is not None:
            ax.errorbar([x], [p["value"]],
                        yerr=[[p["value"] - p["ci_lo"]],
                              [p["ci_hi"] - p["value"]]],
                        fmt="none", ecolor=color, capsize=4, lw=1)
        sc = ax.scatter([x], [p["value"]], color=color, zorder=3, s=30,
                        marker="o" if p["ci_lo"] is not None else "x")
        if url:
            sc.set_gid(f"lab-point-{i}")
            links[f"lab-point-{i}"] = url
    if base is not None:
        ax.axhline(base, color="gray", lw=1, label=f"baseline {base:.4f}")
        worse = -1 if metric == "bw_bytes" else 1
        ax.axhline(base * (1 + worse * threshold / 100), color="#d62728",
                   ls="--", lw=1, label="alert bound "
                   f"({'-' if worse < 0 else '+'}{threshold:.2f}%)")
        ax.legend(fontsize=7, loc="best")
    ax.set_title(f"{name} {phase}: {METRIC_NAMES.get(metric, metric)} per "
                 "run (95% CI whiskers; x = not conclusive, no CI; red = "
                 "injected slowdown)", fontsize=9)
    ax.set_ylabel("geometric mean of per-rep ratios")
    ax.grid(alpha=0.3)
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, fname), metadata={"Date": None})
    plt.close(fig)
    link_points(os.path.join(out_dir, fname), links)
    return fname


def link_points(svg_path, links):
    """Wrap each point's group (gid) of the SVG in a link to its report.
    (matplotlib drops the url of a one-point scatter: it draws it as a
    marker, which has no link.)"""
    import xml.etree.ElementTree as ET
    svg_ns, xlink = "http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"
    ET.register_namespace("", svg_ns)
    ET.register_namespace("xlink", xlink)
    tree = ET.parse(svg_path)
    # find first, then wrap (wrapping while iterating would revisit them)
    targets = [(parent, child) for parent in tree.iter() for child in parent
               if child.get("id") in links]
    for parent, child in targets:
        a = ET.Element(f"{{{svg_ns}}}a",
                       {f"{{{xlink}}}href": links[child.get("id")]})
        i = list(parent).index(child)
        parent.remove(child)
        a.append(child)
        parent.insert(i, a)
    found = len(targets)
    if found != len(links):
        raise HistoryError(f"{svg_path}: linked {found} of {len(links)} "
                           "points")
    tree.write(svg_path, encoding="unicode", xml_declaration=False)


def _fmt(x, spec=".4f"):
    return "-" if x is None else format(x, spec)


def split_trends(data):
    """One trend per Linux base, accel and run kind: {key: points} with
    every key whose points come from more than one (runmodel.kernel_base
    of their release; accel; run_kind: bench, nightly, old, new) split
    into (metric, ratio, "PHASE (Linux BASE, ACCEL, KIND)") keys, so that
    no trend line joins runs of 6.1 and 6.12, of KVM and icount, or a
    make bench of six arms and a nightly; and {key: (the key it came
    from, its base or None)}."""
    out, origin = {}, {}
    for key, pts in data.items():
        groups = {}
        for p in pts:
            kb = M.kernel_base({"release": p.get("kernel_release")})
            groups.setdefault((kb, p.get("accel") or "?",
                               p.get("run_kind") or "bench"), []).append(p)
        # the label names what differs among the key's groups
        varies = [len({g[i] for g in groups}) > 1 for i in range(3)]
        for (kb, accel, kind), g in groups.items():
            parts = [x for x, v in zip((f"Linux {kb or '?'}", accel, kind),
                                       varies) if v]
            new = key if len(groups) == 1 else \
                (key[0], key[1], f"{key[2]} ({', '.join(parts)})")
            out[new] = g
            origin[new] = (key, kb)
    return out, origin


def plot(workload, out_dir, baseline=None, path=None):
    """Write OUT_DIR/index.html and one SVG per tracked ratio and phase
    (and Linux base). Returns the number of plots."""
    data = series(workload, path)
    base, limits, bkbase = {}, {}, None
    if baseline and os.path.exists(baseline):
        with open(baseline, encoding="utf-8") as f:
            b = json.load(f)
        if b.get("format") == "gate-1":
            # the nightly's baseline (reports/lab/gate.py): its A/A ratio and
            # alert bound per phase (the bound is for a nightly's mean of
            # boots; each point here is one boot)
            bkbase = (b.get("identity") or {}).get("kernel_base")
            floor = math.log1p(float(b.get("floor_pct", 0)) / 100)
            for phase, e in (b.get("phases") or {}).items():
                k = (b.get("metric", "cpu_per_mib"), b["ratio"], phase)
                base[k] = e["mean_ratio"]
                limits[k] = 100 * math.expm1(max(e["threshold_log"], floor))
        else:
            # a single-run baseline of the check used before 2026-12-07
            cf = b.get("created_from") or {}
            bkbase = cf.get("kernel_base") or M.kernel_base(
                {"release": cf.get("kernel_release")})
            metric = b.get("metric") or "bw_bytes"
            for name, phases in (b.get("ratios") or {}).items():
                for phase, e in phases.items():
                    k = (metric, name, phase)
                    base[k] = L.ratio_of_samples(e["samples"])["value"]
                    limits[k] = float(b.get("threshold_pct",
                                            DEFAULT_THRESHOLD))
    # a baseline's line only on the trend of its own Linux base
    data, origin = split_trends(data)
    limits = {k: limits[old] for k, (old, kb) in origin.items()
              if old in base and not (bkbase and kb and kb != bkbase)}
    base = {k: base[old] for k, (old, kb) in origin.items()
            if old in base and not (bkbase and kb and kb != bkbase)}
    os.makedirs(out_dir, exist_ok=True)
    # in the order the runs recorded (throughput first, then the
    # comparisons as their runs ordered them), never the working tree's
    morder = list(METRIC_NAMES)

    def place(k):
        ords = [p["ord"] for p in data[k] if p["ord"] is not None]
        return (morder.index(k[0]) if k[0] in morder else len(morder),
                min(ords) if ords else len(data), k)
    keys = sorted(data, key=place)
    esc = html.escape
    body = [f"<h1>History of workload {esc(workload)}</h1>",
            f"<p>Store: <code>{esc(store_dir(path))}/history.sqlite</code>"
            f"; {len({p['run'] for v in data.values() for p in v})} run(s). "
            "Each point is one run (click it for its report): the "
            "geometric mean of its per-rep ratios (the report's and the "
            "check's definition); whiskers are "
            "95% t-intervals over the run's reps (conditional on its one "
            "boot); runs with too few reps for one are drawn "
            "as x without whiskers. Baseline: "
            + (f"<code>{esc(os.path.basename(baseline))}</code> (its "
               "ratio, and the alert bound of its check)" if base
               else "none") + ".</p>"]
    if not keys:
        body.append(f"<p><b>No runs of {esc(workload)} recorded yet.</b> "
                    "Every <code>make bench</code> appends one.</p>")
    for i, key in enumerate(keys):
        pts = data[key]
        fname = plot_ratio(key, pts, base.get(key), limits.get(key),
                           out_dir, f"trend-{i}.svg")
        body.append(f"<h2>{esc(key[1])} {esc(key[2])}: "
                    f"{esc(METRIC_NAMES.get(key[0], key[0]))}</h2>")
        # inline SVG: its points are links (an <img> would not follow them)
        with open(os.path.join(out_dir, fname), encoding="utf-8") as f:
            svg = f.read()
        body.append('<div class="plot">' + svg[svg.index("<svg"):]
                    + "</div>")
        rows = []
        for p in pts:
            link = _rel(os.path.join(p["report"], "index.html"), out_dir) \
                if p["report"] else None
            ci = ("none: " + p["not_conclusive"] if p["ci_lo"] is None
                  else f"{p['ci_lo']:.4f}-{p['ci_hi']:.4f}")
            rows.append(
                "<tr><td>" + esc(p["date"]) + "</td><td>"
                + (f'<a href="{esc(link)}">{esc(p["run"])}</a>' if link
                   else esc(p["run"]))
                + f"</td><td>{_fmt(p['value'])}</td><td>{esc(ci)}</td>"
                f"<td>{p['n_a']} vs {p['n_b']}</td>"
                f"<td>{esc(p['accel'] or '?')}</td>"
                f"<td><code>{esc(p['kernel_series_hash'] or '?')}</code>"
                + (f" <code>{esc(p['kernel_tree_head'][:12])}</code>"
                   if p.get("kernel_tree_head") else "") + "</td>"
                f"<td><code>{esc(p['kernel_config_sha256'] or '?')}</code>"
                "</td><td>" + (f"{p['injected_lookup_delay_ns']} ns"
                               if p["injected_lookup_delay_ns"] else "-")
                + "</td></tr>")
        body.append("<table><tr><th>date</th><th>run (report)</th>"
                    "<th>ratio</th><th>95% CI</th><th>reps</th>"
                    "<th>accel</th><th>series</th><th>config</th>"
                    "<th>injected</th></tr>" + "".join(rows) + "</table>")
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>History: {esc(workload)}</title><style>"
            "body{font-family:sans-serif;max-width:1150px;margin:1em auto;"
            "padding:0 1em}table{border-collapse:collapse;font-size:.9em}"
            "td,th{border:1px solid #bbb;padding:2px 6px}"
            ".plot svg{max-width:100%;height:auto}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")
    with open(os.path.join(out_dir, "index.html"), "w",
              encoding="utf-8") as f:
        f.write(page)
    return len(keys)


def main(argv=None):
    ap = argparse.ArgumentParser(description="History of the tracked ratios.")
    ap.add_argument("--dir", help="store directory (default: "
                    "$LAB_HISTORY_DIR, else " + default_dir() + ")")
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("append", help="record a run's tracked ratios")
    a.add_argument("run_dir")
    a.add_argument("report_dir", nargs="?")
    p = sub.add_parser("plot", help="write the trend page of a workload")
    p.add_argument("workload")
    p.add_argument("out_dir")
    p.add_argument("--baseline", help="the nightly's baseline (gate-1 JSON)")
    ls = sub.add_parser("list", help="print the recorded points")
    ls.add_argument("workload", nargs="?")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "append":
            n = append(args.run_dir, args.report_dir, args.dir)
            print(f"history: {n} ratio(s) of {os.path.basename(os.path.normpath(args.run_dir))} "
                  f"recorded in {store_dir(args.dir)}/history.sqlite")
        elif args.cmd == "plot":
            n = plot(args.workload, args.out_dir, args.baseline, args.dir)
            print(f"history: {n} trend plot(s) in {args.out_dir}/index.html")
        else:
            db = connect(args.dir)
            q = ("SELECT runs.date, runs.run, runs.workload, metric, ratio, "
                 "phase, value, ci_lo, ci_hi, not_conclusive FROM ratios "
                 "JOIN runs ON runs.id = run_id")
            rows = (db.execute(q + " WHERE workload = ? ORDER BY date",
                               (args.workload,)) if args.workload
                    else db.execute(q + " ORDER BY date"))
            for r in rows:
                print("\t".join("-" if x is None else str(x) for x in r))
            db.close()
    except (HistoryError, M.RunError, sqlite3.Error, OSError) as e:
        print(f"history: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
