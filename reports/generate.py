#!/usr/bin/python3
"""Build a benchmark report from a raw run directory.

    /usr/bin/python3 reports/generate.py RUN_DIR OUT_DIR [--threshold PCT]

Reads RUN_DIR/meta.json, RUN_DIR/raw/<arm>/rep<N>/<phase>.json (fio json+),
and, when present, RUN_DIR/profiles/ and RUN_DIR/scaling.json. Writes to
OUT_DIR: index.html, summary.md, results.json, PNG plots, and copies of raw/,
profiles/, meta.json and scaling.json, so every number in the report traces
back to a raw fio file. Statistics are in labstats.py; reports/README.md
describes the formats and the rules.

Exit status: 0 report written (data problems, if any, are listed in it and
on stderr), 2 usage error or unusable run directory.
"""

import argparse
import html
import json
import math
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import labstats as L  # noqa: E402
import flame as F  # noqa: E402

# Arms in display order; arms with other names are shown after these.
KNOWN_ARMS = ["btrfs-extent", "btrfs-inode", "btrfs-plain",
              "ext4-inode", "ext4-plain"]

# (arm A, reference arm B, what A/B tells). Each arm is the A side of at
# most one comparison, so that B is "the reference" of A in the tables.
COMPARISONS = [
    ("btrfs-extent", "btrfs-inode",
     "per-extent vs per-inode keys on btrfs (the main comparison)"),
    ("btrfs-inode", "btrfs-plain", "cost of per-inode encryption on btrfs"),
    ("ext4-inode", "ext4-plain", "cost of per-inode encryption on ext4"),
    ("btrfs-plain", "ext4-plain", "btrfs vs ext4, both unencrypted"),
]
REFERENCE = {a: b for a, b, _ in COMPARISONS}
MAIN_A, MAIN_B = COMPARISONS[0][0], COMPARISONS[0][1]

GOAL_BW_RATIO = 0.97    # per-extent / per-inode throughput, at least
GOAL_P99_RATIO = 1.05   # per-extent / per-inode p99 latency, at most
PERCENTILES = (50, 99, 99.9)
DEFAULT_THRESHOLD = 5.0
MIB = 1024.0 * 1024.0

TIMING_NOTE = ("**Timings under TCG or icount are not hardware times.** "
               "QEMU emulates the CPU, so absolute throughput and latency "
               "say little about real machines: compare ratios between arms "
               "of the same run only, never absolute numbers across runs or "
               "machines.")


class RunError(Exception):
    """The run directory cannot be used (message says why)."""


# ---------------------------------------------------------------- loading

def read_json_file(path):
    """Parse a JSON file, raising RunError with the path on failure."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise RunError(f"cannot read {path}: {e.strerror}") from e
    except ValueError as e:
        raise RunError(f"{path} is not valid JSON: {e}") from e


def read_fio_json(path):
    """fio output, tolerating text before the first '{' and after the end."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        raise RunError(f"cannot read {path}: {e.strerror}") from e
    start = text.find("{")
    if start < 0:
        raise RunError(f"{path}: no JSON object in fio output")
    try:
        obj, _ = json.JSONDecoder().raw_decode(text, start)
    except ValueError as e:
        raise RunError(f"{path}: fio output is not valid JSON: {e}") from e
    return obj


def parse_fio(path, rel):
    """Numbers of one phase of one rep from fio json+ output.

    The direction is the one of jobs[0]["read"] / ["write"] with
    io_bytes > 0 (the larger if both). Returns a dict; raises RunError.
    """
    obj = read_fio_json(path)
    jobs = obj.get("jobs") if isinstance(obj, dict) else None
    if not jobs:
        raise RunError(f"{path}: fio output has no jobs")
    job = jobs[0]
    sides = {d: job.get(d) or {} for d in ("read", "write")}
    moved = {d: s.get("io_bytes", 0) or 0 for d, s in sides.items()}
    if max(moved.values()) <= 0:
        raise RunError(f"{path}: neither read nor write moved any bytes")
    direction = "read" if moved["read"] >= moved["write"] else "write"
    side = sides[direction]
    clat = side.get("clat_ns") or {}
    bins = clat.get("bins")
    return {
        "file": rel,
        "direction": direction,
        "both_directions": min(moved.values()) > 0,
        "jobs": len(jobs),
        "fio_version": obj.get("fio version"),
        "bw_bytes": float(side.get("bw_bytes", 0)),
        "iops": float(side.get("iops", 0)),
        "io_bytes": int(side.get("io_bytes", 0)),
        "runtime_ms": side.get("runtime"),
        "clat_n": clat.get("N"),
        "clat_mean_ns": clat.get("mean"),
        "fio_percentiles_ns": clat.get("percentile") or {},
        "bins": ({int(k): int(v) for k, v in bins.items()}
                 if isinstance(bins, dict) and bins else None),
    }


def arm_order(names):
    """Known arms first, in KNOWN_ARMS order, then the others sorted."""
    names = list(names)
    return ([a for a in KNOWN_ARMS if a in names]
            + sorted(a for a in names if a not in KNOWN_ARMS))


def rep_dirs(arm_dir):
    """{rep number: path} of the rep<N> directories of one arm."""
    out = {}
    if os.path.isdir(arm_dir):
        for name in os.listdir(arm_dir):
            m = re.fullmatch(r"rep(\d+)", name)
            if m and os.path.isdir(os.path.join(arm_dir, name)):
                out[int(m.group(1))] = os.path.join(arm_dir, name)
    return dict(sorted(out.items()))


def load_run(run_dir):
    """Read meta.json and every raw fio file of the measured arms.

    Returns a dict: dir, meta, phases, arms (spec per arm, display order),
    measured (arm list), not_measured ({arm: reason}), data
    ({arm: {phase: {rep: parse_fio()}}}), warnings (list of str).
    Missing or broken raw files are warnings, not errors; a missing or
    broken meta.json is a RunError.
    """
    if not os.path.isdir(run_dir):
        raise RunError(f"run directory {run_dir} does not exist")
    meta = read_json_file(os.path.join(run_dir, "meta.json"))
    if not isinstance(meta, dict):
        raise RunError(f"{run_dir}/meta.json: not a JSON object")
    phases = meta.get("phases")
    arms_meta = meta.get("arms")
    if not isinstance(phases, list) or not phases:
        raise RunError(f"{run_dir}/meta.json: 'phases' missing or empty")
    if not isinstance(arms_meta, dict) or not arms_meta:
        raise RunError(f"{run_dir}/meta.json: 'arms' missing or empty")
    warnings = []
    arms = {a: arms_meta[a] if isinstance(arms_meta[a], dict) else {}
            for a in arm_order(arms_meta)}
    measured, not_measured, data = [], {}, {}
    raw = os.path.join(run_dir, "raw")
    for arm, spec in arms.items():
        status = spec.get("status", "?")
        if status != "measured":
            reason = spec.get("reason") or "no reason given"
            not_measured[arm] = (reason if status == "skipped"
                                 else f"status '{status}': {reason}")
            continue
        measured.append(arm)
        data[arm] = {p: {} for p in phases}
        reps = rep_dirs(os.path.join(raw, arm))
        if not reps:
            warnings.append(f"{arm}: measured per meta.json, but "
                            f"raw/{arm}/rep<N>/ has no data")
        for rep, rdir in reps.items():
            for phase in phases:
                rel = f"raw/{arm}/rep{rep}/{phase}.json"
                path = os.path.join(rdir, f"{phase}.json")
                if not os.path.exists(path):
                    warnings.append(f"missing {rel}")
                    continue
                try:
                    d = parse_fio(path, rel)
                except RunError as e:
                    warnings.append(str(e).replace(run_dir.rstrip("/") + "/",
                                                   ""))
                    continue
                if d["jobs"] > 1:
                    warnings.append(f"{rel}: {d['jobs']} jobs, only "
                                    "jobs[0] is used")
                if d["both_directions"]:
                    warnings.append(f"{rel}: both reads and writes; only "
                                    f"{d['direction']}s are used")
                if d["bins"] is None:
                    warnings.append(f"{rel}: no clat_ns bins (not json+?): "
                                    "no latency percentiles")
                data[arm][phase][rep] = d
        want = meta.get("reps")
        if reps and isinstance(want, int) and len(reps) != want:
            warnings.append(f"{arm}: {len(reps)} rep directories, "
                            f"meta.json says reps={want}")
    if os.path.isdir(raw):
        for name in sorted(os.listdir(raw)):
            if name not in arms:
                warnings.append(f"raw/{name}/ is not an arm of meta.json; "
                                "ignored")
    return {"dir": run_dir, "meta": meta, "phases": phases, "arms": arms,
            "measured": measured, "not_measured": not_measured,
            "data": data, "warnings": warnings}


def bw_by_rep(run, arm, phase):
    """{rep: bw_bytes} of one arm and phase (empty if not measured)."""
    reps = run["data"].get(arm, {}).get(phase, {})
    return {r: d["bw_bytes"] for r, d in reps.items()}


def bins_of(run, arm, phase):
    """Per-rep latency histograms of one arm and phase (reps with bins)."""
    reps = run["data"].get(arm, {}).get(phase, {})
    return [d["bins"] for _, d in sorted(reps.items()) if d["bins"]]


def phase_direction(run, phase):
    """'read' or 'write' from the data; from the phase name if no data."""
    seen = [d["direction"] for arm in run["measured"]
            for d in run["data"][arm][phase].values()]
    if seen:
        return max(set(seen), key=seen.count)
    return "write" if "write" in phase else "read"


def arm_absent_reason(run, arm):
    """Why arm has no numbers in this run, or None if it has some."""
    if arm not in run["arms"]:
        return f"{arm} is not an arm of this run"
    if arm in run["not_measured"]:
        return f"{arm} skipped: {run['not_measured'][arm]}"
    return None


# ----------------------------------------------------------- analysis

