"""The run model of the benchmark lab: the one owner of what a run is.

A raw run directory (build/bench/<stamp>-<workload>/) is written once by
collect() from what the guest recorded (bench/guest/lib.sh, run format
FORMAT) and read by load_run(); everything else (reports.generate,
reports.gate, reports.history) reads runs only through this module:

  - the arms, in display order, with what the guest did for each (mkfs
    command, mount options as /proc/mounts showed them, key mode the
    kernel reported, tuning), or why it was skipped;
  - fio json+ parsing of raw/<arm>/rep<N>/<phase>.json, and the guest's
    CPU time of each phase (cpu.tsv);
  - the comparisons (A / reference B) and per-rep values (throughput,
    CPU cost, latency bins) that reports.labstats.ratio() pairs by rep;
  - the results of a workload's command phases (run["commands"]: the
    "name<TAB>value" lines of raw/<arm>/rep<N>/<phase>.tsv), which are not
    fio phases: run["phases"] has the fio phases only, and the generic
    report never sees the others (the workload's module reads them).

A run describes itself (format 3): collect() writes into meta.json the
arm definitions that ran (the job's copy of bench/arms/, with their
order, references and comparisons), the workload's analysis kind and
goals, the metric definitions, the ratio's definition and the kernel
(release, series hash, tree commit) and lab commit. load_run() reads them
from there only: nothing of bench/arms or bench/workloads in the working
tree is read when a run is rendered, checked or drawn in the history.

Older runs (format 2) lack that description; load_run() reads them with
the fallbacks of spec_of_format2() (the arm files the run directory's
job/ kept, else the format-2 arm table frozen below; goals and metrics
of format 2; no CPU data) and lists each fallback in run["spec_notes"].
The formats are described in reports/README.md.
"""

import base64
import importlib
import json
import os
import re
import shutil
import subprocess

from reports import labstats as L

# The run format this lab writes: the guest's bench/format and meta.json's
# "format". Bump both sides together when either changes. Format 2 runs
# are still read (see spec_of_format2); a guest of another format is not.
FORMAT = 3
READS_FORMATS = (2, 3)

# The working tree's arm and workload definitions. Read only by collect()
# callers that make a run (synthrun; collect() itself reads the job's
# copy), never when a run is loaded: tests replace these to prove it.
LAB_TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARMS_DIR = os.path.join(LAB_TOP, "bench", "arms")
WORKLOADS_DIR = os.path.join(LAB_TOP, "bench", "workloads")

MIB = 1024.0 * 1024.0

# The goals of the main comparison (its A over its reference B), the lab's
# defaults; a workload.conf may set GOAL_CPU_PER_MIB, GOAL_BW and GOAL_P99.
# The verdict decides on CPU cost per MiB: a per-extent key costs CPU
# (lookups, derivations, key-slot programs), and under TCG or icount CPU
# time is what the emulation measures best; 1.03 is the same 3% as the
# throughput goal. Throughput and p99 latency are judged beside it.
DEFAULT_GOALS = {"decide": "cpu_per_mib", "cpu_per_mib_max": 1.03,
                 "bw_min": 0.97, "p99_max": 1.05}

# What the report does with a workload's phases (ANALYSIS= in its
# workload.conf): "phases" (tables and verdicts per phase; no module), or
# a kind of its own, whose analysis, plots and report section live in the
# plug-in module reports/wl_<kind>.py (bench/README.md, "Adding a
# workload"). A module defines:
#   KIND                         the kind, as in ANALYSIS
#   owns_phases(phases)          bool: is a run of format 2, which did not
#                                record its kind, of this kind?
#   judged_phases(run)           the phases judged against the goals
#                                (None: all); run has at least "phases"
#   analyze(run, res)            its results, JSON-able: res["workload"]
#   plot(run, res, out_dir, colors)  {plot name: path}
#   render(doc, run, res, plots) its report section(s)
# and optionally legacy_applies(run): bool, for runs of another kind that
# carry its data (scaling.json of the old lab).
PLAIN_ANALYSIS = "phases"
_HERE = os.path.dirname(os.path.abspath(__file__))


def analysis_kinds():
    """"phases" and the kinds of the plug-in modules reports/wl_*.py."""
    mods = sorted(n[3:-3] for n in os.listdir(_HERE)
                  if n.startswith("wl_") and n.endswith(".py"))
    return (PLAIN_ANALYSIS, *mods)


def workload_module(kind):
    """The plug-in module of an analysis kind, None for "phases"; a kind
    without a module is a RunError."""
    if kind == PLAIN_ANALYSIS:
        return None
    if kind not in analysis_kinds():
        raise RunError(f"analysis kind {kind!r} has no module "
                       f"reports/wl_{kind}.py (kinds: "
                       f"{', '.join(analysis_kinds())})")
    return importlib.import_module(f"reports.wl_{kind}")


def run_module(run):
    """The module that analyses RUN: its kind's, else one whose
    legacy_applies(run) says the run carries its data; None for neither."""
    mod = workload_module(run["analysis"])
    if mod is not None:
        return mod
    for kind in analysis_kinds()[1:]:
        m = workload_module(kind)
        if getattr(m, "legacy_applies", None) and m.legacy_applies(run):
            return m
    return None


