"""The run model of the benchmark lab: the one owner of what a run is.

A raw run directory (build/bench/<stamp>-<workload>/) is written once by
reports.lab.collect from what the guest recorded (bench/guest/lib.sh, run
format FORMAT) and read by load_run() into a Run; everything else
(reports.lab.generate, reports.lab.gate, reports.lab.history) reads runs only as a
Run, whose parts are typed (dataclasses, attributes rather than keys):

  - Arm: each arm, in display order, with what the guest did for it (mkfs
    command, mount options as /proc/mounts showed them, key mode the
    kernel reported, tuning), or why it was not measured;
  - RepValue: one rep of one fio phase of one arm (fio json+ of
    raw/<arm>/rep<N>/<phase>.json, and the guest's CPU time of the phase
    from cpu.tsv), in run.data[arm][phase][rep];
  - Comparison: A against its reference B; the first is run.main, and
    Run.values() gives the per-rep values that reports.lab.labstats.ratio()
    pairs by rep; Goals, Kernel and CpuInfo: what the run recorded of
    them;
  - the results of a workload's command phases (run.commands: the
    "name<TAB>value" lines of raw/<arm>/rep<N>/<phase>.tsv), which are not
    fio phases: run.phases has the fio phases only, and the generic
    report never sees the others (the workload's module reads them).

A run describes itself (format 3): reports.lab.collect writes into meta.json
the arm definitions that ran (the job's copy of bench/arms/, with their
order, references and comparisons: build_spec), the workload's analysis
kind and goals, the metric definitions, the ratio's definition and the
kernel (release, series hash, tree commit) and lab commit. load_run()
reads them from there only: nothing of bench/arms or bench/workloads in
the working tree is read when a run is rendered, checked or drawn in the
history.

Older runs (format 2) lack that description; load_run() reads them with
the fallbacks of spec_of_format2() (the arm files the run directory's
job/ kept, else the format-2 arm table frozen below; goals and metrics
of format 2; no CPU data) and lists each fallback in run.spec_notes.
The formats are described in reports/README.md.
"""

import importlib
import json
import os
import re
from dataclasses import dataclass, field, fields, replace

from reports.lab import labstats as L

# The run format this lab writes: the guest's bench/format and meta.json's
# "format". Bump both sides together when either changes. Format 2 runs
# are still read (see spec_of_format2); a guest of another format is not.
FORMAT = 3
READS_FORMATS = (2, 3)

# The working tree's arm and workload definitions. Read only by those
# that make a run (synthrun; reports.lab.collect reads the job's copy),
# never when a run is loaded: tests replace these to prove it.
# The top of the clone: this file is reports/lab/runmodel.py.
LAB_TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
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
# plug-in module reports/lab/wl_<kind>.py (bench/README.md, "Adding a
# workload"). A module defines:
#   KIND                         the kind, as in ANALYSIS
#   owns_phases(phases)          bool: is a run of format 2, which did not
#                                record its kind, of this kind?
#   judged_phases(phases)        of the run's fio phases, those judged
#                                against the goals (None: all)
#   analyze(run, res)            its results, JSON-able: res["workload"]
#   plot(run, res, out_dir, colors)  {plot name: path}
#   render(doc, run, res, plots) its report section(s)
# where run is a Run (below: attributes, not keys) and res the analysis'
# dict (results.json; its "comparisons" and "verdicts" are the records
# analysis.PhaseComparison and Verdict); optionally legacy_applies(run):
# bool, for runs of another kind that carry its data (scaling.json of the
# old lab), and not_judged_text(run, phases): why phases are not judged.
PLAIN_ANALYSIS = "phases"
_HERE = os.path.dirname(os.path.abspath(__file__))


def analysis_kinds():
    """"phases" and the kinds of the plug-in modules reports/lab/wl_*.py."""
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
                       f"reports/lab/wl_{kind}.py (kinds: "
                       f"{', '.join(analysis_kinds())})")
    return importlib.import_module(f"reports.lab.wl_{kind}")


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