def comparison(run, a, b, label, phase, threshold):
    """Numbers of one A-vs-B comparison on one phase (see README)."""
    c = {"a": a, "b": b, "label": label, "phase": phase}
    reasons = [r for r in (arm_absent_reason(run, a),
                           arm_absent_reason(run, b)) if r]
    if reasons:
        c.update(status="not measured", reason="; ".join(reasons))
        return c
    ba, bb = bw_by_rep(run, a, phase), bw_by_rep(run, b, phase)
    if not ba or not bb:
        c.update(status="not measured",
                 reason=f"no data for {a if not ba else b} on {phase}")
        return c
    xa, xb = list(ba.values()), list(bb.values())
    ratio, lo, hi = L.bootstrap_ratio_ci(xa, xb)
    # Too few reps: no CI at all (a bootstrap of one rep is not a CI of
    # zero width), and the verdicts say "not conclusive (n = N)".
    ci_ok = L.ci_supported(len(xa), len(xb))
    if not ci_ok:
        lo = hi = float("nan")
    sc = L.significant_change(xa, xb, threshold)
    reps, per_rep = L.paired_ratios(ba, bb)
    c.update(status="measured", n_a=len(xa), n_b=len(xb),
             bw={"ratio": ratio, "ci_lo": lo, "ci_hi": hi, **sc,
                 "min_p": L.min_mw_p(len(xa), len(xb)),
                 "ci_supported": ci_ok,
                 "not_conclusive": L.conclusive_n(len(xa), len(xb))},
             per_rep_ratio=dict(zip(reps, per_rep)))
    la, lb = bins_of(run, a, phase), bins_of(run, b, phase)
    lat_ok = L.ci_supported(len(la), len(lb))
    lat = {}
    for q in PERCENTILES:
        r, lo, hi = L.bootstrap_percentile_ratio_ci(la, lb, q)
        if not lat_ok:
            lo = hi = float("nan")
        lat[pct_name(q)] = {"ratio": r, "ci_lo": lo, "ci_hi": hi,
                            "n_a": len(la), "n_b": len(lb),
                            "ci_supported": lat_ok,
                            "not_conclusive": L.conclusive_n(len(la),
                                                             len(lb))}
    c["latency"] = lat
    return c


def pct_name(q):
    """50 -> 'p50', 99.9 -> 'p99.9'."""
    return "p" + (f"{q:g}")


def analyze_arm(run, arm):
    """Per phase: raw numbers per rep, summaries, merged percentiles."""
    out = {}
    for phase in run["phases"]:
        reps = run["data"][arm][phase]
        merged = L.merge_bins(bins_of(run, arm, phase))
        out[phase] = {
            "direction": phase_direction(run, phase),
            "reps": {r: {k: d[k] for k in
                         ("file", "direction", "bw_bytes", "iops",
                          "io_bytes", "runtime_ms", "clat_n",
                          "clat_mean_ns", "fio_percentiles_ns")}
                     for r, d in reps.items()},
            "bw_bytes": L.summary(d["bw_bytes"] for d in reps.values()),
            "iops": L.summary(d["iops"] for d in reps.values()),
            "latency_ns": {pct_name(q): L.percentile_from_bins(merged, q)
                           for q in PERCENTILES},
            "latency_ios": sum(merged.values()),
            "latency_reps": len(bins_of(run, arm, phase)),
        }
    return out


def verdicts(run, comps):
    """Plain-language goal verdicts, one per metric and read phase."""
    out = []
    main = {c["phase"]: c for c in comps
            if (c["a"], c["b"]) == (MAIN_A, MAIN_B)}
    read_phases = [p for p in run["phases"]
                   if phase_direction(run, p) == "read"]
    if not read_phases:
        out.append({"metric": "-", "phase": "-", "status": "not measured",
                    "text": "No read phase in this run: the goals are "
                            "about fragmented reads."})
    for phase in read_phases:
        c = main[phase]
        for metric, key, goal, better in (
                ("throughput", None, GOAL_BW_RATIO, "higher"),
                ("p99 latency", "p99", GOAL_P99_RATIO, "lower")):
            what = (f"{phase} {metric}, per-extent ÷ per-inode "
                    f"({MAIN_A}/{MAIN_B})")
            sign = "≥" if better == "higher" else "≤"
            v = {"metric": metric, "phase": phase, "goal": goal,
                 "goal_text": f"{sign} {goal}"}
            if c["status"] != "measured":
                v.update(status="not measured",
                         text=f"{what}: not measured ({c['reason']}).")
                out.append(v)
                continue
            r = c["bw"] if key is None else c["latency"][key]
            ratio, lo, hi = r["ratio"], r["ci_lo"], r["ci_hi"]
            if ratio is None or math.isnan(ratio):
                v.update(status="not measured",
                         text=f"{what}: not measured (no latency bins).")
                out.append(v)
                continue
            if r["not_conclusive"]:
                # too few reps for a CI or a test: no verdict, no CI
                v.update(status="not conclusive", value=ratio,
                         conclusive=False,
                         text=f"{what}: point estimate {ratio:.3f}, goal "
                              f"{sign} {goal}: **{r['not_conclusive']}**: "
                              f"{L.reps_needed_text()}.")
                out.append(v)
                continue
            met = ratio >= goal if better == "higher" else ratio <= goal
            inside = (not math.isnan(lo) and lo <= goal <= hi)
            status = "met" if met else "not met"
            text = (f"{what}: {ratio:.3f} (95% CI {fmt_ci(lo, hi)}), "
                    f"goal {sign} {goal}: **{status}**")
            if inside:
                text += (" (not conclusive: the CI contains the goal; "
                         "more reps would narrow it)")
            v.update(status=status, value=ratio, ci_lo=lo, ci_hi=hi,
                     conclusive=not inside, text=text + ".")
            out.append(v)
    return out


def extent_check(run):
    """Per-rep extent counts of the test file vs min_extents, if recorded."""
    counts = run["meta"].get("extent_counts")
    if not isinstance(counts, dict) or not counts:
        return None
    want = run["meta"].get("min_extents")
    out = {}
    for arm in arm_order(counts):
        v = [x for x in counts[arm] if isinstance(x, (int, float))]
        low = [x for x in v if isinstance(want, (int, float)) and x < want]
        out[arm] = {"counts": v, "median": L.summary(v)["median"],
                    "below_min": low}
        if low:
            run["warnings"].append(
                f"{arm}: extent count {low} below min_extents={want}: the "
                "file was less fragmented than the workload asks")
    return {"min_extents": want, "arms": out}


# ------------------------------------------------------------ profiles

def parse_bpftrace(path):
    """bpftrace -f json lines -> {"maps": {...}, "hists": {name: buckets}}.

    Keyed histograms become "name[key]". Non-JSON lines and other record
    types are skipped. Later records of one name replace earlier ones.
    """
    maps, hists = {}, {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            data = rec.get("data") if isinstance(rec, dict) else None
            if not isinstance(data, dict):
                continue
            for name, val in data.items():
                if rec.get("type") == "map":
                    maps[name] = val
                elif rec.get("type") == "hist":
                    if isinstance(val, list):
                        hists[name] = val
                    elif isinstance(val, dict):
                        for k, b in val.items():
                            if isinstance(b, list):
                                hists[f"{name}[{k}]"] = b
    return {"maps": maps, "hists": hists}


def hist_total(buckets):
    """Total count of a bpftrace histogram."""
    return sum(int(b.get("count", 0)) for b in buckets)


def derivation_count(bt):
    """Key derivations seen by bpftrace: a 'derive' count map, else hist."""
    for name, val in bt["maps"].items():
        if "derive" in name:
            if isinstance(val, dict):
                return sum(v for v in val.values()
                           if isinstance(v, (int, float)))
            if isinstance(val, (int, float)):
                return val
    for name, b in bt["hists"].items():
        if "derive" in name:
            return hist_total(b)
    return None


def parse_slabinfo(path):
    """/proc/slabinfo -> {cache: {active_objs, num_objs, objsize, bytes}}."""
    out = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith(("#", "slabinfo")):
                continue
            parts = line.split()
            if len(parts) < 4:
                continue
            try:
                active, num, size = (int(x) for x in parts[1:4])
            except ValueError:
                continue
            out[parts[0]] = {"active_objs": active, "num_objs": num,
                             "objsize": size, "bytes": num * size}
    return out


PROFILE_KINDS = (("bpftrace.json", "bpftrace"), ("slab.txt", "slab"),
                 ("perf-stat.txt", "perf stat"),
                 ("perf-script.txt.gz", "perf script -g"))


def load_folded(d):
    """Folded stacks of a profile directory: perf.folded if the run has
    one, else folded here from perf-script.txt.gz (or .txt); None if
    neither exists."""
    import gzip
    path = os.path.join(d, "perf.folded")
    if os.path.exists(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            return F.read_folded(f)
    for name, opener in (("perf-script.txt.gz", gzip.open),
                         ("perf-script.txt", open)):
        path = os.path.join(d, name)
        if os.path.exists(path):
            with opener(path, "rt", encoding="utf-8", errors="replace") as f:
                return F.fold_perf_script(f)
    return None


def load_profiles(run):
    """What profiles/ holds, per arm, parsed where we can."""
    pdir = os.path.join(run["dir"], "profiles")
    if not os.path.isdir(pdir):
        return None
    out = {}
    for arm in arm_order(n for n in os.listdir(pdir)
                         if os.path.isdir(os.path.join(pdir, n))):
        d = os.path.join(pdir, arm)
        entry = {"files": sorted(os.listdir(d))}
        try:
            if os.path.exists(os.path.join(d, "bpftrace.json")):
                entry["bpftrace"] = parse_bpftrace(
                    os.path.join(d, "bpftrace.json"))
            if os.path.exists(os.path.join(d, "slab.txt")):
                entry["slab"] = parse_slabinfo(os.path.join(d, "slab.txt"))
            if os.path.exists(os.path.join(d, "slab-before.txt")):
                entry["slab_before"] = parse_slabinfo(
                    os.path.join(d, "slab-before.txt"))
            folded = load_folded(d)
            if folded is not None:
                entry["folded"] = folded
            if os.path.exists(os.path.join(d, "perf-stat.txt")):
                with open(os.path.join(d, "perf-stat.txt"),
                          encoding="utf-8", errors="replace") as f:
                    entry["perf_stat"] = f.read()
        except OSError as e:
            run["warnings"].append(f"profiles/{arm}: {e}")
        out[arm] = entry
    return out


SCALING_PHASE = re.compile(r"(?P<kind>[A-Za-z]+)-e(?P<n>\d+)")


def _scaling_point(extents, bw, **extra):
    bw = [float(x) for x in (bw if isinstance(bw, list) else [bw])]
    cost = [4096.0 / x * 1e6 for x in bw if x > 0]
    return {"extents": extents, "bw_bytes": bw, "summary": L.summary(bw),
            "cost_us_per_4k": L.summary(cost), **extra}


def load_scaling(run):
    """Throughput against extent count, per read kind and arm.

    From the run's own phases named KIND-eN (the scaling workload: N is the
    promised extent count; the x value is the median FIEMAP count of that
    file over the timed reps), else from RUN_DIR/scaling.json
    ({arm: [{"extents", "bw_bytes": [...]}]}, one read kind "read").
    Returns {"source", "reads": {kind: {arm: [point, ...]}}} or None; a
    point has extents, nominal, phase, bw_bytes (per rep), summary and
    cost_us_per_4k (4096 / bw_bytes in microseconds, the time one 4 KiB
    block of the read costs).
    """
    phases = [(p, SCALING_PHASE.fullmatch(p)) for p in run["phases"]]
    phases = [(p, m.group("kind"), int(m.group("n"))) for p, m in phases
              if m]
    if phases:
        counts = {}
        for c in run["meta"].get("extent_checks") or []:
            if isinstance(c, dict) and c.get("rep") != "profiled":
                counts.setdefault((c.get("arm"), c.get("label")),
                                  []).append(c.get("extents"))
        reads = {}
        for phase, kind, n in phases:
            for arm in run["measured"]:
                reps = run["data"][arm][phase]
                if not reps:
                    continue
                got = [x for x in counts.get((arm, f"e{n}"), [])
                       if isnum(x)]
                x = L.summary(got)["median"] if got else n
                reads.setdefault(kind, {}).setdefault(arm, []).append(
                    _scaling_point(x, [d["bw_bytes"] for _, d in
                                       sorted(reps.items())],
                                   nominal=n, phase=phase,
                                   files=[d["file"] for _, d in
                                          sorted(reps.items())]))
        for kind in reads:
            for arm in reads[kind]:
                reads[kind][arm].sort(key=lambda p: p["nominal"])
        return {"source": "phases", "reads": reads} if reads else None
    path = os.path.join(run["dir"], "scaling.json")
    if not os.path.exists(path):
        return None
    try:
        raw = read_json_file(path)
    except RunError as e:
        run["warnings"].append(str(e))
        return None
    out = {}
    for arm in arm_order(raw if isinstance(raw, dict) else {}):
        pts = raw[arm]
        if not isinstance(pts, list):
            continue
        clean = [_scaling_point(p["extents"], p["bw_bytes"],
                                nominal=p["extents"])
                 for p in pts if isinstance(p, dict) and "extents" in p
                 and p.get("bw_bytes")]
        if clean:
            out[arm] = sorted(clean, key=lambda p: p["extents"])
    return {"source": "scaling.json", "reads": {"read": out}} if out else None


# -------------------------------------------------------------- plots

def arm_colors(arms):
    """A fixed color per arm (tab10 in KNOWN_ARMS order)."""
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
    names = arm_order(set(KNOWN_ARMS) | set(arms))
    return {a: palette[i % len(palette)] for i, a in enumerate(names)}


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, out_dir, name):
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    _plt().close(fig)
    return name


def _phase_grid(plt, n, height):
    """One panel per phase, at most 4 per row; returns (fig, [axes])."""
    cols = max(1, min(4, n))
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, height * rows),
                             squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def skipped_note(run, arms=None):
    """"skipped: a, b" for the figure text, or "" (arms: the candidates)."""
    names = [a for a in run["not_measured"] if arms is None or a in arms]
    return ("not measured (skipped): " + ", ".join(names)) if names else ""