# The per-rep metrics of a phase, as the report, the check and the
# history name them; written into every run (meta.json spec.metrics).
METRICS = {
    "bw_bytes": {
        "name": "throughput", "unit": "bytes/s", "better": "higher",
        "per_rep": True,
        "definition": "fio json+ jobs[0].<side>.bw_bytes of the phase, "
                      "<side> = read or write, whichever moved bytes"},
    "iops": {
        "name": "I/O rate", "unit": "I/O per s", "better": "higher",
        "per_rep": True, "definition": "fio jobs[0].<side>.iops"},
    "cpu_s": {
        "name": "CPU time", "unit": "s", "better": "lower",
        "per_rep": True,
        "definition": "guest CPU time of the phase's I/O, all CPUs (so "
                      "kworkers that decrypt count; idle does not): meta "
                      "cpu.source says from where: schedstat (the change "
                      "of rq_cpu_time summed over the cpuN lines of "
                      "/proc/schedstat, ns of every task but idle, read "
                      "from the scheduler clock) or stat (the change of "
                      "user+nice+system+irq+softirq of the /proc/stat cpu "
                      "line, USER_HZ ticks sampled at the timer tick; runs "
                      "without cpu.source); cpu.units_per_s converts. The "
                      "window: from fio's exec_prerun (after its start-up, "
                      "before the first I/O) to its exec_postrun (after the "
                      "last I/O and end_fsync); meta cpu.window says which "
                      "window the run had: io (that one), process (around "
                      "the whole fio run, start and exit included: runs "
                      "before 2026-12-05 13:00 UTC and job files of several "
                      "jobs) or mixed"},
    "cpu_per_mib": {
        "name": "CPU cost per MiB", "unit": "CPU s per MiB",
        "better": "lower", "per_rep": True,
        "definition": "cpu_s / (fio io_bytes / 2^20) of the same rep and "
                      "phase"},
    "cpu_per_op": {
        "name": "CPU cost per operation", "unit": "CPU s per I/O",
        "better": "lower", "per_rep": True,
        "definition": "cpu_s / fio total_ios of the same rep and phase"},
    "latency": {
        "name": "completion latency percentiles", "unit": "ns",
        "better": "lower", "per_rep": False,
        "definition": "nearest rank on fio clat_ns bins merged over the "
                      "reps; ratio CIs resample whole reps"},
}

# The ratio of A over B (reports.labstats.ratio), as recorded in a run.
RATIO_DEFINITION = {
    "name": "geometric mean of per-rep ratios",
    "definition": "r_N = A[rep N] / B[rep N] for the reps both arms ran "
                  "(interleaved, back to back); ratio = exp(mean(log r_N))",
    "ci": "95% Student t-interval of mean(log r_N), n - 1 degrees of "
          "freedom, exponentiated (before 2026-12-07: a percentile "
          "bootstrap, which covered about 84% with 5 pairs); conditional "
          "on the run's one boot; not conclusive with fewer than "
          f"{L.MIN_PAIRED_REPS} pairs",
    "function": "reports.labstats.ratio",
}


class RunError(Exception):
    """The run directory cannot be used (message says why)."""


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
        "total_ios": int(side.get("total_ios") or clat.get("N") or 0),
        "runtime_ms": side.get("runtime"),
        "clat_n": clat.get("N"),
        "clat_mean_ns": clat.get("mean"),
        "fio_percentiles_ns": clat.get("percentile") or {},
        "bins": ({int(k): int(v) for k, v in bins.items()}
                 if isinstance(bins, dict) and bins else None),
    }


# ------------------------------------------------ what a run describes

def read_arm_specs(arms_dir=None):
    """{arm: {KEY: value}} of the arm files <arms_dir>/*.conf (KEY=value
    lines, see bench/arms.sh), in ORDER, then name. arms_dir None: the
    working tree's bench/arms (ARMS_DIR), for making a run only."""
    arms_dir = ARMS_DIR if arms_dir is None else arms_dir
    specs = {}
    for name in sorted(os.listdir(arms_dir)):
        if not name.endswith(".conf"):
            continue
        spec = {}
        with open(os.path.join(arms_dir, name), encoding="utf-8") as f:
            for line in f:
                m = re.match(r'([A-Z_]+)=(?:"(.*)"|(.*))$', line.rstrip("\n"))
                # the first line of a key counts, as bench/arms.sh reads it
                if m and m.group(1) not in spec:
                    spec[m.group(1)] = (m.group(2) if m.group(2) is not None
                                        else m.group(3))
        specs[name[:-5]] = spec
    return dict(sorted(specs.items(),
                       key=lambda kv: (_int(kv[1].get("ORDER")), kv[0])))


def _int(x, default=99):
    try:
        return int(x)
    except (TypeError, ValueError):
        return default


def comparisons_of(arm_specs):
    """[{"a", "b", "label"}] from the arms' REFERENCE and COMPARISON, in
    COMPARISON_ORDER (then name). Each arm is the A side of at most one
    comparison, so that B is "the reference" of A in the tables; the first
    is the main one."""
    return [{"a": a, "b": s["REFERENCE"], "label": s.get("COMPARISON", "")}
            for a, s in sorted(arm_specs.items(), key=lambda kv: (
                _int(kv[1].get("COMPARISON_ORDER")), kv[0]))
            if s.get("REFERENCE")]


def judged_phases(analysis, phases):
    """(judged, not_judged) phases of the main comparison's verdicts: every
    phase, or those the kind's module names."""
    mod = workload_module(analysis)
    judged = mod.judged_phases({"phases": list(phases),
                                "analysis": analysis}) if mod else None
    if judged is None:
        return list(phases), []
    return ([p for p in phases if p in judged],
            [p for p in phases if p not in judged])


def _float_conf(conf, key, default):
    v = conf.get(key)
    if v in (None, ""):
        return default
    try:
        return float(v)
    except ValueError as e:
        raise RunError(f"workload.conf: {key}={v!r} is not a number") from e