# The ratio of A over B (reports.lab.labstats.ratio), as recorded in a run.
RATIO_DEFINITION = {
    "name": "geometric mean of per-rep ratios",
    "definition": "r_N = A[rep N] / B[rep N] for the reps both arms ran "
                  "(interleaved, back to back); ratio = exp(mean(log r_N))",
    "ci": "95% Student t-interval of mean(log r_N), n - 1 degrees of "
          "freedom, exponentiated (before 2026-12-07: a percentile "
          "bootstrap, which covered about 84% with 5 pairs); conditional "
          "on the run's one boot; not conclusive with fewer than "
          f"{L.MIN_PAIRED_REPS} pairs",
    "function": "reports.lab.labstats.ratio",
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
    io_bytes > 0 (the larger if both). Returns a RepValue without CPU
    time; raises RunError.
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
    return RepValue(
        file=rel, direction=direction,
        both_directions=min(moved.values()) > 0, jobs=len(jobs),
        fio_version=obj.get("fio version"),
        bw_bytes=float(side.get("bw_bytes", 0)),
        iops=float(side.get("iops", 0)),
        io_bytes=int(side.get("io_bytes", 0)),
        total_ios=int(side.get("total_ios") or clat.get("N") or 0),
        runtime_ms=side.get("runtime"), clat_n=clat.get("N"),
        clat_mean_ns=clat.get("mean"),
        fio_percentiles_ns=clat.get("percentile") or {},
        bins=({int(k): int(v) for k, v in bins.items()}
              if isinstance(bins, dict) and bins else None))


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
    judged = mod.judged_phases(list(phases)) if mod else None
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
                       f"of its own needs reports/lab/wl_{analysis}.py)")
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
        source = "format-2 arm table (reports/lab/runmodel.py FORMAT2_ARMS)"
        notes.append("format 2 without job/bench/arms/: arm order, "
                     "references and descriptions are the lab's arm table "
                     "of format 2 (reports/lab/runmodel.py FORMAT2_ARMS)")
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


# ------------------------------------------------ the run, as loaded

@dataclass(frozen=True)
class Comparison:
    """Arm A against its reference arm B (A's REFERENCE), with the label
    A's arm file gives the comparison."""
    a: str
    b: str
    label: str = ""

    @property
    def name(self):
        """"A/B", as results.json, the check and the history name it."""
        return f"{self.a}/{self.b}"


@dataclass(frozen=True)
class Goals:
    """The goals of the main comparison as the run recorded them
    (spec.workload.goals, see build_spec). judged_phases None: every
    phase; a goal None: the run set none. recorded: that JSON, which
    results.json repeats."""
    decide: str = None
    cpu_per_mib_max: float = None
    bw_min: float = None
    p99_max: float = None
    judged_phases: list = None
    not_judged_phases: list = field(default_factory=list)
    recorded: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d):
        return cls(d.get("decide"), d.get("cpu_per_mib_max"),
                   d.get("bw_min"), d.get("p99_max"), d.get("judged_phases"),
                   d.get("not_judged_phases") or [], d)


@dataclass(frozen=True)
class Kernel:
    """The kernel and lab a run used (meta.json "kernel", kernel_of); None
    where unknown. recorded: that JSON, which results.json repeats."""
    release: str = None
    linux_source: str = None
    series_hash: str = None
    tree_head: str = None
    config_sha256: str = None
    flavor: str = None
    lab_commit: str = None
    lab_dirty: bool = None
    recorded: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d):
        return cls(*(d.get(f.name) for f in fields(cls)[:-1]), recorded=d)

    @property
    def base(self):
        """"MAJOR.MINOR" of the kernel (kernel_base)."""
        return kernel_base(self.recorded)


# Where a run's CPU times come from (meta cpu.source): what one unit of
# cpu.tsv is, and how the report names it.
CPU_SOURCES = {
    "schedstat": "/proc/schedstat rq_cpu_time summed over CPUs, ns",
    "stat": "/proc/stat user+nice+system+irq+softirq, USER_HZ ticks",
}


@dataclass(frozen=True)
class CpuInfo:
    """How a run took its CPU times (meta.json "cpu"): the source (a key
    of CPU_SOURCES), units of cpu.tsv per second (None: unusable), the
    window recorded (io, process or mixed; None: not recorded, which was
    the process window) with its count of phases per kind."""
    source: str = "stat"
    units_per_s: float = None
    window: str = None
    window_counts: dict = field(default_factory=dict)
    user_hz_source: str = None

    @classmethod
    def from_json(cls, d):
        """Runs before cpu.source counted /proc/stat ticks of
        cpu.user_hz."""
        source = d.get("source", "stat")
        per_s = d.get("units_per_s", d.get("user_hz"))
        usable = (source in CPU_SOURCES and isinstance(per_s, (int, float))
                  and per_s > 0)
        return cls(source, per_s if usable else None, d.get("window"),
                   d.get("window_counts") or {}, d.get("user_hz_source"))

    @property
    def measured_window(self):
        """The window the CPU times cover: io, mixed or process."""
        return self.window or "process"