def add_skipped_legend(ax, run, arms=None, **kw):
    """The legend, with a gray entry per skipped arm."""
    from matplotlib.patches import Patch
    handles, labels = ax.get_legend_handles_labels()
    for a in run["not_measured"]:
        if arms is None or a in arms:
            handles.append(Patch(facecolor="white", edgecolor="gray",
                                 hatch="//"))
            labels.append(f"{a}: skipped")
    if handles:
        ax.legend(handles, labels, fontsize=kw.get("fontsize", 7))


def plot_throughput(run, res, out_dir, colors):
    """Median bars, min-max whiskers, one dot per rep; per phase panel."""
    plt = _plt()
    arms = list(run["arms"])
    phases = run["phases"]
    fig, axlist = _phase_grid(plt, len(phases), 4)
    for ax, phase in zip(axlist, phases):
        for i, arm in enumerate(arms):
            if arm not in run["measured"] or \
                    not res["arms"][arm]["phases"][phase]["reps"]:
                ax.text(i, 0.05, "skipped" if arm in run["not_measured"]
                        else "no data", rotation=90, ha="center",
                        va="bottom", fontsize=9, color="gray",
                        transform=ax.get_xaxis_transform())
                continue
            s = res["arms"][arm]["phases"][phase]["bw_bytes"]
            med = s["median"] / MIB
            ax.bar(i, med, color=colors[arm], alpha=0.75)
            ax.errorbar(i, med, yerr=[[med - s["min"] / MIB],
                                      [s["max"] / MIB - med]],
                        color="black", capsize=4, lw=1)
            vals = [d["bw_bytes"] / MIB for d in
                    res["arms"][arm]["phases"][phase]["reps"].values()]
            ax.plot([i] * len(vals), vals, "o", ms=3, color="black",
                    alpha=0.6)
        ax.set_xticks(range(len(arms)))
        ax.set_xticklabels(arms, rotation=30, ha="right", fontsize=8)
        ax.set_xlim(-0.6, len(arms) - 0.4)
        ax.set_title(f"{phase} ({phase_direction(run, phase)})")
        ax.set_ylabel("throughput, MiB/s")
        ax.set_ylim(bottom=0)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Throughput: bar = median, whiskers = min-max, "
                 "dots = reps", fontsize=10)
    return _save(fig, out_dir, "throughput.png")


def plot_latency(run, res, out_dir, colors):
    """p50/p99/p99.9 of merged bins per arm, log scale, per phase."""
    plt = _plt()
    arms = [a for a in run["measured"]]
    if not arms:
        return None
    phases = run["phases"]
    fig, axlist = _phase_grid(plt, len(phases), 4)
    width = 0.8 / len(arms)
    any_data = False
    for ax, phase in zip(axlist, phases):
        for j, arm in enumerate(arms):
            lat = res["arms"][arm]["phases"][phase]["latency_ns"]
            ys = [lat[pct_name(q)] / 1000.0 for q in PERCENTILES]
            xs = [i + (j - (len(arms) - 1) / 2) * width
                  for i in range(len(PERCENTILES))]
            ok = [(x, y) for x, y in zip(xs, ys) if not math.isnan(y)]
            if ok:
                any_data = True
                ax.bar([x for x, _ in ok], [y for _, y in ok], width,
                       color=colors[arm], label=arm)
        ax.set_xticks(range(len(PERCENTILES)))
        ax.set_xticklabels([pct_name(q) for q in PERCENTILES])
        ax.set_yscale("log")
        ax.set_ylabel("completion latency, µs (log)")
        ax.set_title(phase)
        ax.grid(axis="y", alpha=0.3, which="both")
    if not any_data:
        plt.close(fig)
        return None
    add_skipped_legend(axlist[0], run)
    fig.suptitle("Completion latency percentiles from fio bins merged "
                 "over all reps", fontsize=10)
    return _save(fig, out_dir, "latency.png")


def plot_main_ratio(run, res, out_dir):
    """btrfs-extent/btrfs-inode throughput and p99 ratios with 95% CIs."""
    comps = [c for c in res["comparisons"]
             if (c["a"], c["b"]) == (MAIN_A, MAIN_B)
             and c["status"] == "measured"]
    plt = _plt()
    if not comps:
        # the plot still exists, and says why it has no points
        reason = next((c["reason"] for c in res["comparisons"]
                       if (c["a"], c["b"]) == (MAIN_A, MAIN_B)), "no data")
        return _text_figure(out_dir, "ratio_extent_inode.png",
                            f"{MAIN_A} / {MAIN_B} ratio with 95% bootstrap "
                            "CI: not measured", reason.replace("; ", "\n"))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, goal, title in (
            (axes[0], None, GOAL_BW_RATIO, "throughput ratio (median)"),
            (axes[1], "p99", GOAL_P99_RATIO, "p99 latency ratio (merged)")):
        for i, c in enumerate(comps):
            r = c["bw"] if key is None else c["latency"][key]
            if math.isnan(r["ratio"]):
                continue
            lo, hi = r["ci_lo"], r["ci_hi"]
            yerr = ([[r["ratio"] - lo], [hi - r["ratio"]]]
                    if not math.isnan(lo) else None)
            ax.errorbar(i, r["ratio"], yerr=yerr, fmt="o" if yerr else "x",
                        capsize=6, color="#1f77b4")
            note = "" if yerr else f" {r['not_conclusive'] or 'no CI'}"
            ax.annotate(f"{r['ratio']:.3f}{note}", (i, r["ratio"]),
                        textcoords="offset points", xytext=(8, 0),
                        fontsize=8)
        ax.axhline(1.0, color="gray", lw=1)
        ax.axhline(goal, color="#d62728", ls="--", lw=1,
                   label=f"goal {'≥' if key is None else '≤'} {goal} "
                         "(read phases)")
        ax.set_xticks(range(len(comps)))
        ax.set_xticklabels([c["phase"] for c in comps])
        ax.set_xlim(-0.5, len(comps) - 0.5)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"{MAIN_A} / {MAIN_B} with 95% bootstrap CI", fontsize=10)
    return _save(fig, out_dir, "ratio_extent_inode.png")


def plot_comparisons(res, out_dir):
    """Every measured comparison's throughput ratio and CI, per phase."""
    comps = [c for c in res["comparisons"] if c["status"] == "measured"]
    if not comps:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(comps) + 1.2))
    for i, c in enumerate(comps):
        r = c["bw"]
        color = "#d62728" if r["significant"] else "#1f77b4"
        xerr = ([[r["ratio"] - r["ci_lo"]], [r["ci_hi"] - r["ratio"]]]
                if r["ci_supported"] else None)
        ax.errorbar(r["ratio"], i, xerr=xerr, fmt="o" if xerr else "x",
                    color=color, capsize=3)
    ax.axvline(1.0, color="gray", lw=1)
    ax.set_yticks(range(len(comps)))
    ax.set_yticklabels([f"{c['a']}/{c['b']} {c['phase']}" for c in comps],
                       fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("throughput ratio of medians, 95% bootstrap CI "
                  "(red: significant change; x: no CI, too few reps)")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, out_dir, "comparisons.png")


def _bucket_label(b, unit_ns):
    lo = b.get("min")
    if lo is None:
        return f"<{fmt_count(b.get('max'))}"
    if unit_ns:
        return fmt_ns(lo)
    return fmt_count(lo)


# Histograms the report always shows (the issue's "lookup and derivation
# histograms"), with a placeholder that says why when no arm has events.
REQUIRED_HISTS = (("@lookup_ns", "extent-info lookup latency"),
                  ("@derive_ns", "key derivation latency"))


def _text_figure(out_dir, fname, title, text):
    """A figure that only says why it has no data (wrapped, centered)."""
    import textwrap
    plt = _plt()
    lines = [title, ""] + [w for para in text.split("\n")
                           for w in textwrap.wrap(para, 100) or [""]]
    fig = plt.figure(figsize=(9, 0.25 * len(lines) + 0.8))
    fig.text(0.5, 0.5, "\n".join(lines), ha="center", va="center",
             fontsize=9)
    fig.savefig(os.path.join(out_dir, fname), dpi=110)
    plt.close(fig)
    return fname


def _hist_placeholder(plt, out_dir, fname, name, what, text):
    return _text_figure(out_dir, fname,
                        f"bpftrace {name} ({what}): no events", text)