def build_spec(arm_specs, workload, conf, phases, arms_source):
    """What a run needs to describe itself (meta.json "spec"): the arm
    definitions (arm_specs: read_arm_specs() of the arm files that ran),
    their display order and comparisons, the workload (name, description,
    analysis kind, goals and judged phases, from its workload.conf: conf),
    the metric definitions and the ratio's definition."""
    analysis = conf.get("ANALYSIS") or PLAIN_ANALYSIS
    if analysis not in analysis_kinds():
        raise RunError(f"workload {workload}: ANALYSIS={analysis!r}, not "
                       f"one of {', '.join(analysis_kinds())} (a kind "
                       f"of its own needs reports/wl_{analysis}.py)")
    comps = comparisons_of(arm_specs)
    judged, not_judged = judged_phases(analysis, phases)
    goals = {
        "comparison": [comps[0]["a"], comps[0]["b"]] if comps else None,
        "decide": DEFAULT_GOALS["decide"],
        "cpu_per_mib_max": _float_conf(conf, "GOAL_CPU_PER_MIB",
                                       DEFAULT_GOALS["cpu_per_mib_max"]),
        "bw_min": _float_conf(conf, "GOAL_BW", DEFAULT_GOALS["bw_min"]),
        "p99_max": _float_conf(conf, "GOAL_P99", DEFAULT_GOALS["p99_max"]),
        "judged_phases": judged,
        "not_judged_phases": not_judged,
        # without CPU data (a guest that could not read /proc/stat): the
        # verdicts of format 2, throughput and p99 of the read phases
        "fallback": "bw_bytes and p99 of the judged read phases",
    }
    return {
        "arms_source": arms_source,
        "arms": arm_specs,
        "arm_order": list(arm_specs),
        "comparisons": comps,
        "workload": {"name": workload,
                     "description": conf.get("description", ""),
                     "analysis": analysis, "goals": goals},
        "metrics": METRICS,
        "ratio": RATIO_DEFINITION,
    }


def kernel_base(k):
    """The Linux version a kernel is built from, "MAJOR.MINOR" (e.g. "6.1",
    "6.12"), from its release ("6.12.118+") or else its linux-source version;
    None if neither says.  Runs of different bases are never compared: the
    series, btrfs and fscrypt all differ between them."""
    for v in ((k or {}).get("release"), (k or {}).get("linux_source")):
        m = re.match(r"(\d+)\.(\d+)", v or "")
        if m:
            return f"{m.group(1)}.{m.group(2)}"
    return None


def kernel_of(run_info, env=None):
    """The kernel and lab a run used (meta.json "kernel"): release, linux
    source version, series hash, the commit of the patched tree, config
    hash and flavor (from the kernel's .info via run.info), and the lab's
    commit when bench/run-bench.sh recorded it (LAB_COMMIT, LAB_DIRTY);
    None where unknown."""
    env = env or {}
    k = {key: run_info.get(f"kernel_{key}") or None
         for key in ("release", "linux_source", "series_hash", "tree_head",
                     "config_sha256", "flavor")}
    k["base"] = kernel_base(k)
    k["lab_commit"] = env.get("LAB_COMMIT") or None
    k["lab_dirty"] = (env["LAB_DIRTY"] == "1") if env.get("LAB_DIRTY") \
        in ("0", "1") else None
    return k


# The arms of the lab when format 2 was the newest run format (bench/arms
# at the last commit writing format 2), for format-2 runs whose directory
# kept no job/bench/arms/: synthetic runs, copies without job/. A format-2
# run made before 2026-12-04 19:35 had no btrfs-extent-key arm and its
# btrfs-extent gave every extent a key of its own; such runs kept their
# job/ and are read from it.
FORMAT2_ARMS = {
    "btrfs-extent": {
        "ORDER": "1", "FS": "btrfs", "ENCRYPTED": "1",
        "KEY_MODE": "per-extent", "REFERENCE": "btrfs-inode",
        "DESCRIPTION": "btrfs, fscrypt with per-extent keys in key groups "
                       "(the default for new encrypted files: "
                       "fscrypt_extents_per_key=0, no bound on the extents "
                       "per key)",
        "COMPARISON": "per-extent keys in key groups vs per-inode keys on "
                      "btrfs (the main comparison)",
        "COMPARISON_ORDER": "1"},
    "btrfs-extent-key": {
        "ORDER": "2", "FS": "btrfs", "ENCRYPTED": "1",
        "KEY_MODE": "per-extent-key", "REFERENCE": "btrfs-inode",
        "DESCRIPTION": "btrfs, fscrypt with one key per extent "
                       "(fscrypt_extents_per_key=1, the upstream design)",
        "COMPARISON": "one key per extent vs per-inode keys "
                      "(upstream-design reference)",
        "COMPARISON_ORDER": "2"},
    "btrfs-inode": {
        "ORDER": "3", "FS": "btrfs", "ENCRYPTED": "1",
        "KEY_MODE": "per-inode", "REFERENCE": "btrfs-plain",
        "DESCRIPTION": "btrfs, fscrypt with per-inode keys (mount option "
                       "fscrypt_per_inode_keys)",
        "COMPARISON": "cost of per-inode encryption on btrfs",
        "COMPARISON_ORDER": "3"},
    "btrfs-plain": {
        "ORDER": "4", "FS": "btrfs", "ENCRYPTED": "0", "KEY_MODE": "none",
        "REFERENCE": "ext4-plain", "DESCRIPTION": "btrfs, unencrypted",
        "COMPARISON": "btrfs vs ext4, both unencrypted",
        "COMPARISON_ORDER": "5"},
    "ext4-inode": {
        "ORDER": "5", "FS": "ext4", "ENCRYPTED": "1", "KEY_MODE": "per-inode",
        "REFERENCE": "ext4-plain",
        "DESCRIPTION": "ext4, upstream fscrypt (per-inode keys)",
        "COMPARISON": "cost of per-inode encryption on ext4",
        "COMPARISON_ORDER": "4"},
    "ext4-plain": {
        "ORDER": "6", "FS": "ext4", "ENCRYPTED": "0", "KEY_MODE": "none",
        "DESCRIPTION": "ext4, unencrypted"},
}