@dataclass(frozen=True)
class Arm:
    """One arm of a run as the guest recorded it (meta.json "arms"): its
    status (measured, skipped, or what an older run wrote; None: none),
    why it was not measured, and the facts of its setup (FACT_KEYS of
    reports.lab.collect; None where none was recorded). recorded: that JSON,
    which results.json repeats."""
    name: str
    status: str = "measured"
    reason: str = None
    fs: str = None
    mkfs: str = None
    mount_cmd: str = None
    mount_options: str = None
    tuning: str = None
    policy: str = None
    key_mode: str = None
    key_mode_source: str = None
    encrypted: bool = True
    recorded: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, name, d):
        d = d if isinstance(d, dict) else {}
        facts = ("fs", "mkfs", "mount_cmd", "mount_options", "tuning",
                 "policy", "key_mode", "key_mode_source")
        return cls(name, d.get("status"), d.get("reason"),
                   *(d.get(k) for k in facts), d.get("encrypted", True), d)

    @property
    def measured(self):
        return self.status == "measured"

    @property
    def why_not_measured(self):
        """The reason the report gives for an arm without numbers."""
        reason = self.reason or "no reason given"
        status = "?" if self.status is None else self.status
        return (reason if status == "skipped"
                else f"status '{status}': {reason}")


@dataclass(frozen=True)
class RepValue:
    """One rep of one phase of one arm: the numbers of its fio json+
    output (parse_fio: jobs[0], the side that moved bytes) and its CPU
    time (cpu_s, per MiB moved, per I/O; None without CPU data)."""
    file: str = ""
    direction: str = "read"
    both_directions: bool = False
    jobs: int = 1
    fio_version: str = None
    bw_bytes: float = 0.0
    iops: float = 0.0
    io_bytes: int = 0
    total_ios: int = 0
    runtime_ms: float = None
    clat_n: int = None
    clat_mean_ns: float = None
    fio_percentiles_ns: dict = field(default_factory=dict)
    bins: dict = None
    cpu_s: float = None
    cpu_per_mib: float = None
    cpu_per_op: float = None

    def with_cpu(self, cpu_s):
        """This rep with its CPU time and the costs per MiB and per I/O."""
        mib = self.io_bytes / MIB
        ok = cpu_s is not None
        return replace(
            self, cpu_s=cpu_s,
            cpu_per_mib=cpu_s / mib if ok and mib > 0 else None,
            cpu_per_op=(cpu_s / self.total_ios if ok and self.total_ios > 0
                        else None))