def plot_bpftrace_hists(run, profiles, out_dir, colors):
    """One PNG per bpftrace histogram name, arms side by side; the lookup
    and derivation histograms always, with skipped arms named."""
    found = {n for e in profiles.values()
             for n in e.get("bpftrace", {}).get("hists", {})}
    required = dict(REQUIRED_HISTS)
    names = [n for n, _ in REQUIRED_HISTS] + sorted(found - set(required))
    out = []
    plt = _plt()
    for name in names[:14]:
        fname = "bpftrace_" + re.sub(r"[^A-Za-z0-9_.-]+", "_",
                                     name.lstrip("@")).strip("_") + ".png"
        per_arm = {a: e["bpftrace"]["hists"][name]
                   for a, e in profiles.items()
                   if name in e.get("bpftrace", {}).get("hists", {})
                   and hist_total(e["bpftrace"]["hists"][name]) > 0}
        keys = sorted({(b.get("min") if b.get("min") is not None else -1)
                       for bs in per_arm.values() for b in bs})
        if not keys:
            if name not in required:
                continue
            quiet = [a for a in run["measured"] if a not in per_arm]
            lines = []
            if quiet:
                lines.append("profiled, no such event: " + ", ".join(quiet))
            note = skipped_note(run)
            if note:
                lines.append(note)
            if not profiles:
                lines.append("no profiled repetition in this run")
            out.append({"name": name, "file": _hist_placeholder(
                plt, out_dir, fname, name, required[name],
                "\n".join(lines))})
            continue
        label_of = {}
        for bs in per_arm.values():
            for b in bs:
                k = b.get("min") if b.get("min") is not None else -1
                label_of[k] = _bucket_label(b, name.endswith("_ns")
                                            or "_ns[" in name)
        fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(keys) + 2), 3.8))
        width = 0.8 / len(per_arm)
        for j, (arm, bs) in enumerate(per_arm.items()):
            counts = {(b.get("min") if b.get("min") is not None else -1):
                      int(b.get("count", 0)) for b in bs}
            xs = [i + (j - (len(per_arm) - 1) / 2) * width
                  for i in range(len(keys))]
            ax.bar(xs, [counts.get(k, 0) for k in keys], width,
                   color=colors.get(arm), label=f"{arm} (n={hist_total(bs)})")
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels([label_of[k] for k in keys], rotation=45,
                           ha="right", fontsize=7)
        ax.set_ylabel("count")
        what = f", {required[name]}" if name in required else ""
        ax.set_title(f"bpftrace {name}{what} (bucket lower bound)",
                     fontsize=10)
        add_skipped_legend(ax, run)
        ax.grid(axis="y", alpha=0.3)
        out.append({"name": name, "file": _save(fig, out_dir, fname)})
    return out


def plot_derivations_vs_extents(run, points, out_dir, colors):
    """Key derivations (bpftrace) against extent count, one dot per arm;
    skipped arms in the legend."""
    if not points:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    markers = "osD^v<>p"
    for i, (arm, (ext, der)) in enumerate(points.items()):
        # hollow markers of different shapes: arms on one point stay visible
        ax.plot(ext, der, markers[i % len(markers)], ms=9 + 3 * (i % 3),
                mfc="none", mew=2, color=colors.get(arm),
                label=f"{arm}: {der:g} derivations, {ext:g} extents")
    xmax = max(x for x, _ in points.values())
    ymax = max(y for _, y in points.values())
    top_x, top_y = (xmax * 1.15 or 1), (ymax * 1.15 or 1)
    ax.set_xlim(-0.04 * top_x, top_x)  # room for markers at 0
    ax.set_ylim(-0.06 * top_y, top_y)
    add_skipped_legend(ax, run)
    ax.set_xlabel("extents in the file the profiled rep read")
    ax.set_ylabel("key derivations (bpftrace)")
    ax.grid(alpha=0.3)
    return _save(fig, out_dir, "derivations_vs_extents.png")


def slab_selection(slabs, limit=14):
    """Caches worth showing: fscrypt/crypto/key ones first, then fs ones."""
    names = {n for s in slabs.values() for n in s}
    top = max(1, max((v["bytes"] for s in slabs.values()
                      for v in s.values()), default=1))

    def rank(n):
        best = max(s.get(n, {}).get("bytes", 0) for s in slabs.values())
        pri = (0 if re.search(r"fscrypt", n) else
               1 if re.search(r"crypt|key", n) else
               2 if re.search(r"btrfs|ext4|extent|inode", n) else 3)
        return (pri, -best / top, n)

    return sorted(names, key=rank)[:limit]


def plot_slab(slabs, caches, out_dir, colors):
    """Memory (num_objs * objsize) of selected slab caches per arm."""
    if not slabs or not caches:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(caches) * len(slabs)
                                    / 2 + 1.5))
    height = 0.8 / len(slabs)
    for j, (arm, s) in enumerate(slabs.items()):
        ys = [i + (j - (len(slabs) - 1) / 2) * height
              for i in range(len(caches))]
        ax.barh(ys, [s.get(c, {}).get("bytes", 0) / 1024 for c in caches],
                height, color=colors.get(arm), label=arm)
    ax.set_yticks(range(len(caches)))
    ax.set_yticklabels(caches, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("slab memory, KiB (num_objs x objsize)")
    ax.legend(fontsize=7)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, out_dir, "slab.png")


def plot_scaling(run, scaling, out_dir, colors):
    """Cost against extent count: per read kind, the time per 4 KiB block
    (median over reps, whiskers min-max) and the same relative to each
    arm's fewest-extents point, log x; skipped arms in the legend."""
    if not scaling:
        return None
    plt = _plt()
    reads = scaling["reads"]
    fig, axes = plt.subplots(len(reads), 2, figsize=(11, 3.8 * len(reads)),
                             squeeze=False)
    for row, (kind, arms) in zip(axes, sorted(reads.items())):
        for arm, pts in arms.items():
            xs = [p["extents"] for p in pts]
            c = [p["cost_us_per_4k"] for p in pts]
            med = [x["median"] for x in c]
            row[0].errorbar(xs, med, yerr=[[m - x["min"] for m, x in
                                            zip(med, c)],
                                           [x["max"] - m for m, x in
                                            zip(med, c)]],
                            fmt="o-", capsize=3, color=colors.get(arm),
                            label=arm)
            row[1].plot(xs, [m / med[0] for m in med], "o-",
                        color=colors.get(arm), label=arm)
        row[0].set_ylabel("µs per 4 KiB block read\n(median, min-max)")
        row[1].set_ylabel("relative to the arm's\nfewest-extents point")
        row[1].axhline(1.0, color="gray", lw=1)
        ticks = sorted({p.get("nominal", p["extents"]) for pts in
                        arms.values() for p in pts})
        for ax in row:
            ax.set_xscale("log", base=2)
            ax.set_xticks(ticks)
            ax.set_xticklabels([f"{t:g}" for t in ticks], fontsize=8)
            ax.minorticks_off()
            ax.set_xlabel("extents in the file (FIEMAP; ticks: promised "
                          "counts; log)")
            ax.set_title(kind, fontsize=10)
            ax.grid(alpha=0.3, which="both")
        add_skipped_legend(row[0], run)
        row[1].legend(fontsize=7)
    fig.suptitle("Cost against extent count (lower is cheaper)",
                 fontsize=10)
    return _save(fig, out_dir, "scaling.png")


def plot_order(run, out_dir, colors):
    """Throughput against run order, to show drift over the run."""
    order = run["meta"].get("order")
    if not isinstance(order, list) or not order:
        return None
    plt = _plt()
    phases = run["phases"]
    fig, axlist = _phase_grid(plt, len(phases), 3.5)
    seen = False
    for ax, phase in zip(axlist, phases):
        labelled = set()
        for pos, item in enumerate(order):
            if not (isinstance(item, list) and len(item) == 2):
                continue
            arm, rep = item
            d = run["data"].get(arm, {}).get(phase, {}).get(rep)
            if d is None:
                continue
            seen = True
            ax.plot(pos + 1, d["bw_bytes"] / MIB, "o", color=colors.get(arm),
                    label=None if arm in labelled else arm)
            labelled.add(arm)
        ax.set_title(phase)
        ax.set_xlabel("position in run order")
        ax.set_ylabel("MiB/s")
        ax.grid(alpha=0.3)
    if not seen:
        plt.close(fig)
        return None
    add_skipped_legend(axlist[0], run)
    fig.suptitle("Throughput in run order (drift check)", fontsize=10)
    return _save(fig, out_dir, "run_order.png")


# ---------------------------------------------------------- formatting

def isnum(x):
    return isinstance(x, (int, float)) and not (isinstance(x, float)
                                                and math.isnan(x))


def _g3(v):
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def fmt_ns(ns):
    """Latency with a unit: 850 ns, 85.5 µs, 2.18 ms, 1.20 s."""
    if not isnum(ns):
        return "n/a"
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if ns >= scale:
            return f"{_g3(ns / scale)} {unit}"
    return f"{ns:.0f} ns"


def fmt_count(x):
    """1500 -> 1.5K, 2097152 -> 2.0M (bpftrace bucket labels)."""
    if not isnum(x):
        return "?"
    for scale, unit in ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if abs(x) >= scale:
            return f"{x / scale:.4g}{unit}"
    return f"{x:g}"


def fmt_mib(b):
    return "n/a" if not isnum(b) else f"{b / MIB:.2f}"


def fmt_pct(x, sign=True):
    return "n/a" if not isnum(x) else (f"{x:+.2f}%" if sign else f"{x:.2f}%")


def fmt_p(p):
    return "n/a" if not isnum(p) else f"{p:.4f}"


def fmt_ratio(r):
    return "n/a" if not isnum(r) else f"{r:.3f}"


def fmt_ci(lo, hi):
    return "n/a" if not (isnum(lo) and isnum(hi)) else f"{lo:.3f}-{hi:.3f}"


def fmt_ci_of(r):
    """The CI of a ratio dict, or why there is none (too few reps)."""
    if r.get("ci_supported") is False:
        return f"none: {r['not_conclusive']}"
    return fmt_ci(r["ci_lo"], r["ci_hi"])


def rep_span(reps):
    """[1,2,3,5] -> '1..3,5'."""
    reps = sorted(reps)
    out, i = [], 0
    while i < len(reps):
        j = i
        while j + 1 < len(reps) and reps[j + 1] == reps[j] + 1:
            j += 1
        out.append(str(reps[i]) if i == j else f"{reps[i]}..{reps[j]}")
        i = j + 1
    return ",".join(out)


# ------------------------------------------------------ document model