def spec_of_format2(run_dir, meta):
    """(spec, notes) of a format-2 run, which did not record its spec.

    Fallbacks, each listed in notes: the arm definitions are the run
    directory's job/bench/arms/*.conf (bench/run-bench.sh keeps the job
    that ran there) or, without them, FORMAT2_ARMS; the analysis kind is
    inferred from the phase names (the first module whose owns_phases says
    so, else "phases");
    the goals are those of format 2, throughput >= 0.97 and p99 <= 1.05 of
    the main comparison on the judged read phases (no CPU data: format 2
    did not measure it); the metrics are METRICS without the CPU ones.
    """
    notes = []
    job_arms = os.path.join(run_dir, "job", "bench", "arms")
    if os.path.isdir(job_arms) and any(n.endswith(".conf")
                                       for n in os.listdir(job_arms)):
        arms, source = read_arm_specs(job_arms), "job/bench/arms"
        notes.append("format 2: arm definitions read from the run "
                     "directory's job/bench/arms/ (the files the guest ran)")
    else:
        arms = dict(FORMAT2_ARMS)
        source = "format-2 arm table (reports/runmodel.py FORMAT2_ARMS)"
        notes.append("format 2 without job/bench/arms/: arm order, "
                     "references and descriptions are the lab's arm table "
                     "of format 2 (reports/runmodel.py FORMAT2_ARMS)")
    phases = meta.get("phases") or []
    analysis = next((k for k in analysis_kinds()[1:]
                     if workload_module(k).owns_phases(phases)),
                    PLAIN_ANALYSIS)
    notes.append(f"format 2: analysis kind '{analysis}' inferred from the "
                 "phase names")
    spec = build_spec(arms, meta.get("workload", "?"),
                      {"description": meta.get("description", ""),
                       "ANALYSIS": analysis}, phases, source)
    spec["workload"]["goals"].update(decide="bw_bytes+p99",
                                     cpu_per_mib_max=None)
    notes.append("format 2: no CPU data; verdicts on throughput (>= 0.97) "
                 "and p99 latency (<= 1.05) of the read phases, as format 2 "
                 "judged them")
    spec["metrics"] = {k: v for k, v in METRICS.items()
                       if not k.startswith("cpu")}
    return spec, notes


def arm_order(run, names):
    """names in the run's display order (its spec's arm order), then the
    others sorted."""
    names = list(names)
    known = run["arm_order"]
    return ([a for a in known if a in names]
            + sorted(a for a in names if a not in known))


def rep_dirs(arm_dir):
    """{rep number: path} of the rep<N> directories of one arm."""
    out = {}
    if os.path.isdir(arm_dir):
        for name in os.listdir(arm_dir):
            m = re.fullmatch(r"rep(\d+)", name)
            if m and os.path.isdir(os.path.join(arm_dir, name)):
                out[int(m.group(1))] = os.path.join(arm_dir, name)
    return dict(sorted(out.items()))


# Where a run's CPU times come from (meta cpu.source): what one unit of
# cpu.tsv is, and how the report names it.
CPU_SOURCES = {
    "schedstat": "/proc/schedstat rq_cpu_time summed over CPUs, ns",
    "stat": "/proc/stat user+nice+system+irq+softirq, USER_HZ ticks",
}


def cpu_clock(meta):
    """(source, units per second) of a run's cpu.tsv, or (source, None)
    when unusable. Runs before cpu.source counted /proc/stat ticks of
    cpu.user_hz."""
    info = meta.get("cpu") or {}
    source = info.get("source", "stat")
    per_s = info.get("units_per_s", info.get("user_hz"))
    if source not in CPU_SOURCES or not isinstance(per_s, (int, float)) \
            or per_s <= 0:
        return source, None
    return source, per_s


def read_cpu(run_dir, meta, warnings):
    """{(arm, rep, phase): CPU seconds} from RUN_DIR/cpu.tsv (arm, rep,
    phase, CPU time the guest recorded over each timed phase, in the unit
    of meta cpu.source: ns of /proc/schedstat or ticks of /proc/stat);
    {} when the run has none."""
    info = meta.get("cpu")
    path = os.path.join(run_dir, "cpu.tsv")
    if not isinstance(info, dict) or not os.path.exists(path):
        return {}
    source, per_s = cpu_clock(meta)
    if per_s is None:
        warnings.append(f"cpu.tsv: no usable unit in meta.json (source "
                        f"{source!r}, {info!r})")
        return {}
    out = {}
    for row in _read_tsv(path):
        if len(row) != 4 or not row[1].isdigit() or not row[3].isdigit():
            warnings.append(f"cpu.tsv: bad line {row!r}, ignored")
            continue
        out[(row[0], int(row[1]), row[2])] = int(row[3]) / per_s
    return out


def add_cpu(d, cpu_s):
    """The CPU numbers of one rep's phase: cpu_s, per MiB, per I/O."""
    d["cpu_s"] = cpu_s
    mib = d["io_bytes"] / MIB
    d["cpu_per_mib"] = (cpu_s / mib if cpu_s is not None and mib > 0
                        else None)
    d["cpu_per_op"] = (cpu_s / d["total_ios"] if cpu_s is not None
                       and d["total_ios"] > 0 else None)