@dataclass
class Run:
    """A loaded run (load_run): what it describes (spec: arms, comparisons
    in their order, goals, analysis kind, metrics, kernel), what the guest
    recorded of its course, and the numbers of every measured arm:
    data[arm][phase][rep] (fio phases) and commands[arm][phase][rep]
    ({name: value} of a command phase, read_command_result). warnings
    collects the data problems that loading and analysing it find; meta
    and spec are the JSON as recorded, for results.json."""
    dir: str = ""
    format: int = FORMAT
    meta: dict = field(default_factory=dict, repr=False)
    spec: dict = field(default_factory=dict, repr=False)
    spec_notes: list = field(default_factory=list)
    comparisons: list = field(default_factory=list)
    arm_order: list = field(default_factory=list)
    arm_definitions: dict = field(default_factory=dict)
    goals: Goals = field(default_factory=Goals)
    analysis: str = PLAIN_ANALYSIS
    metrics: dict = field(default_factory=dict)
    kernel: Kernel = field(default_factory=Kernel)
    phases: list = field(default_factory=list)
    command_phases: list = field(default_factory=list)
    arms: dict = field(default_factory=dict)
    data: dict = field(default_factory=dict)
    commands: dict = field(default_factory=dict)
    cpu: CpuInfo = None
    has_cpu: bool = False
    warnings: list = field(default_factory=list)
    # what the guest and the host recorded of the run (meta.json)
    workload: str = "?"
    description: str = ""
    date: str = None
    reps: int = None
    run_info: dict = field(default_factory=dict)
    order: list = field(default_factory=list)
    order_rule: str = "fixed"
    prep: str = None
    saves: list = field(default_factory=list)
    fio_version: str = None
    jobfiles: dict = field(default_factory=dict)
    profile_phase: str = None
    profile_passes: int = 1
    workload_params: dict = field(default_factory=dict)
    extent_checks: list = field(default_factory=list)
    extent_counts: dict = None
    min_extents: int = None
    profiled_extent_counts: dict = field(default_factory=dict)
    arm_fact_problems: list = field(default_factory=list)
    injected_delay_ns: int = 0
    kind: str = "bench"
    # folded perf stacks per arm, which the analysis keeps out of
    # results.json for the flame graphs
    folded: dict = field(default_factory=dict, repr=False)

    @property
    def main(self):
        """The main comparison (the first), None without any."""
        return self.comparisons[0] if self.comparisons else None

    @property
    def reference(self):
        """{A: B}: each arm's reference arm."""
        return {c.a: c.b for c in self.comparisons}

    @property
    def measured(self):
        return [a for a, arm in self.arms.items() if arm.measured]

    @property
    def not_measured(self):
        """{arm: why} of the arms without numbers."""
        return {a: arm.why_not_measured for a, arm in self.arms.items()
                if not arm.measured}

    def ordered(self, names):
        """names in the run's display order (its spec's arm order), then
        the others sorted."""
        names = list(names)
        return ([a for a in self.arm_order if a in names]
                + sorted(a for a in names if a not in self.arm_order))

    def definition(self, arm):
        """{KEY: value} of an arm's file as the run recorded it."""
        return self.arm_definitions.get(arm) or {}

    def values(self, arm, phase, metric):
        """{rep: value} of one per-rep metric (bw_bytes, iops, cpu_s,
        cpu_per_mib, cpu_per_op) of one arm and phase; reps without it
        (no CPU data) are left out; empty if not measured."""
        reps = self.data.get(arm, {}).get(phase, {})
        return {r: getattr(d, metric) for r, d in reps.items()
                if getattr(d, metric) is not None}

    def bins(self, arm, phase):
        """Per-rep latency histograms of one arm and phase (reps with
        bins), in rep order."""
        reps = self.data.get(arm, {}).get(phase, {})
        return [d.bins for _, d in sorted(reps.items()) if d.bins]

    def command_values(self, arm, phase, name):
        """{rep: value} of one number of a command phase's results (one
        arm); reps without it, or where it is not a number, are left
        out."""
        reps = self.commands.get(arm, {}).get(phase, {})
        return {r: d[name] for r, d in reps.items()
                if isinstance(d.get(name), (int, float))
                and not isinstance(d.get(name), bool)}

    def direction(self, phase):
        """'read' or 'write' from the data; from the phase name if no
        data."""
        seen = [d.direction for arm in self.measured
                for d in self.data[arm][phase].values()]
        if seen:
            return max(set(seen), key=seen.count)
        return "write" if "write" in phase else "read"

    def absent_reason(self, arm):
        """Why arm has no numbers in this run, or None if it has some."""
        if arm not in self.arms:
            return f"{arm} is not an arm of this run"
        if not self.arms[arm].measured:
            return f"{arm} skipped: {self.arms[arm].why_not_measured}"
        return None

    def timed_extent_counts(self):
        """{(arm, label): [FIEMAP extent counts]} of the timed reps'
        checks (extent_checks without the preparation's and the profiled
        rep's)."""
        out = {}
        for c in self.extent_checks:
            if c.get("rep") not in ("profiled", "prepare"):
                out.setdefault((c.get("arm"), c.get("label")),
                               []).append(c.get("extents"))
        return out

    def module(self):
        """The module that analyses the run: its kind's, else one whose
        legacy_applies(run) says the run carries its data; None for
        neither."""
        mod = workload_module(self.analysis)
        if mod is not None:
            return mod
        for kind in analysis_kinds()[1:]:
            m = workload_module(kind)
            if getattr(m, "legacy_applies", None) and m.legacy_applies(self):
                return m
        return None


def tracked_ratios(run, metric="bw_bytes"):
    """{ "A/B": {phase: (reps, ratios) or reason-str} } for every comparison
    of the run, in its order.

    The per-rep ratios A.metric[repN] / B.metric[repN] that
    reports.lab.labstats.ratio() summarizes and the regression check and the
    history track. A str value means the ratio cannot be computed from
    this run: an arm is skipped or absent, or no rep has both arms (for a
    CPU metric: no CPU data).
    """
    out = {}
    for c in run.comparisons:
        out[c.name] = {}
        reason = run.absent_reason(c.a) or run.absent_reason(c.b)
        for phase in run.phases:
            if reason:
                out[c.name][phase] = reason
                continue
            reps, ratios = L.paired_ratios(run.values(c.a, phase, metric),
                                           run.values(c.b, phase, metric))
            out[c.name][phase] = (
                (reps, ratios) if ratios else
                f"no rep has {metric} for both {c.a} and {c.b}")
    return out