class Doc:
    """Blocks rendered both to Markdown and to HTML.

    Inline text may use **bold**, `code` and [label](href).
    """

    def __init__(self):
        self.blocks = []

    def h(self, level, text):
        self.blocks.append(("h", level, text))

    def p(self, text):
        self.blocks.append(("p", text))

    def note(self, text):
        self.blocks.append(("note", text))

    def ul(self, items):
        self.blocks.append(("ul", list(items)))

    def table(self, headers, rows, notes=()):
        self.blocks.append(("table", headers, rows, list(notes)))

    def code(self, title, text):
        self.blocks.append(("code", title, text))

    def img(self, src, alt):
        self.blocks.append(("img", src, alt))

    # -- markdown
    @staticmethod
    def _md_cell(s):
        s = str(s).replace("|", "\\|").replace("\n", " ")
        return "\\*" if s == "*" else s

    def to_md(self):
        out = []
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                out.append("#" * b[1] + " " + b[2])
            elif kind == "p":
                out.append(b[1])
            elif kind == "note":
                out.append("> " + b[1])
            elif kind == "ul":
                out.append("\n".join("- " + i for i in b[1]))
            elif kind == "table":
                _, headers, rows, notes = b
                lines = ["| " + " | ".join(self._md_cell(h) for h in headers)
                         + " |",
                         "|" + "|".join("---" for _ in headers) + "|"]
                lines += ["| " + " | ".join(self._md_cell(c) for c in r)
                          + " |" for r in rows]
                out.append("\n".join(lines))
                if notes:
                    out.append("\n".join(f"{n}  " for n in notes).rstrip())
            elif kind == "code":
                fence = "````" if "```" in b[2] else "```"
                out.append(f"{b[1]}:\n\n{fence}\n{b[2].rstrip()}\n{fence}")
            elif kind == "img":
                out.append(f"![{b[2]}]({b[1]})")
        return "\n\n".join(out) + "\n"

    # -- html
    @staticmethod
    def _inline(text):
        s = html.escape(str(text), quote=False)
        s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
        s = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", s)
        s = re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)",
                   lambda m: f'<a href="{html.escape(m.group(2))}">'
                             f'{m.group(1)}</a>', s)
        return s

    @staticmethod
    def _anchor(text):
        return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")

    def to_html(self, title):
        out = ["<!DOCTYPE html>",
               '<html lang="en"><head><meta charset="utf-8">',
               f"<title>{html.escape(title)}</title>", "<style>", CSS,
               "</style></head><body>"]
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                out.append(f'<h{b[1]} id="{self._anchor(b[2])}">'
                           f"{self._inline(b[2])}</h{b[1]}>")
            elif kind == "p":
                out.append(f"<p>{self._inline(b[1])}</p>")
            elif kind == "note":
                out.append(f'<div class="note">{self._inline(b[1])}</div>')
            elif kind == "ul":
                out.append("<ul>" + "".join(f"<li>{self._inline(i)}</li>"
                                            for i in b[1]) + "</ul>")
            elif kind == "table":
                _, headers, rows, notes = b
                t = ["<table><thead><tr>"]
                t += [f"<th>{self._inline(h)}</th>" for h in headers]
                t.append("</tr></thead><tbody>")
                for r in rows:
                    t.append("<tr>" + "".join(
                        f"<td{self._cls(c)}>{self._inline(c)}</td>"
                        for c in r) + "</tr>")
                t.append("</tbody></table>")
                out.append("".join(t))
                for n in notes:
                    out.append(f'<p class="fn">{self._inline(n)}</p>')
            elif kind == "code":
                out.append(f"<details><summary>{self._inline(b[1])}"
                           f"</summary><pre>{html.escape(b[2])}</pre>"
                           "</details>")
            elif kind == "img":
                out.append(f'<p><img src="{html.escape(b[1])}" '
                           f'alt="{html.escape(b[2])}"></p>')
        out.append("</body></html>")
        return "\n".join(out) + "\n"

    @staticmethod
    def _cls(cell):
        c = str(cell)
        if re.fullmatch(r"[-+]?[\d.]+(%| ?[µm]?s| ns)?|n/a|\*|[\d.]+-[\d.]+",
                        c):
            return ' class="num"'
        return ""


CSS = """
body { font-family: sans-serif; max-width: 1150px; margin: 1em auto;
       padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #bbb; padding: 3px 8px; text-align: left; }
th { background: #eee; }
td.num { text-align: right; font-family: monospace; }
.note { border: 2px solid #d9a400; background: #fff6d5; padding: 0.6em;
        margin: 1em 0; }
.fn { font-size: 0.85em; color: #444; margin: 0.2em 0; }
pre { background: #f5f5f5; padding: 0.5em; overflow-x: auto; }
img { max-width: 100%; }
code { background: #f0f0f0; padding: 0 2px; }
"""


# ------------------------------------------------------- report body

def section_header(doc, run, res):
    meta = run["meta"]
    info = meta.get("run_info") or {}
    doc.h(1, f"Benchmark report: workload {meta.get('workload', '?')}, "
             f"{meta.get('date', 'undated')}")
    accel = str(info.get("accel", "?"))
    note = TIMING_NOTE
    if accel in ("tcg", "icount"):
        note = f"This run used **{accel}**. " + note
    doc.note(note)
    delay = meta.get("injected_lookup_delay_us") or 0
    if delay:
        doc.note(f"**Injected slowdown:** every per-extent lookup of this "
                 f"run busy-waited {delay} µs "
                 f"(`fscrypto.extent_lookup_delay_us={delay}`). This run "
                 "tests the regression check; its numbers are not a "
                 "measurement of the kernel.")


def section_verdicts(doc, res):
    doc.h(2, "Verdicts")
    doc.p(f"Goals, {MAIN_A} (per-extent keys) against {MAIN_B} (per-inode "
          f"keys) on fragmented reads: throughput ratio ≥ {GOAL_BW_RATIO}, "
          f"p99 completion latency ratio ≤ {GOAL_P99_RATIO}. \"met\" "
          "compares the point estimate (ratio of medians; p99 from bins "
          "merged over reps) with the goal; the 95% CI is a percentile "
          "bootstrap over reps. Reps needed for any verdict: "
          f"{L.reps_needed_text()}. With fewer, the verdict says \"not "
          "conclusive (n = N)\" and no CI is shown: with n reps, a "
          "resampled median is the smallest rep with probability 1 (n = 1), "
          "0.25 (2), 0.26 (3), 0.05 (4), so below 4 reps the bootstrap's "
          "2.5% bound is just the most extreme rep pair, not an estimate.")
    doc.ul(v["text"] for v in res["verdicts"])


def section_run(doc, run):
    meta = run["meta"]
    info = meta.get("run_info") or {}
    doc.h(2, "Run")
    rows = [
        ("workload", meta.get("workload")),
        ("what it does", meta.get("description")),
        ("date", meta.get("date")),
        ("reps per arm", meta.get("reps")),
        ("phases", ", ".join(run["phases"])),
        ("kernel release", info.get("kernel_release")),
        ("kernel series hash", info.get("kernel_series_hash")),
        ("kernel config sha256", info.get("kernel_config_sha256")),
        ("accel", info.get("accel")),
        ("vCPUs", info.get("cpus")),
        ("guest memory, MB", info.get("mem_mb")),
        ("fio", meta.get("fio_version")),
        ("elapsed, s", info.get("elapsed_s")),
        ("injected lookup delay, µs", meta.get("injected_lookup_delay_us",
                                               0)),
    ]
    doc.table(["item", "value"],
              [(k, f"`{v}`" if v not in (None, "") else "not recorded")
               for k, v in rows])
    for k in sorted(set(info) - {"accel", "cpus", "mem_mb", "qemu_cmdline",
                                 "kernel_release", "kernel_series_hash",
                                 "kernel_config_sha256", "elapsed_s"}):
        doc.p(f"{k}: `{info[k]}`")
    doc.code("QEMU command line", str(info.get("qemu_cmdline",
                                               "not recorded")))
    order = meta.get("order")
    if isinstance(order, list) and order:
        text = " ".join(f"{a}#{r}" for a, r in
                        (o for o in order if isinstance(o, list)
                         and len(o) == 2))
        doc.code(f"Run order ({len(order)} arm runs)", text)
    jobs = meta.get("jobfiles") or {}
    if jobs:
        for name in sorted(jobs):
            kind = "fio job file" if name.endswith(".fio") else \
                "workload file"
            doc.code(f"{kind} {name}", str(jobs[name]))
    else:
        doc.p("fio job files: not recorded in meta.json.")


def section_arms(doc, run):
    doc.h(2, "Arms")
    rows = []
    for arm, spec in run["arms"].items():
        if arm in run["measured"]:
            enc = spec.get("encrypted")
            rows.append((arm, "measured", spec.get("fs", "?"),
                         f"`{spec.get('mkfs', '?')}`",
                         f"`{spec['mount']}`" if spec.get("mount")
                         else "(defaults)",
                         f"`{spec['tuning']}`" if spec.get("tuning")
                         else "-",
                         "yes" if enc else "no" if enc is False else "?",
                         f"`{REFERENCE[arm]}`" if arm in REFERENCE else "-"))
        else:
            rows.append((arm, "**not measured**", spec.get("fs", "-"),
                         "-", "-", "-", "-", "-"))
    doc.table(["arm", "status", "fs", "mkfs", "mount options",
               "tuning after mount", "encrypted", "reference arm"], rows)
    doc.h(2, "Skipped arms")
    if run["not_measured"]:
        doc.ul(f"**{a}**: {r}" for a, r in run["not_measured"].items())
    else:
        doc.p("None: every arm of meta.json was measured.")


def mw_footnote(na, nb):
    """Footnote text when n is too small for MW to reach p < 0.05."""
    return (f"n={na} vs {nb}: the smallest two-sided Mann-Whitney p "
            f"attainable is {L.min_mw_p(na, nb):.3f}, not below "
            f"{L.ALPHA}, so no change can be marked significant with this "
            "many reps (5 vs 5 can reach 0.0079).")


def section_phases(doc, run, res, threshold, plots):
    doc.h(2, "Throughput")
    doc.p("Throughput is fio `bw_bytes` in MiB/s (2^20 bytes/s), one value "
          "per rep. Change % is median-based against the reference arm "
          "named in the row; p is the two-sided Mann-Whitney U p of the "
          "per-rep values; * = significant: p < 0.05 AND the ranges of the "
          f"two samples do not overlap AND |change| ≥ {threshold:g}%.")
    if plots.get("throughput"):
        doc.img(plots["throughput"], "throughput per arm and phase")
    comps = {(c["a"], c["phase"]): c for c in res["comparisons"]}
    for phase in run["phases"]:
        direction = phase_direction(run, phase)
        doc.h(3, f"{phase} ({direction})")
        rows, notes, small = [], [], set()
        for arm in run["arms"]:
            ref = REFERENCE.get(arm)
            if arm not in run["measured"]:
                rows.append((arm, ref or "-", 0, "skipped", "", "", "", "",
                             "", ""))
                continue
            a = res["arms"][arm]["phases"][phase]
            s = a["bw_bytes"]
            c = comps.get((arm, phase))
            if ref is None:
                ch, p, mark = "reference", "", ""
            elif c is None or c["status"] != "measured":
                ch, p, mark = f"n/a ({c['reason'] if c else 'no ref'})", \
                    "", ""
            else:
                ch, p = fmt_pct(c["bw"]["change_pct"]), fmt_p(c["bw"]["p"])
                mark = "*" if c["bw"]["significant"] else ""
                if not c["bw"]["can_reach"]:
                    small.add((c["n_a"], c["n_b"]))
            rows.append((arm, ref or "-", s["n"], fmt_mib(s["median"]),
                         fmt_mib(s["mean"]), fmt_mib(s["stddev"]),
                         fmt_pct(100 * s["cov"], sign=False), ch, p, mark))
        reps = sorted({r for arm in run["measured"]
                       for r in run["data"][arm][phase]})
        notes.append(f"raw data: `raw/<arm>/rep<N>/{phase}.json`, "
                     f"N = {rep_span(reps) or 'none'}")
        notes += [mw_footnote(na, nb) for na, nb in sorted(small)]
        doc.table(["arm", "vs", "n", "median MiB/s", "mean", "stddev",
                   "CoV", "change % vs ref", "p (MW)", "sig"], rows, notes)