def load_run(run_dir):
    """Read meta.json, its spec and every raw file of the measured arms.

    Returns a dict: dir, meta, format, spec (see build_spec), spec_notes
    (fallbacks used for an older run), comparisons ([(A, B, label)]),
    main ((A, B) of the first comparison, or None), reference ({A: B}),
    arm_order, goals, analysis, metrics, kernel, phases (the fio phases),
    command_phases (the others: meta.json command_phases), arms (facts per
    arm, display order), measured (arm list), not_measured ({arm:
    reason}), data ({arm: {phase: {rep: parse_fio() + cpu_s, cpu_per_mib,
    cpu_per_op}}}), commands ({arm: {command phase: {rep:
    read_command_result()}}}), has_cpu, warnings (list of str). Missing or
    broken raw files are warnings, not errors; a missing or broken
    meta.json is a RunError.
    """
    if not os.path.isdir(run_dir):
        raise RunError(f"run directory {run_dir} does not exist")
    meta = read_json_file(os.path.join(run_dir, "meta.json"))
    if not isinstance(meta, dict):
        raise RunError(f"{run_dir}/meta.json: not a JSON object")
    fmt = meta.get("format")
    if fmt not in READS_FORMATS:
        raise RunError(f"{run_dir}/meta.json: run format {fmt!r}, this lab "
                       f"reads formats {', '.join(map(str, READS_FORMATS))} "
                       "(host and guest ship together: run the benchmark "
                       "again)")
    phases = meta.get("phases")
    arms_meta = meta.get("arms")
    if not isinstance(phases, list) or not phases:
        raise RunError(f"{run_dir}/meta.json: 'phases' missing or empty")
    if not isinstance(arms_meta, dict) or not arms_meta:
        raise RunError(f"{run_dir}/meta.json: 'arms' missing or empty")
    if fmt == 2:
        spec, notes = spec_of_format2(run_dir, meta)
        kernel = kernel_of(meta.get("run_info") or {})
    else:
        spec, notes = meta.get("spec"), []
        if not isinstance(spec, dict) or not isinstance(
                spec.get("arms"), dict) or not isinstance(
                spec.get("comparisons"), list) or not isinstance(
                spec.get("workload"), dict):
            raise RunError(f"{run_dir}/meta.json: format {fmt} without a "
                           "usable 'spec' (arms, comparisons, workload)")
        kernel = meta.get("kernel") or kernel_of(meta.get("run_info") or {})
    comps = [(c["a"], c["b"], c.get("label", "")) for c in spec["comparisons"]]
    command = [p for p in meta.get("command_phases") or [] if p in phases]
    phases = [p for p in phases if p not in command]
    run = {"dir": run_dir, "meta": meta, "format": fmt, "spec": spec,
           "spec_notes": notes, "comparisons": comps,
           "main": (comps[0][0], comps[0][1]) if comps else None,
           "reference": {a: b for a, b, _ in comps},
           "arm_order": list(spec.get("arm_order") or spec["arms"]),
           "goals": spec["workload"].get("goals") or {},
           "analysis": spec["workload"].get("analysis", "phases"),
           "metrics": spec.get("metrics") or {}, "kernel": kernel,
           "phases": phases, "command_phases": command}
    warnings = []
    arms = {a: arms_meta[a] if isinstance(arms_meta[a], dict) else {}
            for a in arm_order(run, arms_meta)}
    cpu = read_cpu(run_dir, meta, warnings) if fmt >= 3 else {}
    no_cpu = []
    measured, not_measured, data, commands = [], {}, {}, {}
    raw = os.path.join(run_dir, "raw")
    for arm, facts in arms.items():
        status = facts.get("status", "?")
        if status != "measured":
            reason = facts.get("reason") or "no reason given"
            not_measured[arm] = (reason if status == "skipped"
                                 else f"status '{status}': {reason}")
            continue
        measured.append(arm)
        data[arm] = {p: {} for p in phases}
        commands[arm] = {p: {} for p in command}
        reps = rep_dirs(os.path.join(raw, arm))
        if not reps:
            warnings.append(f"{arm}: measured per meta.json, but "
                            f"raw/{arm}/rep<N>/ has no data")
        for rep, rdir in reps.items():
            for phase in command:
                rel = f"raw/{arm}/rep{rep}/{phase}.tsv"
                path = os.path.join(rdir, f"{phase}.tsv")
                if not os.path.exists(path):
                    warnings.append(f"missing {rel}")
                    continue
                d = read_command_result(path)
                if not d:
                    warnings.append(f"{rel}: no name<TAB>value line")
                    continue
                commands[arm][phase][rep] = {"file": rel, **d}
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
                add_cpu(d, cpu.get((arm, rep, phase)))
                if cpu and d["cpu_s"] is None:
                    no_cpu.append(f"{arm} rep{rep} {phase}")
                data[arm][phase][rep] = d
        want = meta.get("reps")
        if reps and isinstance(want, int) and len(reps) != want:
            warnings.append(f"{arm}: {len(reps)} rep directories, "
                            f"meta.json says reps={want}")
    if no_cpu:
        warnings.append(f"cpu.tsv: no CPU time for {len(no_cpu)} measured "
                        f"phase(s): {', '.join(no_cpu[:6])}"
                        + (", ..." if len(no_cpu) > 6 else ""))
    if os.path.isdir(raw):
        for name in sorted(os.listdir(raw)):
            if name not in arms:
                warnings.append(f"raw/{name}/ is not an arm of meta.json; "
                                "ignored")
    run.update(arms=arms, measured=measured, not_measured=not_measured,
               data=data, commands=commands, has_cpu=bool(cpu),
               warnings=warnings)
    return run


def _value(text):
    """A command result's value: an int or a float where it is one, else
    the text."""
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def read_command_result(path):
    """The result of one command phase (bench/guest/lib.sh, "Command
    phases"): {name: value} of its "name<TAB>value" lines, numbers as
    numbers (_value); other lines are skipped, a name given twice keeps
    the last value. The driver adds cpu_units, cpu_units_per_s and
    cpu_source (CPU time of all CPUs around the command); with them,
    cpu_s is added here: cpu_units / cpu_units_per_s."""
    out = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            name, sep, value = line.rstrip("\n").partition("\t")
            if sep and name and "\t" not in value:
                out[name] = _value(value)
    units, per_s = out.get("cpu_units"), out.get("cpu_units_per_s")
    if isinstance(units, int) and isinstance(per_s, int) and per_s > 0:
        out["cpu_s"] = units / per_s
    return out