# ------------------------------------------------ reading a run directory

def read_tsv(path):
    """The tab-separated rows of a file of the guest; [] if it is not
    there."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def rep_dirs(arm_dir):
    """{rep number: path} of the rep<N> directories of one arm."""
    out = {}
    if os.path.isdir(arm_dir):
        for name in os.listdir(arm_dir):
            m = re.fullmatch(r"rep(\d+)", name)
            if m and os.path.isdir(os.path.join(arm_dir, name)):
                out[int(m.group(1))] = os.path.join(arm_dir, name)
    return dict(sorted(out.items()))


def read_cpu(run_dir, meta, warnings):
    """{(arm, rep, phase): CPU seconds} from RUN_DIR/cpu.tsv (arm, rep,
    phase, CPU time the guest recorded over each timed phase, in the unit
    of meta cpu.source: ns of /proc/schedstat or ticks of /proc/stat);
    {} when the run has none."""
    info = meta.get("cpu")
    path = os.path.join(run_dir, "cpu.tsv")
    if not isinstance(info, dict) or not os.path.exists(path):
        return {}
    clock = CpuInfo.from_json(info)
    if clock.units_per_s is None:
        warnings.append(f"cpu.tsv: no usable unit in meta.json (source "
                        f"{clock.source!r}, {info!r})")
        return {}
    out = {}
    for row in read_tsv(path):
        if len(row) != 4 or not row[1].isdigit() or not row[3].isdigit():
            warnings.append(f"cpu.tsv: bad line {row!r}, ignored")
            continue
        out[(row[0], int(row[1]), row[2])] = int(row[3]) / clock.units_per_s
    return out


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


def read_meta(run_dir):
    """meta.json of a run of a format this lab reads, checked for the
    phases and arms every run has."""
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
    phases, arms = meta.get("phases"), meta.get("arms")
    if not isinstance(phases, list) or not phases:
        raise RunError(f"{run_dir}/meta.json: 'phases' missing or empty")
    if not isinstance(arms, dict) or not arms:
        raise RunError(f"{run_dir}/meta.json: 'arms' missing or empty")
    return meta


def spec_of(run_dir, meta):
    """(spec, notes, kernel JSON) of a run: recorded (format 3), or the
    fallbacks of spec_of_format2."""
    if meta["format"] == 2:
        spec, notes = spec_of_format2(run_dir, meta)
        return spec, notes, kernel_of(meta.get("run_info") or {})
    spec = meta.get("spec")
    if not isinstance(spec, dict) or not isinstance(
            spec.get("arms"), dict) or not isinstance(
            spec.get("comparisons"), list) or not isinstance(
            spec.get("workload"), dict):
        raise RunError(f"{run_dir}/meta.json: format {meta['format']} "
                       "without a usable 'spec' (arms, comparisons, "
                       "workload)")
    return spec, [], meta.get("kernel") or kernel_of(meta.get("run_info")
                                                     or {})


def run_of_meta(run_dir, meta):
    """The Run that meta.json describes, without the numbers of raw/."""
    spec, notes, kernel = spec_of(run_dir, meta)
    command = [p for p in meta.get("command_phases") or []
               if p in meta["phases"]]
    cpu = meta.get("cpu") if meta["format"] >= 3 else None
    run = Run(
        dir=run_dir, format=meta["format"], meta=meta, spec=spec,
        spec_notes=notes,
        comparisons=[Comparison(c["a"], c["b"], c.get("label", ""))
                     for c in spec["comparisons"]],
        arm_order=list(spec.get("arm_order") or spec["arms"]),
        arm_definitions=spec["arms"],
        goals=Goals.from_json(spec["workload"].get("goals") or {}),
        analysis=spec["workload"].get("analysis", PLAIN_ANALYSIS),
        metrics=spec.get("metrics") or {}, kernel=Kernel.from_json(kernel),
        phases=[p for p in meta["phases"] if p not in command],
        command_phases=command,
        cpu=CpuInfo.from_json(cpu) if isinstance(cpu, dict) else None,
        workload=meta.get("workload", "?"),
        description=meta.get("description", ""),
        date=meta.get("date"), reps=meta.get("reps"),
        run_info=meta.get("run_info") or {},
        order=[(o[0], int(o[1])) for o in meta.get("order") or []
               if isinstance(o, list) and len(o) == 2],
        order_rule=(meta.get("order_rule") or {}).get("rule", "fixed"),
        prep=meta.get("prep"), saves=meta.get("saves") or [],
        fio_version=meta.get("fio_version"),
        jobfiles=meta.get("jobfiles") or {},
        profile_phase=meta.get("profile_phase") or None,
        profile_passes=meta.get("profile_passes") or 1,
        workload_params=meta.get("workload_params") or {},
        extent_checks=[c for c in meta.get("extent_checks") or []
                       if isinstance(c, dict)],
        extent_counts=meta.get("extent_counts"),
        min_extents=meta.get("min_extents"),
        profiled_extent_counts=meta.get("profiled_extent_counts") or {},
        arm_fact_problems=meta.get("arm_fact_problems") or [],
        injected_delay_ns=injected_delay_ns(meta), kind=run_kind(meta))
    run.arms = {a: Arm.from_json(a, meta["arms"][a])
                for a in run.ordered(meta["arms"])}
    return run


def load_run(run_dir):
    """The Run of a run directory: meta.json, its spec and every raw file
    of the measured arms. Missing or broken raw files are warnings, not
    errors; a missing or broken meta.json is a RunError."""
    meta = read_meta(run_dir)
    run = run_of_meta(run_dir, meta)
    cpu = read_cpu(run_dir, meta, run.warnings) if run.format >= 3 else {}
    run.has_cpu = bool(cpu)
    no_cpu = []
    for arm in run.measured:
        reps = rep_dirs(os.path.join(run_dir, "raw", arm))
        if not reps:
            run.warnings.append(f"{arm}: measured per meta.json, but "
                                f"raw/{arm}/rep<N>/ has no data")
        run.commands[arm] = {p: {} for p in run.command_phases}
        run.data[arm] = {p: {} for p in run.phases}
        for rep, rdir in reps.items():
            read_commands(run, arm, rep, rdir)
            for phase in run.phases:
                d = read_rep(run, arm, rep, rdir, phase)
                if d is None:
                    continue
                d = d.with_cpu(cpu.get((arm, rep, phase)))
                if cpu and d.cpu_s is None:
                    no_cpu.append(f"{arm} rep{rep} {phase}")
                run.data[arm][phase][rep] = d
        if reps and isinstance(run.reps, int) and len(reps) != run.reps:
            run.warnings.append(f"{arm}: {len(reps)} rep directories, "
                                f"meta.json says reps={run.reps}")
    if no_cpu:
        run.warnings.append(
            f"cpu.tsv: no CPU time for {len(no_cpu)} measured phase(s): "
            f"{', '.join(no_cpu[:6])}" + (", ..." if len(no_cpu) > 6
                                           else ""))
    raw = os.path.join(run_dir, "raw")
    for name in sorted(os.listdir(raw)) if os.path.isdir(raw) else []:
        if name not in run.arms:
            run.warnings.append(f"raw/{name}/ is not an arm of meta.json; "
                                "ignored")
    return run


def read_commands(run, arm, rep, rdir):
    """The results of one rep's command phases into run.commands."""
    for phase in run.command_phases:
        rel = f"raw/{arm}/rep{rep}/{phase}.tsv"
        path = os.path.join(rdir, f"{phase}.tsv")
        if not os.path.exists(path):
            run.warnings.append(f"missing {rel}")
            continue
        d = read_command_result(path)
        if not d:
            run.warnings.append(f"{rel}: no name<TAB>value line")
            continue
        run.commands[arm][phase][rep] = {"file": rel, **d}


def read_rep(run, arm, rep, rdir, phase):
    """The RepValue of one rep's fio phase, None if it is missing or
    broken; what it lacks or has too much of goes to run.warnings."""
    rel = f"raw/{arm}/rep{rep}/{phase}.json"
    path = os.path.join(rdir, f"{phase}.json")
    if not os.path.exists(path):
        run.warnings.append(f"missing {rel}")
        return None
    try:
        d = parse_fio(path, rel)
    except RunError as e:
        run.warnings.append(str(e).replace(run.dir.rstrip("/") + "/", ""))
        return None
    if d.jobs > 1:
        run.warnings.append(f"{rel}: {d.jobs} jobs, only jobs[0] is used")
    if d.both_directions:
        run.warnings.append(f"{rel}: both reads and writes; only "
                            f"{d.direction}s are used")
    if d.bins is None:
        run.warnings.append(f"{rel}: no clat_ns bins (not json+?): no "
                            "latency percentiles")
    return d


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