def section_latency(doc, run, res, plots):
    doc.h(2, "Completion latency")
    doc.p("Percentiles are nearest-rank on the fio json+ `clat_ns` "
          "histograms of all reps merged (not averages of per-rep "
          "percentiles). The ratio column is this arm over its reference "
          "arm, with a 95% bootstrap CI that resamples whole reps.")
    if plots.get("latency"):
        doc.img(plots["latency"], "latency percentiles")
    comps = {(c["a"], c["phase"]): c for c in res["comparisons"]}
    for phase in run["phases"]:
        doc.h(3, f"{phase} latency")
        rows = []
        for arm in run["arms"]:
            if arm not in run["measured"]:
                rows.append((arm, "skipped", "", "", "", "", ""))
                continue
            a = res["arms"][arm]["phases"][phase]
            lat = a["latency_ns"]
            c = comps.get((arm, phase))
            if c and c["status"] == "measured":
                r = c["latency"]["p99"]
                rr = (f"{fmt_ratio(r['ratio'])} "
                      f"[{fmt_ci_of(r)}] vs {c['b']}")
            else:
                rr = "reference" if arm not in REFERENCE else "n/a"
            rows.append((arm, a["latency_reps"], a["latency_ios"],
                         fmt_ns(lat["p50"]), fmt_ns(lat["p99"]),
                         fmt_ns(lat["p99.9"]), rr))
        doc.table(["arm", "reps", "I/Os", "p50", "p99", "p99.9",
                   "p99 ratio [95% CI]"], rows,
                  [f"raw data: `raw/<arm>/rep<N>/{phase}.json` "
                   "(jobs[0] clat_ns.bins)"])


def section_comparisons(doc, run, res, plots):
    doc.h(2, "Comparisons")
    doc.p("Ratio = median throughput of the first arm / median of the "
          "second, with a 95% percentile-bootstrap CI (each arm's reps "
          "resampled independently, 10000 draws, fixed seed). Per-rep "
          "ratios pair rep N of one arm with rep N of the other.")
    rows, small = [], set()
    for c in res["comparisons"]:
        name = f"{c['a']} / {c['b']}"
        if c["status"] != "measured":
            rows.append((name, c["phase"], f"not measured: {c['reason']}",
                         "", "", "", "", "", ""))
            continue
        b = c["bw"]
        if not b["can_reach"]:
            small.add((c["n_a"], c["n_b"]))
        rows.append((name, c["phase"], fmt_ratio(b["ratio"]),
                     fmt_ci_of(b),
                     fmt_pct(b["change_pct"]), fmt_p(b["p"]),
                     "yes" if b["separated"] else "no",
                     "*" if b["significant"] else "",
                     " ".join(f"{r:.3f}" for r in
                              c["per_rep_ratio"].values())))
    doc.table(["comparison", "phase", "throughput ratio", "95% CI",
               "change %", "p (MW)", "ranges separate", "sig",
               "per-rep ratios (in rep order)"], rows,
              [mw_footnote(na, nb) for na, nb in sorted(small)])
    doc.ul(f"`{a}/{b}`: {label}" for a, b, label in COMPARISONS)
    doc.h(3, f"{MAIN_A} / {MAIN_B}")
    main = [c for c in res["comparisons"]
            if (c["a"], c["b"]) == (MAIN_A, MAIN_B)]
    if any(c["status"] == "measured" for c in main):
        doc.img(plots["ratio"], "per-extent / per-inode ratios")
        rows = []
        for c in main:
            if c["status"] != "measured":
                rows.append((c["phase"], "not measured", "", "", ""))
                continue
            lat = c["latency"]
            rows.append((c["phase"], fmt_ratio(c["bw"]["ratio"]),
                         fmt_ci_of(c["bw"]),
                         fmt_ratio(lat["p99"]["ratio"]),
                         fmt_ci_of(lat["p99"])))
        doc.table(["phase", "throughput ratio", "95% CI", "p99 ratio",
                   "95% CI"], rows)
    else:
        reason = next((c["reason"] for c in res["comparisons"]
                       if (c["a"], c["b"]) == (MAIN_A, MAIN_B)
                       and c["status"] != "measured"), "no data")
        doc.p(f"**Not measured: {reason}.**")
        if plots.get("ratio"):
            doc.img(plots["ratio"], "per-extent / per-inode ratio: not "
                    "measured")
    if plots.get("comparisons"):
        doc.img(plots["comparisons"], "all comparisons")


def section_fragmentation(doc, res):
    doc.h(2, "Fragmentation of the test files")
    checks = [c for c in res["meta"].get("extent_checks") or []
              if isinstance(c, dict)]
    if checks:
        doc.p("FIEMAP counts, checked in the guest before any measurement "
              "of every file the workload promises something about (a "
              "broken promise fails the run). Shared = extents flagged "
              "FIEMAP_EXTENT_SHARED.")
        rows = {}
        for c in checks:
            key = (c.get("arm"), c.get("label"))
            promise = ", ".join(
                x for x in (f"≥ {c['min']}" if c.get("min") is not None
                            else "", f"≤ {c['max']}" if c.get("max")
                            is not None else "",
                            f"shared ≥ {c['min_shared']}"
                            if c.get("min_shared") else "") if x) or "-"
            r = rows.setdefault(key, {"extents": [], "shared": [],
                                      "promise": promise,
                                      "path": c.get("path", "")})
            r["extents"].append(f"{c.get('extents')}"
                                + (" (profiled)" if c.get("rep") ==
                                   "profiled" else ""))
            r["shared"].append(str(c.get("shared", 0)))
        doc.table(["arm", "file", "extents per rep", "shared extents",
                   "promise"],
                  [(a, f"`{lab}`", ", ".join(r["extents"]),
                    ", ".join(r["shared"]), r["promise"])
                   for (a, lab), r in rows.items()])
        return
    ec = res.get("extent_counts")
    if not ec:
        doc.p("Extent counts: not recorded in meta.json.")
        return
    want = ec["min_extents"]
    rows = [(arm, ", ".join(str(x) for x in v["counts"]),
             "yes" if not v["below_min"] else "**no**")
            for arm, v in ec["arms"].items()]
    doc.table(["arm", "extents per rep", f"all ≥ min_extents ({want})"],
              rows)


def section_profiles(doc, run, res, plots):
    doc.h(2, "Profiles")
    prof = res.get("profiles")
    if not prof:
        doc.p("Profiles: not collected (no profiles/ in the run directory).")
        return
    rows = []
    for arm in arm_order(set(run["arms"]) | set(prof)):
        e = prof.get(arm)
        cells = []
        for fname, _ in PROFILE_KINDS:
            if e and fname in e["files"]:
                cells.append(f"[{fname}](profiles/{arm}/{fname})")
            else:
                cells.append("not collected")
        other = [f for f in (e["files"] if e else [])
                 if f not in dict(PROFILE_KINDS)]
        rows.append([arm] + cells + [", ".join(other) or "-"])
    doc.table(["arm"] + [k for _, k in PROFILE_KINDS] + ["other files"],
              rows)
    doc.h(3, "bpftrace")
    if plots.get("bpftrace"):
        for p in plots["bpftrace"]:
            doc.img(p["file"], f"bpftrace {p['name']}")
    else:
        doc.p("bpftrace histograms: not collected.")
    maps = [(arm, n, v) for arm, e in prof.items()
            for n, v in e.get("bpftrace", {}).get("maps", {}).items()]
    if maps:
        doc.table(["arm", "map", "value"],
                  [(a, f"`{n}`", json.dumps(v, sort_keys=True))
                   for a, n, v in maps])
    doc.h(3, "Key derivations vs extents")
    if plots.get("derivations"):
        doc.img(plots["derivations"], "derivations vs extents")
        doc.table(["arm", "extents (median)", "derivations"],
                  [(a, f"{x:g}", f"{y:g}")
                   for a, (x, y) in res["derivations_vs_extents"].items()])
    else:
        doc.p("Not collected (needs bpftrace derivation counts and "
              "extent_counts in meta.json for the same arm).")
    doc.h(3, "Slab memory")
    if plots.get("slab"):
        doc.img(plots["slab"], "slab memory")
        slabs = {a: e["slab"] for a, e in prof.items() if "slab" in e}
        doc.table(["cache"] + [f"{a} KiB" for a in slabs],
                  [[f"`{c}`"] + [f"{s.get(c, {}).get('bytes', 0) / 1024:.0f}"
                                 for s in slabs.values()]
                   for c in res["slab_caches"]],
                  ["KiB = num_objs x objsize / 1024 from the slabinfo "
                   "snapshot `profiles/<arm>/slab.txt`"])
    else:
        doc.p("Slab snapshots: not collected.")
    doc.h(3, "perf stat")
    stats = [(a, e["perf_stat"]) for a, e in prof.items() if "perf_stat" in e]
    if stats:
        for a, text in stats:
            lines = text.splitlines()
            doc.code(f"perf stat, {a}", "\n".join(lines[:200]))
    else:
        doc.p("perf stat: not collected.")


def section_scaling(doc, run, res, plots):
    doc.h(2, "Scaling with extent count")
    sc = res.get("scaling")
    if not sc:
        doc.p("Scaling: not measured (this run has no KIND-eN phases of the "
              "scaling workload and no scaling.json).")
        return
    doc.p("The same read over files of growing extent counts. Cost = time "
          "per 4 KiB block read = 4096 / throughput; x = the file's extent "
          "count from FIEMAP (median over reps).")
    if plots.get("scaling"):
        doc.img(plots["scaling"], "cost against extent count")
    rows = []
    for kind, arms in sorted(sc["reads"].items()):
        for arm, pts in arms.items():
            base = pts[0]["cost_us_per_4k"]["median"]
            for p in pts:
                c = p["cost_us_per_4k"]
                rows.append((kind, arm, p.get("nominal", ""),
                             f"{p['extents']:g}", p["summary"]["n"],
                             fmt_mib(p["summary"]["median"]),
                             f"{c['median']:.1f}",
                             f"{c['min']:.1f}-{c['max']:.1f}",
                             f"{c['median'] / base:.3f}"))
    for arm, why in run["not_measured"].items():
        rows.append(("all", arm, "", "", 0, f"skipped: {why}", "", "", ""))
    src = ("`raw/<arm>/rep<N>/<kind>-e<N>.json`" if sc["source"] == "phases"
           else "`scaling.json`")
    doc.table(["read", "arm", "promised extents", "extents (FIEMAP)", "n",
               "median MiB/s", "µs per 4 KiB (median)", "min-max",
               "relative to fewest"], rows, [f"raw data: {src}"])