def command_values(run, arm, phase, name):
    """{rep: value} of one number of a command phase's results (one arm);
    reps without it, or where it is not a number, are left out."""
    reps = (run.get("commands") or {}).get(arm, {}).get(phase, {})
    return {r: d[name] for r, d in reps.items()
            if isinstance(d.get(name), (int, float))
            and not isinstance(d.get(name), bool)}


def values_by_rep(run, arm, phase, metric):
    """{rep: value} of one per-rep metric (bw_bytes, iops, cpu_s,
    cpu_per_mib, cpu_per_op) of one arm and phase; reps without it (no CPU
    data) are left out; empty if not measured."""
    reps = run["data"].get(arm, {}).get(phase, {})
    return {r: d[metric] for r, d in reps.items()
            if d.get(metric) is not None}


def timed_extent_counts(run):
    """{(arm, label): [FIEMAP extent counts]} of the timed reps' checks
    (meta extent_checks without the preparation's and the profiled rep's)."""
    out = {}
    for c in run["meta"].get("extent_checks") or []:
        if isinstance(c, dict) and c.get("rep") not in ("profiled",
                                                         "prepare"):
            out.setdefault((c.get("arm"), c.get("label")),
                           []).append(c.get("extents"))
    return out


def bw_by_rep(run, arm, phase):
    """{rep: bw_bytes} of one arm and phase (empty if not measured)."""
    return values_by_rep(run, arm, phase, "bw_bytes")


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


def metric_better(run, metric):
    """"higher" or "lower": which way the metric improves (the run's own
    metric definitions; throughput when unknown)."""
    return (run["metrics"].get(metric) or METRICS.get(metric)
            or {}).get("better", "higher")


def tracked_ratios(run, metric="bw_bytes"):
    """{ "A/B": {phase: (reps, ratios) or reason-str} } for every comparison
    of the run, in its order.

    The per-rep ratios A.metric[repN] / B.metric[repN] that
    reports.labstats.ratio() summarizes and the regression check and the
    history track. A str value means the ratio cannot be computed from
    this run: an arm is skipped or absent, or no rep has both arms (for a
    CPU metric: no CPU data).
    """
    out = {}
    for a, b, _ in run["comparisons"]:
        name = f"{a}/{b}"
        out[name] = {}
        reason = arm_absent_reason(run, a) or arm_absent_reason(run, b)
        for phase in run["phases"]:
            if reason:
                out[name][phase] = reason
                continue
            reps, ratios = L.paired_ratios(
                values_by_rep(run, a, phase, metric),
                values_by_rep(run, b, phase, metric))
            out[name][phase] = ((reps, ratios) if ratios else
                                f"no rep has {metric} for both {a} and {b}")
    return out


# ------------------------------------------------ collecting a guest run