def section_tail(doc, run, res, threshold, plots):
    if plots.get("order"):
        doc.h(2, "Run order")
        doc.p("Each point is one arm run; a trend over positions would "
              "mean the host drifted during the run (the runner interleaves "
              "arms so that drift hits all of them).")
        doc.img(plots["order"], "throughput in run order")
    doc.h(2, "Data problems")
    if run["warnings"]:
        doc.ul(f"`{w}`" for w in run["warnings"])
    else:
        doc.p("None found.")
    doc.h(2, "How the numbers are made")
    doc.ul([
        "Each rep's number comes from one fio json+ file; the direction "
        "(read/write) is the side of jobs[0] that moved bytes.",
        "summary: median, mean, sample stddev (ddof=1), CoV = stddev/mean.",
        "Ratios: medians of A over medians of B; 95% CI by percentile "
        "bootstrap, 10000 draws, numpy default_rng with a fixed seed, so "
        "the report is reproducible.",
        "Significance (LKP style plus a test): Mann-Whitney U two-sided "
        f"p < 0.05 AND non-overlapping ranges AND |change| ≥ "
        f"{threshold:g}% (`--threshold`). With 5 vs 5 reps the smallest "
        "attainable p is 0.0079; with 3 vs 3 it is 0.1, so 3 reps can "
        "never be significant.",
        "Latency percentiles: nearest rank on clat_ns bins merged over "
        "reps; ratios' CIs resample reps.",
        f"Too few reps: {L.reps_needed_text()}; below that, CIs are not "
        "shown and verdicts say \"not conclusive (n = N)\".",
        "All numbers, per rep, are in `results.json`; raw fio output is in "
        "`raw/`, copied from the run directory.",
    ])


# ------------------------------------------- memory and flame graphs

# The slab caches of the key objects: per-extent infos (patch 0003's
# KMEM_CACHE(fscrypt_extent_info)) and per-inode fscrypt infos. The bench
# boots with slab_nomerge, so each has its own line in /proc/slabinfo.
MEMORY_CACHES = ("fscrypt_extent_info", "fscrypt_info")


def profiled_extents(run, arm):
    """Extents of the file the profiled rep read (largest count checked)."""
    pe = (run["meta"].get("profiled_extent_counts") or {}).get(arm) or {}
    vals = [v for v in pe.values() if isinstance(v, (int, float))]
    return max(vals) if vals else None


def memory_analysis(run, prof):
    """Per arm and cache: slab objects before and after the profiled read.

    bytes = active objects x object size; held = allocated objects x size
    (what the slab keeps); per_extent = (after - before) bytes / extents of
    the file read. Skipped arms and arms without a snapshot say so.
    """
    out = {}
    for arm in run["arms"]:
        if arm in run["not_measured"]:
            out[arm] = {"status": "skipped",
                        "reason": run["not_measured"][arm]}
            continue
        e = (prof or {}).get(arm) or {}
        if "slab" not in e:
            out[arm] = {"status": "not collected"}
            continue
        ext = profiled_extents(run, arm)
        caches = {}
        for c in MEMORY_CACHES:
            after = e["slab"].get(c)
            if after is None:
                caches[c] = {"status": "absent",
                             "reason": "no such slab cache in this kernel"}
                continue
            before = (e.get("slab_before") or {}).get(c)
            size = after["objsize"]
            d = {"status": "measured", "objsize": size,
                 "active_after": after["active_objs"],
                 "num_after": after["num_objs"],
                 "bytes_after": after["active_objs"] * size,
                 "held_after": after["num_objs"] * size,
                 "active_before": before["active_objs"] if before else None}
            if before:
                delta = after["active_objs"] - before["active_objs"]
                d["delta_objs"] = delta
                d["delta_bytes"] = delta * size
                d["bytes_per_extent"] = (delta * size / ext
                                         if ext else None)
            caches[c] = d
        out[arm] = {"status": "measured", "extents": ext, "caches": caches}
    return out


def plot_memory(run, mem, out_dir, colors):
    """KiB of each key-object cache per arm after the read (bar) and
    before it (black tick); skipped arms and absent caches labelled."""
    if not mem or not any(m["status"] == "measured" for m in mem.values()):
        return None
    plt = _plt()
    arms = list(mem)
    fig, axes = plt.subplots(1, len(MEMORY_CACHES),
                             figsize=(5 * len(MEMORY_CACHES), 4),
                             squeeze=False)
    for ax, cache in zip(axes[0], MEMORY_CACHES):
        for i, arm in enumerate(arms):
            m = mem[arm]
            c = (m.get("caches") or {}).get(cache)
            if m["status"] != "measured" or c["status"] != "measured":
                label = ("skipped" if m["status"] == "skipped" else
                         "not profiled" if m["status"] != "measured"
                         else "cache absent")
                ax.text(i, 0.03, label, rotation=90, ha="center",
                        va="bottom", fontsize=9, color="gray",
                        transform=ax.get_xaxis_transform())
                continue
            kib = c["bytes_after"] / 1024
            ax.bar(i, kib, color=colors.get(arm), alpha=0.8)
            ax.annotate(f"{c['active_after']} objs", (i, kib),
                        textcoords="offset points", xytext=(0, 3),
                        ha="center", fontsize=7)
            if c.get("active_before") is not None:
                ax.plot([i - 0.35, i + 0.35],
                        [c["active_before"] * c["objsize"] / 1024] * 2,
                        color="black", lw=2)
        ax.set_xticks(range(len(arms)))
        ax.set_xticklabels(arms, rotation=30, ha="right", fontsize=8)
        ax.set_xlim(-0.6, len(arms) - 0.4)
        ax.set_ylim(bottom=0)
        ax.set_title(f"slab cache {cache}", fontsize=10)
        ax.set_ylabel("KiB in use (active objects x size)")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Key-object memory after the profiled read (bar) and "
                 "before it, after dropping caches (black line)",
                 fontsize=10)
    return _save(fig, out_dir, "memory.png")


def flame_pair(flames):
    """(target, base, is_main) for the differential flame graph: the main
    comparison when both arms were profiled, else the first comparison of
    COMPARISONS whose arms both were, else the first two profiled arms in
    display order; None with fewer than two profiled arms."""
    for a, b, _ in COMPARISONS:
        if a in flames and b in flames and flames[a]["busy_samples"] and \
                flames[b]["busy_samples"]:
            return a, b, (a, b) == (MAIN_A, MAIN_B)
    # no comparison of the report has both arms: any two profiled arms
    names = [a for a in arm_order(flames) if flames[a]["busy_samples"]]
    if len(names) >= 2:
        return names[0], names[1], False
    return None


def make_flames(run, prof, out_dir):
    """Folded stacks and flame graph SVGs per arm, and the differential one.

    Writes flame/<arm>.folded (every sample, idle included), flame-<arm>.svg
    (idle excluded), and flame-diff-<A>-vs-<B>.svg with a table of the
    functions whose share changed most."""
    out = {"arms": {}, "diff": None}
    if not prof:
        return out
    phase = run["meta"].get("profile_phase") or "the profiled phase"
    for arm, e in prof.items():
        if "folded" not in e:
            continue
        os.makedirs(os.path.join(out_dir, "flame"), exist_ok=True)
        folded_rel = f"flame/{arm}.folded"
        with open(os.path.join(out_dir, folded_rel), "w",
                  encoding="utf-8") as f:
            f.write(F.format_folded(e["folded"]))
        busy, idle = F.split_idle(e["folded"])
        n = sum(busy.values())
        svg_rel = f"flame-{arm}.svg"
        with open(os.path.join(out_dir, svg_rel), "w", encoding="utf-8") as f:
            f.write(F.flame_svg(
                busy, f"{arm}: perf record -g, {phase}",
                f"{n} samples at 499 Hz on all CPUs; {idle} idle (swapper) "
                "samples left out"))
        out["arms"][arm] = {"svg": svg_rel, "folded": folded_rel,
                            "busy_samples": n, "idle_samples": idle,
                            "_busy": busy}
    pair = flame_pair(out["arms"])
    if pair:
        a, b, main = pair
        ta, tb = out["arms"][a]["_busy"], out["arms"][b]["_busy"]
        why = (f"{MAIN_A} and {MAIN_B} were not both profiled"
               + (f"; {skipped_note(run, (MAIN_A, MAIN_B))}"
                  if skipped_note(run, (MAIN_A, MAIN_B)) else ""))
        label = (f"{a} against {b}" if main else
                 f"{a} against {b} (NOT the main comparison: {why})")
        rel = f"flame-diff-{a}-vs-{b}.svg"
        with open(os.path.join(out_dir, rel), "w", encoding="utf-8") as f:
            f.write(F.diff_flame_svg(
                ta, tb, f"Differential flame graph: {a} against {b}"
                + ("" if main else " (NOT the main comparison)"),
                f"{phase}" + ("" if main else f"; {why}")))
        out["diff"] = {"target": a, "base": b, "main": main, "label": label,
                       "why_not_main": None if main else why,
                       "svg": rel, "top": F.frame_deltas(ta, tb)[:15]}
    for v in out["arms"].values():
        v.pop("_busy")
    return out


def section_memory(doc, run, res, plots):
    doc.h(2, "Memory of the key objects")
    mem = res.get("memory") or {}
    doc.p("Slab caches `fscrypt_extent_info` (per-extent key objects) and "
          "`fscrypt_info` (per-inode fscrypt infos), from `/proc/slabinfo` "
          "in the profiled repetition: before the read phase (after "
          "dropping caches) and right after it, while the file's inode is "
          "still cached. Objects are active objects; KiB = active objects x "
          "object size; per extent = the growth in bytes / extents of the "
          "file read. SLUB counts every object of the per-CPU slabs as "
          "active, so these counts move in whole slabs (32 objects of 128 "
          "bytes): a change smaller than a slab is noise; thousands of "
          "per-extent objects are not.")
    if plots.get("memory"):
        doc.img(plots["memory"], "key-object memory")
    rows = []
    for arm, m in mem.items():
        if m["status"] != "measured":
            why = m.get("reason", "")
            rows.append((arm, "-", f"{m['status']}" + (f": {why}" if why
                                                       else ""),
                         "", "", "", "", ""))
            continue
        for cache, c in m["caches"].items():
            if c["status"] != "measured":
                rows.append((arm, f"`{cache}`", f"absent: {c['reason']}",
                             "", "", "", "", ""))
                continue
            ab = c.get("active_before")
            ppe = c.get("bytes_per_extent")
            rows.append((arm, f"`{cache}`",
                         "n/a" if ab is None else ab, c["active_after"],
                         "n/a" if c.get("delta_objs") is None
                         else f"{c['delta_objs']:+d}",
                         c["objsize"], f"{c['bytes_after'] / 1024:.1f}",
                         "n/a" if ppe is None else f"{ppe:.2f}"))
    doc.table(["arm", "cache", "objects before read", "objects after read",
               "change", "object size, B", "KiB after", "bytes per extent"],
              rows, ["raw data: `profiles/<arm>/slab-before.txt` and "
                     "`profiles/<arm>/slab.txt`; extents read: "
                     + (", ".join(f"{a} {m['extents']}" for a, m in
                                  mem.items() if m.get("extents"))
                        or "not recorded")])


def section_flames(doc, run, res):
    doc.h(2, "Flame graphs")
    fl = res.get("flames") or {}
    doc.p("`perf record -e cpu-clock -F 499 -g -a` around the profiled "
          "phase (a separate pass from the bpftrace one), `perf script` "
          "in the guest, folded and drawn here (reports/flame.py): the "
          "width of a frame is its share of the non-idle samples; the "
          "process name is the bottom frame.")
    arms = fl.get("arms") or {}
    rows = []
    for arm in run["arms"]:
        if arm in arms:
            a = arms[arm]
            rows.append((arm, f"[{a['svg']}]({a['svg']})",
                         f"[{a['folded']}]({a['folded']})",
                         a["busy_samples"], a["idle_samples"]))
        elif arm in run["not_measured"]:
            rows.append((arm, f"skipped: {run['not_measured'][arm]}", "",
                         "", ""))
        else:
            rows.append((arm, "not collected", "", "", ""))
    doc.table(["arm", "flame graph", "folded stacks", "samples",
               "idle samples (left out)"], rows)
    d = fl.get("diff")
    doc.h(3, "Differential flame graph")
    if not d:
        doc.p("Not drawn: fewer than two arms were profiled "
              "(skipped arms have no profile).")
        return
    if not d["main"]:
        doc.note(f"**This is {d['target']} against {d['base']}, not "
                 f"{MAIN_A} against {MAIN_B}**: {d['why_not_main']}.")
    doc.p(f"[{d['svg']}]({d['svg']}): the flame graph of {d['target']}, "
          f"each frame colored by how its share of samples changed from "
          f"{d['base']} (red larger, blue smaller). Functions whose share "
          "as the leaf (self) changed most (hover over a frame in the "
          "SVG, opened on its own, for its numbers):")
    doc.img(d["svg"], f"differential flame graph, {d['target']} against "
            f"{d['base']}")
    doc.table(["function", f"self % {d['target']}", f"self % {d['base']}",
               "change, points", f"incl. % {d['target']}",
               f"incl. % {d['base']}"],
              [(f"`{r['function']}`", f"{100 * r['self_target']:.2f}",
                f"{100 * r['self_base']:.2f}",
                f"{100 * r['self_delta']:+.2f}",
                f"{100 * r['incl_target']:.2f}",
                f"{100 * r['incl_base']:.2f}") for r in d["top"]])


# ------------------------------------------------------------- driver

def analyze(run, threshold):
    """Everything the report says, as one JSON-able dict."""
    res = {
        "format": "fscrypt-lab-report/1",
        "run_dir": os.path.abspath(run["dir"]),
        "threshold_pct": threshold,
        "units": {"bw_bytes": "bytes/s", "iops": "I/O per s",
                  "latency_ns": "ns", "tables": "MiB/s = 2^20 bytes/s"},
        "goals": {"bw_ratio_min": GOAL_BW_RATIO,
                  "p99_ratio_max": GOAL_P99_RATIO,
                  "comparison": f"{MAIN_A}/{MAIN_B}"},
        "meta": run["meta"],
        "arms": {},
    }
    for arm, spec in run["arms"].items():
        entry = {"status": spec.get("status"), "spec": spec}
        if arm in run["measured"]:
            entry["phases"] = analyze_arm(run, arm)
        else:
            entry["reason"] = run["not_measured"][arm]
        res["arms"][arm] = entry
    res["skipped"] = dict(run["not_measured"])
    res["comparisons"] = [comparison(run, a, b, label, phase, threshold)
                          for a, b, label in COMPARISONS
                          for phase in run["phases"]]
    res["verdicts"] = verdicts(run, res["comparisons"])
    res["extent_counts"] = extent_check(run)
    prof = load_profiles(run)
    # folded stacks stay out of results.json (they are written beside it)
    run["folded"] = {a: e.pop("folded") for a, e in (prof or {}).items()
                     if "folded" in e}
    res["profiles"] = prof
    der = {}
    if prof:
        for arm, e in prof.items():
            n = derivation_count(e["bpftrace"]) if "bpftrace" in e else None
            if n is None and e.get("bpftrace", {}).get("maps") and \
                    not run["arms"].get(arm, {}).get("encrypted", True):
                n = 0  # an unencrypted arm traced fine and derived nothing
            # the extents of the file the profiled rep read, else the timed
            # reps' median (older runs)
            x = profiled_extents(run, arm)
            if x is None and res["extent_counts"]:
                ext = res["extent_counts"]["arms"].get(arm)
                x = ext["median"] if ext and isnum(ext["median"]) else None
            if n is not None and x is not None:
                der[arm] = (x, n)
    res["derivations_vs_extents"] = der
    res["memory"] = memory_analysis(run, prof)
    slabs = {a: e["slab"] for a, e in (prof or {}).items() if "slab" in e}
    res["slab_caches"] = slab_selection(slabs) if slabs else []
    res["scaling"] = load_scaling(run)
    res["warnings"] = run["warnings"]
    return res


def make_plots(run, res, out_dir):
    colors = arm_colors(run["arms"])
    plots = {
        "throughput": plot_throughput(run, res, out_dir, colors),
        "latency": plot_latency(run, res, out_dir, colors),
        "ratio": plot_main_ratio(run, res, out_dir),
        "comparisons": plot_comparisons(res, out_dir),
        "order": plot_order(run, out_dir, colors),
    }
    prof = res.get("profiles") or {}
    plots["bpftrace"] = plot_bpftrace_hists(run, prof, out_dir, colors)
    plots["derivations"] = plot_derivations_vs_extents(
        run, res["derivations_vs_extents"], out_dir, colors)
    plots["slab"] = plot_slab({a: e["slab"] for a, e in prof.items()
                               if "slab" in e}, res["slab_caches"],
                              out_dir, colors)
    plots["scaling"] = plot_scaling(run, res["scaling"], out_dir, colors)
    plots["memory"] = plot_memory(run, res["memory"], out_dir, colors)
    for arm, folded in run.get("folded", {}).items():
        prof.setdefault(arm, {})["folded"] = folded
    res["flames"] = make_flames(run, prof, out_dir)
    for e in prof.values():
        e.pop("folded", None)
    return plots


def build_doc(run, res, threshold, plots):
    doc = Doc()
    section_header(doc, run, res)
    section_verdicts(doc, res)
    section_run(doc, run)
    section_arms(doc, run)
    section_phases(doc, run, res, threshold, plots)
    section_latency(doc, run, res, plots)
    section_comparisons(doc, run, res, plots)
    section_fragmentation(doc, res)
    section_profiles(doc, run, res, plots)
    section_memory(doc, run, res, plots)
    section_flames(doc, run, res)
    section_scaling(doc, run, res, plots)
    section_tail(doc, run, res, threshold, plots)
    return doc


def jsonable(x):
    """NaN -> None, tuples -> lists, keys -> str, recursively."""
    if isinstance(x, float):
        return None if math.isnan(x) or math.isinf(x) else x
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    return x


def copy_sources(run_dir, out_dir):
    """Copy raw/, profiles/, meta.json, scaling.json, console.log here."""
    if os.path.realpath(run_dir) == os.path.realpath(out_dir):
        return
    for name in ("raw", "profiles"):
        src, dst = os.path.join(run_dir, name), os.path.join(out_dir, name)
        if os.path.isdir(src):
            if os.path.islink(dst) or os.path.isfile(dst):
                os.remove(dst)
            elif os.path.isdir(dst):
                shutil.rmtree(dst)
            shutil.copytree(src, dst)
    for name in ("meta.json", "scaling.json", "console.log"):
        src = os.path.join(run_dir, name)
        if os.path.isfile(src):
            shutil.copyfile(src, os.path.join(out_dir, name))


def remove_old_outputs(out_dir):
    """Remove the plots and flame graphs an earlier report left in out_dir
    (reports/<date>-<workload> is reused by a second run on the same day,
    whose report might not draw them all)."""
    for name in os.listdir(out_dir):
        path = os.path.join(out_dir, name)
        if os.path.isfile(path) and (name.endswith(".png") or
                                     re.fullmatch(r"flame-.*\.svg", name)):
            os.remove(path)
    if os.path.isdir(os.path.join(out_dir, "flame")):
        shutil.rmtree(os.path.join(out_dir, "flame"))


def generate(run_dir, out_dir, threshold=DEFAULT_THRESHOLD):
    """Write the whole report; return the results dict."""
    run = load_run(run_dir)
    os.makedirs(out_dir, exist_ok=True)
    remove_old_outputs(out_dir)
    res = analyze(run, threshold)
    plots = make_plots(run, res, out_dir)
    res["plots"] = plots
    doc = build_doc(run, res, threshold, plots)
    meta = run["meta"]
    title = (f"Benchmark report: {meta.get('workload', '?')} "
             f"{meta.get('date', '')}")
    with open(os.path.join(out_dir, "summary.md"), "w",
              encoding="utf-8") as f:
        f.write(doc.to_md())
    with open(os.path.join(out_dir, "index.html"), "w",
              encoding="utf-8") as f:
        f.write(doc.to_html(title))
    with open(os.path.join(out_dir, "results.json"), "w",
              encoding="utf-8") as f:
        json.dump(jsonable(res), f, indent=1, sort_keys=False,
                  ensure_ascii=False)
        f.write("\n")
    copy_sources(run_dir, out_dir)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Build a benchmark report (index.html, summary.md, "
                    "results.json, PNG plots) from a raw run directory.")
    ap.add_argument("run_dir", metavar="RUN_DIR")
    ap.add_argument("out_dir", metavar="OUT_DIR")
    ap.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                    metavar="PCT",
                    help="minimum |change %%| to mark a difference "
                         "significant (default %(default)g)")
    args = ap.parse_args(argv)
    try:
        res = generate(args.run_dir, args.out_dir, args.threshold)
    except RunError as e:
        print(f"generate: error: {e}", file=sys.stderr)
        return 2
    for w in res["warnings"]:
        print(f"generate: warning: {w}", file=sys.stderr)
    for v in res["verdicts"]:
        print("verdict: " + v["text"].replace("**", ""))
    print(f"generate: report in {args.out_dir}/index.html and "
          f"{args.out_dir}/summary.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