def _read_tsv(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def shell_vars(path, before=None):
    """{name: value} of the variables the shell file PATH sets, resolved
    by bash the way the guest reads it (quotes, ${X:-default}, $((...)),
    comments), after sourcing BEFORE when given (bench.env before a
    workload.conf: the run's overrides). The variables of BEFORE are left
    out unless PATH sets them again."""
    script = ('set -a; [ -z "$2" ] || . "$2" >/dev/null 2>&1; '
              'before=$(env -0 | base64 -w0); . "$1" >/dev/null || exit 3; '
              'printf "%s\\0" "$before"; env -0')
    if not os.path.exists(path):
        return {}
    out = subprocess.run(
        ["env", "-i", "PATH=/usr/bin:/bin", "bash", "-c", script, "vars",
         path, before or ""], capture_output=True, check=False)
    if out.returncode != 0:
        raise RunError(f"bash could not source {path}: "
                       f"{out.stderr.decode(errors='replace').strip()}")
    first, _, rest = out.stdout.partition(b"\0")
    old = _env_pairs(base64.b64decode(first))
    new = _env_pairs(rest)
    skip = {"PATH", "PWD", "SHLVL", "_", "OLDPWD", "before"}
    with open(path, encoding="utf-8", errors="replace") as f:
        assigned = set(re.findall(
            r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=", f.read(), re.M))
    return {k: v for k, v in new.items()
            if k not in skip and (k in assigned or k not in old)}


def _env_pairs(raw):
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.decode(errors="replace").partition("=")
        if sep and key:
            out[key] = value
    return out


def _read_kv(path, strip_quotes=False):
    out = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.rstrip("\n").partition("=")
                if sep:
                    out[key] = value.strip('"') if strip_quotes else value
    return out


def _read_text(path):
    """A small file's text, stripped; "" if it is not there."""
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().strip()


def _guest_text(bench, name):
    path = os.path.join(bench, name)
    if not os.path.exists(path):
        raise RunError(f"the guest did not write {name} ({path})")
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().strip()


# What the guest records per arm in facts.tsv (arm, rep, key, value).
FACT_KEYS = ("fs", "mkfs", "mount_cmd", "mount_options", "tuning", "policy",
             "key_mode", "key_mode_source")


def arm_facts(rows):
    """{arm: {key: value}} from facts.tsv rows, the first rep's facts of
    each arm, and a list of disagreements between that arm's reps (an arm
    must be set up the same way every time)."""
    by_arm, problems = {}, []
    for row in rows:
        if len(row) != 4 or row[2] not in FACT_KEYS:
            raise RunError(f"facts.tsv: bad line {row!r}")
        arm, rep, key, value = row
        reps = by_arm.setdefault(arm, {})
        reps.setdefault(rep, {})[key] = value
    facts = {}
    for arm, reps in by_arm.items():
        first_rep, first = next(iter(reps.items()))
        for rep, f in reps.items():
            for key in ("mount_options", "key_mode", "policy", "tuning"):
                a, b = first.get(key, ""), f.get(key, "")
                if a != b:
                    problems.append(f"{arm}: {key} of rep {rep} ({b!r}) "
                                    f"differs from rep {first_rep} ({a!r})")
        facts[arm] = first
    return facts, problems


# The guest's record of the window each timed phase's CPU time covers:
# arm, rep, phase, io|process, CPU time around the whole fio process.
CPU_WINDOWS = "cpu-windows.tsv"


def run_kind(meta):
    """What made the run: "bench" (make bench), or the label of the set
    it is one boot of (bench/run-boots.sh: "nightly", "old", "new")."""
    boot = meta.get("boot") or {}
    return boot.get("boot_label") or "bench"


def injected_delay_ns(meta):
    """The per-lookup delay a run injected, in ns (0: none), from either
    of the keys runs have used."""
    if meta.get("injected_lookup_delay_ns"):
        return int(meta["injected_lookup_delay_ns"])
    return int(meta.get("injected_lookup_delay_us") or 0) * 1000


def _guest_lines(bench, name):
    path = os.path.join(bench, name)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def _order_rule(bench):
    """{"rule": rotate|random|fixed, "seed": N}; runs before the guest
    recorded it ran every rep in the fixed order."""
    words = " ".join(_guest_lines(bench, "order-rule")).split()
    if not words:
        return {"rule": "fixed", "seed": 0,
                "source": "not recorded: the guest ran A B C in every rep"}
    return {"rule": words[0], "seed": int(words[1]) if len(words) > 1
            and words[1].isdigit() else 0}


def cpu_window(bench):
    """{"window": io|process|mixed, "window_counts": {kind: phases}} from
    the guest's cpu-windows.tsv. io: fio's exec_prerun to exec_postrun
    (its I/O only); process: around the whole fio run (start and exit
    included). A guest without the file measured around the process."""
    path = os.path.join(bench, CPU_WINDOWS)
    if not os.path.exists(path):
        return {"window": "process", "window_counts": {},
                "window_source": "no cpu-windows.tsv: the guest measured "
                                 "around the whole fio process"}
    counts = {}
    for row in _read_tsv(path):
        if len(row) >= 4 and row[3] in ("io", "process"):
            counts[row[3]] = counts.get(row[3], 0) + 1
    kinds = sorted(counts)
    window = kinds[0] if len(kinds) == 1 else ("mixed" if kinds
                                               else "process")
    return {"window": window, "window_counts": counts,
            "window_source": CPU_WINDOWS}


def collect(vm, job, run):
    """Turn a benchmark VM's output into a raw run directory (format 3).

    vm: the runner's output (results/bench/ from the guest, run.info,
    console.log); job: the job that ran (bench.env, the arm files and the
    workload's files it shipped); run: the run directory to write
    (meta.json, raw/, profiles/, cpu.tsv, console.log). Only reads what the
    guest recorded and what the job shipped: nothing about an arm is
    computed on the host, and the run's spec (arms, comparisons, goals,
    metrics: build_spec) comes from the job's copy of bench/arms and of
    the workload, not from the working tree. Returns meta.
    """
    bench = os.path.join(vm, "results", "bench")
    fmt = _guest_text(bench, "format")
    if fmt != str(FORMAT):
        raise RunError(f"the guest wrote run format {fmt!r}, this host "
                       f"reads {FORMAT}: bench/ and reports/ disagree")
    env = shell_vars(os.path.join(job, "bench.env"))
    workload = env["WORKLOAD"]
    wl_dir = os.path.join(job, "bench", "workloads", workload)
    # as the guest reads it: sourced by bash after bench.env
    conf = shell_vars(os.path.join(wl_dir, "workload.conf"),
                      os.path.join(job, "bench.env"))
    job_arms = os.path.join(job, "bench", "arms")
    if not os.path.isdir(job_arms):
        raise RunError(f"the job has no arm files ({job_arms})")
    arm_specs = read_arm_specs(job_arms)
    facts, problems = arm_facts(_read_tsv(os.path.join(bench, "facts.tsv")))

    arms = {}
    for row in _read_tsv(os.path.join(bench, "arms.tsv")):
        if len(row) != 3 or row[1] not in ("measured", "skipped"):
            raise RunError(f"arms.tsv: bad line {row!r}")
        arm, status, reason = row
        if status == "skipped":
            arms[arm] = {"status": "skipped", "reason": reason}
            continue
        if arm not in facts:
            raise RunError(f"{arm} was measured, but the guest recorded "
                           "no facts for it (facts.tsv)")
        f = facts[arm]
        arms[arm] = {"status": "measured",
                     **{k: f.get(k, "") for k in FACT_KEYS},
                     "encrypted": bool(f.get("policy"))}

    # extents.tsv: arm, rep, label, extents, shared, min, max, min_shared,
    # path: one line per file the workload promised something about.
    # extent_counts keeps, per arm, the first file's count of each timed
    # rep; extent_checks has every line.
    extents, checks, profiled = {}, [], {}
    for row in _read_tsv(os.path.join(bench, "extents.tsv")):
        if len(row) != 9:
            raise RunError(f"extents.tsv: bad line {row!r}")
        arm, rep, label, count, shared, lo, hi, slo, path = row
        check = {"arm": arm,
                 "rep": rep if rep in ("profiled", "prepare") else int(rep),
                 "label": label, "extents": int(count),
                 "shared": int(shared or 0),
                 "min": int(lo) if lo.isdigit() else None,
                 "max": int(hi) if hi.isdigit() else None,
                 "min_shared": int(slo) if slo.isdigit() else 0,
                 "path": path}
        checks.append(check)
        if rep == "profiled":
            profiled.setdefault(arm, {})[label] = int(count)
        elif rep == "prepare":
            pass  # the preparation's own check; the reps check again
        elif not any(c["arm"] == arm and c["rep"] == check["rep"]
                     for c in checks[:-1]):
            extents.setdefault(arm, []).append(int(count))

    run_info = _read_kv(os.path.join(vm, "run.info"))
    jobfiles = {}
    for name in sorted(os.listdir(wl_dir)):
        with open(os.path.join(wl_dir, name), encoding="utf-8") as f:
            jobfiles[name] = f.read()
    saves = [{"arm": a, "what": w, "kib": int(k), "seconds": int(t)}
             for a, w, k, t in _read_tsv(os.path.join(bench, "saves.tsv"))]
    phases = _guest_text(bench, "phases").split()
    # the phases that ran a command of the workload, not fio (a guest
    # before command phases wrote no such file)
    command_phases = _read_text(os.path.join(bench,
                                             "command-phases")).split()
    # CPU time per timed phase (cpu.tsv: arm, rep, phase, ns or ticks);
    # a guest that could not read /proc/stat wrote none
    cpu_tsv = os.path.join(bench, "cpu.tsv")
    cpu = None
    if os.path.exists(cpu_tsv) and os.path.getsize(cpu_tsv) > 0:
        hz = _read_text(os.path.join(bench, "user-hz"))
        source = _read_text(os.path.join(bench, "cpu-source")) or "stat"
        # USER_HZ, the unit of /proc/stat, is 100 on x86 whatever HZ is
        cpu = {"file": "cpu.tsv",
               "source": source,
               "units_per_s": (10 ** 9 if source == "schedstat" else
                               int(hz) if hz.isdigit() and int(hz) > 0
                               else 100),
               "user_hz": int(hz) if hz.isdigit() and int(hz) > 0 else 100,
               "user_hz_source": ("getconf CLK_TCK in the guest"
                                  if hz.isdigit() and int(hz) > 0 else
                                  "not recorded: 100, USER_HZ of x86"),
               "lines": len(_read_tsv(cpu_tsv)),
               **cpu_window(bench)}
    meta = {
        "format": FORMAT,
        # what the run needs to be read later, from the job that ran
        "spec": build_spec(arm_specs, workload, conf,
                           [p for p in phases if p not in command_phases],
                           "job/bench/arms (the arm files the guest ran)"),
        "kernel": kernel_of(run_info, env),
        "cpu": cpu,
        # how reps were made: "once" (each arm prepared once, its
        # filesystem restored before every rep) or "each" (fresh mkfs and
        # preparation per rep); saves: what was saved and restored
        "prep": _guest_text(bench, "prep-mode"),
        "saves": saves,
        "workload": workload,
        "date": run_info.get("date", ""),
        "reps": int(env["REPS"]),
        "description": conf.get("description", ""),
        # the guest writes the phases it ran (a workload may compute them)
        "phases": phases,
        # those of them that ran the workload's command, not fio: their
        # results are raw/<arm>/rep<N>/<phase>.tsv (read_command_result)
        "command_phases": command_phases,
        "profile_phase": _guest_text(bench, "profile-phase"),
        "arms": arms,
        "arm_fact_problems": problems,
        "order": [[arm, int(rep)] for arm, rep in
                  _read_tsv(os.path.join(bench, "order.tsv"))],
        "run_info": run_info,
        "fio_version": _guest_text(bench, "fio-version"),
        "jobfiles": jobfiles,
        "extent_counts": extents,
        "extent_checks": checks,
        "profiled_extent_counts": profiled,
        # what the run set of the generic extent bounds and of the
        # workload's own variables (PARAMS), as bench/run-bench.sh
        # forwarded them
        "overrides": {k: env[k] for k in ["MIN_EXTENTS", "MAX_EXTENTS"]
                      + conf.get("PARAMS", "").split() if k in env},
        "min_extents": int(_guest_text(bench, "min-extents")),
        # The workload's own parameters as the guest resolved them (PARAMS
        # in its workload.conf); {} for runs from before they were kept.
        "workload_params": _read_kv(os.path.join(bench, "params")),
        # A deliberate slowdown (fscrypto.extent_lookup_delay_ns), used to
        # show that the regression checks catch regressions and to measure
        # the smallest one they catch; 0 in real runs. Runs before
        # 2026-12-07 10:00 UTC recorded injected_lookup_delay_us instead
        # (injected_delay_ns reads both).
        "injected_lookup_delay_ns": int(env.get("INJECT_LOOKUP_DELAY_NS",
                                                "0") or 0),
        # The order of the arms in each rep: "rotate", "random" (with its
        # seed) or "fixed" (every run before 2026-12-07); the order that
        # ran is "order".
        "order_rule": _order_rule(bench),
        # The phases whose CPU window ends after a sync of the filesystem
        # (those that write: the transaction commit is in their window).
        "window_sync_phases": _guest_lines(bench, "window-sync-phases"),
        # A run that is one boot of a set (bench/run-boots.sh: a nightly of
        # several boots, or make bench-ab): the set, its label (the kernel's
        # role: old, new, or the nightly's one label) and the boot's number.
        "boot": {k.lower(): env[k] for k in ("SET_ID", "BOOT_LABEL",
                                             "BOOT_INDEX") if k in env},
    }
    os.makedirs(run, exist_ok=True)
    for sub in ("raw", "profiles"):
        src = os.path.join(bench, sub)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(run, sub), dirs_exist_ok=True)
    shutil.copy(os.path.join(vm, "console.log"),
                os.path.join(run, "console.log"))
    if cpu:
        shutil.copy(cpu_tsv, os.path.join(run, "cpu.tsv"))
        if os.path.exists(os.path.join(bench, CPU_WINDOWS)):
            shutil.copy(os.path.join(bench, CPU_WINDOWS),
                        os.path.join(run, CPU_WINDOWS))
    with open(os.path.join(run, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    return meta
