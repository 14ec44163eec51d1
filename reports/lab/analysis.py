"""What the report says, as numbers: per-arm summaries, comparisons with
t-interval CIs and significance, goal verdicts (honest about too few
reps), fragmentation checks, profiles, memory and scaling. analyze()
returns one dict (results.json: generate.jsonable writes it) whose
comparisons and verdicts are typed records, PhaseComparison and Verdict,
each with its to_json() and from_json(); statistics are in
reports.lab.labstats.
"""

import os
from dataclasses import dataclass, fields, replace

from reports.lab import labstats as L
from reports.lab.fmt import fmt_ci, isnum
from reports.lab.profiles import (
    derivation_count, key_work, load_profiles, memory_analysis,
    profiled_extents, slab_selection)
from reports.lab.runmodel import Comparison


PERCENTILES = (50, 99, 99.9)
DEFAULT_THRESHOLD = 5.0

# The per-rep metrics every comparison gets a ratio of (labstats.ratio).
RATIO_METRICS = ("bw_bytes", "cpu_per_mib", "cpu_per_op")
# What results.json has of each rep (a runmodel.RepValue's fields).
REP_KEYS = ("file", "direction", "bw_bytes", "iops", "io_bytes", "total_ios",
            "runtime_ms", "clat_n", "clat_mean_ns", "fio_percentiles_ns",
            "cpu_s", "cpu_per_mib", "cpu_per_op")

# A comparison on a phase is measured, or not (an arm skipped, no data).
MEASURED, NOT_MEASURED = "measured", "not measured"
# A verdict's status (reports/README.md, "Report"). Three values judge a
# goal by the 95% CI: met (all of it on the goal's side), not met (all of
# it on the other), undecided (it contains the goal). The others judge
# nothing and say why: not conclusive (too few reps for a CI), not
# measured (an arm skipped, no data), not judged (phases the workload
# keeps out of the goals).
MET, NOT_MET, UNDECIDED = "met", "not met", "undecided"
NOT_CONCLUSIVE, NOT_JUDGED = "not conclusive", "not judged"
JUDGED = (MET, NOT_MET, UNDECIDED)
STATUSES = JUDGED + (NOT_CONCLUSIVE, NOT_MEASURED, NOT_JUDGED)


@dataclass(frozen=True)
class PhaseComparison:
    """One comparison (a runmodel.Comparison: A against its reference B)
    on one phase, as results.json "comparisons" holds it. Measured: n_a
    and n_b reps, the ratio of each per-rep metric (values_ratio's dicts:
    bw throughput, cpu CPU cost per MiB, cpu_per_op per I/O; cpu and
    cpu_per_op None without CPU data) and of the latency percentiles
    (latency: {"p50", "p99", "p99.9": ratio dict}). Not measured: why
    (reason)."""
    comparison: Comparison
    phase: str
    status: str
    reason: str = None
    n_a: int = None
    n_b: int = None
    bw: dict = None
    cpu: dict = None
    cpu_per_op: dict = None
    latency: dict = None

    a = property(lambda self: self.comparison.a)
    b = property(lambda self: self.comparison.b)
    label = property(lambda self: self.comparison.label)
    name = property(lambda self: self.comparison.name)

    @property
    def measured(self):
        return self.status == MEASURED

    @property
    def per_rep_ratio(self):
        """{rep: A / B} of the throughput, in rep order."""
        return self.bw["per_rep_ratio"] if self.bw else {}

    def to_json(self):
        """The record of results.json, its keys in the order reports
        have always written them."""
        head = {"a": self.a, "b": self.b, "label": self.label,
                "phase": self.phase, "status": self.status}
        if not self.measured:
            return {**head, "reason": self.reason}
        return {**head, "n_a": self.n_a, "n_b": self.n_b, "bw": self.bw,
                "cpu": self.cpu, "cpu_per_op": self.cpu_per_op,
                "per_rep_ratio": self.per_rep_ratio,
                "latency": self.latency}

    @classmethod
    def from_json(cls, d):
        """A record of results.json (per_rep_ratio is the bw ratio's)."""
        return cls(Comparison(d["a"], d["b"], d.get("label", "")),
                   d["phase"], d["status"], d.get("reason"), d.get("n_a"),
                   d.get("n_b"), d.get("bw"), d.get("cpu"),
                   d.get("cpu_per_op"), d.get("latency"))


@dataclass(frozen=True)
class Verdict:
    """One line of the verdicts: a goal of the main comparison judged on
    one phase (metric, goal and its text, decides, basis: "cpu_per_mib",
    or "fallback" for a run without CPU data; the ratio's value and CI and
    whether it is conclusive; beside: {metric: status} of the ratios shown
    beside a CPU verdict, None where their goal is not stated), or a note
    about the run (phase "-", with phases: those it says are not judged).
    status is one of STATUSES; text is the line the report shows. A field
    None is left out of results.json."""
    status: str
    text: str
    metric: str = "-"
    phase: str = "-"
    phases: list = None
    goal: float = None
    goal_text: str = None
    decides: bool = None
    basis: str = None
    value: float = None
    ci_lo: float = None
    ci_hi: float = None
    conclusive: bool = None
    beside: dict = None

    # the order of results.json's keys
    JSON_KEYS = ("metric", "phase", "phases", "goal", "goal_text", "decides",
                 "basis", "status", "text", "value", "ci_lo", "ci_hi",
                 "conclusive", "beside")

    @property
    def judged(self):
        """met, not met or undecided: a goal judged by its CI."""
        return self.status in JUDGED

    @property
    def note(self):
        """A line about the run, not about one phase."""
        return self.phase in (None, "-")

    def to_json(self):
        return {k: getattr(self, k) for k in self.JSON_KEYS
                if getattr(self, k) is not None}

    @classmethod
    def from_json(cls, d):
        """A verdict of any report's results.json: keys it lacks take
        their defaults, keys this lab no longer writes are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{"status": "?", "text": "",
                      **{k: v for k, v in d.items() if k in known}})


def values_ratio(va, vb, metric, threshold, n_keys=("n_a", "n_b")):
    """The ratio A/B of one per-rep metric given as {rep: value} of A and
    of B (labstats.ratio: per-rep pairs, geometric mean, t-interval),
    with the report's significance test of the two sets of values
    (Mann-Whitney, ranges, change = 100 x (ratio - 1) against the
    threshold); their counts under the names n_keys. None when either has
    no value (no CPU data)."""
    if not va or not vb:
        return None
    r = L.ratio(va, vb)
    change = (100.0 * (r["value"] - 1.0) if isnum(r["value"])
              else float("nan"))
    sc = L.significant_change(list(va.values()), list(vb.values()),
                              threshold, change=change)
    return {"metric": metric, "ratio": r["value"], "ci_lo": r["ci_lo"],
            "ci_hi": r["ci_hi"], **sc,
            "min_p": L.min_mw_p(len(va), len(vb)),
            "ci_supported": r["ci_supported"],
            "not_conclusive": r["not_conclusive"],
            n_keys[0]: len(va), n_keys[1]: len(vb), "n_pairs": r["n"],
            "per_rep_ratio": dict(zip(r["reps"], r["samples"])),
            "dropped": r["dropped"]}


def comparison(run, comp, phase, threshold):
    """The PhaseComparison of one comparison (a runmodel.Comparison) on one
    phase (see README): the ratio of each per-rep metric and of the
    latency percentiles, or why it is not measured."""
    a, b = comp.a, comp.b
    reason = "; ".join(r for r in (run.absent_reason(a),
                                   run.absent_reason(b)) if r)
    ba, bb = run.values(a, phase, "bw_bytes"), run.values(b, phase,
                                                          "bw_bytes")
    if not reason and (not ba or not bb):
        reason = f"no data for {a if not ba else b} on {phase}"
    if reason:
        return PhaseComparison(comp, phase, NOT_MEASURED, reason)
    ratios = {m: values_ratio(run.values(a, phase, m),
                              run.values(b, phase, m), m, threshold)
              for m in RATIO_METRICS}
    la, lb = run.bins(a, phase), run.bins(b, phase)
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
    return PhaseComparison(comp, phase, MEASURED, n_a=len(ba), n_b=len(bb),
                           bw=ratios["bw_bytes"], cpu=ratios["cpu_per_mib"],
                           cpu_per_op=ratios["cpu_per_op"], latency=lat)


def pct_name(q):
    """50 -> 'p50', 99.9 -> 'p99.9'."""
    return "p" + (f"{q:g}")


def analyze_arm(run, arm):
    """Per phase: raw numbers per rep, summaries, merged percentiles."""
    out = {}
    for phase in run.phases:
        reps = run.data[arm][phase]
        merged = L.merge_bins(run.bins(arm, phase))
        out[phase] = {
            "direction": run.direction(phase),
            "reps": {r: {k: getattr(d, k) for k in REP_KEYS}
                     for r, d in reps.items()},
            "bw_bytes": L.summary(d.bw_bytes for d in reps.values()),
            "iops": L.summary(d.iops for d in reps.values()),
            "latency_ns": {pct_name(q): L.percentile_from_bins(merged, q)
                           for q in PERCENTILES},
            "latency_ios": sum(merged.values()),
            "latency_reps": len(run.bins(arm, phase)),
        }
        for m in ("cpu_s", "cpu_per_mib", "cpu_per_op"):
            out[phase][m] = L.summary(run.values(arm, phase, m).values())
    return out


def key_mode_of(run, arm):
    """The key mode an arm's definition names (KEY_MODE), or the arm."""
    return run.definition(arm).get("KEY_MODE") or arm


def _judge(r, goal, better):
    """(status, core text, the Verdict's fields value, ci_lo, ci_hi and
    conclusive) of a ratio dict against a goal."""
    sign = "≥" if better == "higher" else "≤"
    ratio, lo, hi = r["ratio"], r["ci_lo"], r["ci_hi"]
    if ratio is None or not isnum(ratio):
        return NOT_MEASURED, "not measured (no usable value)", {}
    if r["not_conclusive"]:
        return (NOT_CONCLUSIVE,
                f"point estimate {ratio:.3f}, goal {sign} {goal}: "
                f"**{r['not_conclusive']}**",
                {"value": ratio, "conclusive": False})
    status = _status_of_ci(ratio, lo, hi, goal, better)
    if status == UNDECIDED:
        text = (f"{ratio:.3f} (95% CI {fmt_ci(lo, hi)}), goal {sign} "
                f"{goal}: **undecided** (the CI contains the goal; more "
                "reps would narrow it)")
    else:
        text = (f"{ratio:.3f} (95% CI {fmt_ci(lo, hi)}), goal {sign} "
                f"{goal}: **{status}**")
    return status, text, {"value": ratio, "ci_lo": lo, "ci_hi": hi,
                          "conclusive": status != UNDECIDED}


def _status_of_ci(ratio, lo, hi, goal, better):
    """"met" when the whole 95% CI is on the goal's side, "not met" when
    the whole CI is on the other, "undecided" when it contains the goal.
    Without a CI (bounds not numbers), the point estimate decides."""
    def good(x):
        return x >= goal if better == "higher" else x <= goal
    if not (isnum(lo) and isnum(hi)):
        return MET if good(ratio) else NOT_MET
    if good(lo) and good(hi):
        return MET
    if not good(lo) and not good(hi):
        return NOT_MET
    return UNDECIDED


def _beside(r, goal, better, name, judge_goal):
    """"throughput 0.985 (95% CI ...; goal ≥ 0.97: met)", not deciding."""
    if r is None or r["ratio"] is None or not isnum(r["ratio"]):
        return f"{name} not measured", None
    sign = "≥" if better == "higher" else "≤"
    if r["not_conclusive"]:
        return f"{name} point estimate {r['ratio']:.3f}", None
    status = _status_of_ci(r["ratio"], r["ci_lo"], r["ci_hi"], goal, better)
    g = f"; goal {sign} {goal}: {status}" if judge_goal else ""
    return (f"{name} {r['ratio']:.3f} (95% CI {fmt_ci(r['ci_lo'], r['ci_hi'])}"
            f"{g})", status if judge_goal else None)


def verdicts(run, comps):
    """Plain-language goal verdicts (Verdict) of the main comparison, from
    the goals the run recorded (spec.workload.goals) and its
    PhaseComparisons (comps).

    With CPU data (format 3), one verdict per judged phase, read or
    write, decided on CPU cost per MiB (ratio ≤ cpu_per_mib_max), with the
    throughput and p99 latency ratios beside it (not deciding; their goals
    are stated on read phases). Without CPU data (format 2, or a guest
    that could not read /proc/stat), the verdicts of format 2, labelled as
    the old metric: throughput (≥ bw_min) and p99 latency (≤ p99_max) of
    the judged read phases. The groupsweep's bounded points get one "not
    judged" line, last."""
    if not run.main:
        return [Verdict(NOT_MEASURED, "No comparison in this run's arm "
                        "definitions: nothing to judge.")]
    goals, a, b = run.goals, run.main.a, run.main.b
    what = f"{key_mode_of(run, a)} ÷ {key_mode_of(run, b)} ({a}/{b})"
    main = {c.phase: c for c in comps if c.comparison == run.main}
    # a workload may judge no phase at all (an empty list, not absent)
    jp = goals.judged_phases
    judged = [p for p in (run.phases if jp is None else jp) if p in main]
    bounded = [p for p in goals.not_judged_phases if p in run.phases]
    # a run without any CPU data is judged as format 2 judged; a run with
    # some gets a "not measured" line for a write phase that lacks it
    by_cpu = (goals.decide == "cpu_per_mib"
              and goals.cpu_per_mib_max is not None and run.has_cpu)
    out = []
    for phase in judged:
        c, is_read = main[phase], run.direction(phase) == "read"
        if by_cpu and (not c.measured or c.cpu):
            out.append(_cpu_verdict(c, goals, what, is_read))
        elif is_read:
            out += _fallback_verdicts(run, c, goals, what)
        elif by_cpu:
            out.append(Verdict(
                NOT_MEASURED, f"{phase} CPU cost per MiB, {what}: not "
                "measured (no CPU data for this phase; the old metric "
                "judged read phases only).", "CPU per MiB", phase,
                decides=True, basis="cpu_per_mib"))
    # why phases are not judged: the workload's module may say
    # (not_judged_text(run, phases)); else a neutral reason
    why = getattr(run.module(), "not_judged_text", None)
    if not judged and not bounded:
        out.append(Verdict(NOT_MEASURED, why(run, []) if why else
                           "No phase of this run is judged."))
    if bounded:  # last: the main verdict stays first
        out.append(Verdict(
            NOT_JUDGED, why(run, bounded) if why else
            f"{', '.join(bounded)}: not judged against the goals: the "
            f"workload did not write them as {a} writes its files (see the "
            "workload's own sections).", phases=bounded))
    return out


def _cpu_verdict(c, goals, what, is_read):
    """The verdict of one phase (c: its PhaseComparison) on CPU cost per
    MiB, with the throughput and p99 latency ratios beside it."""
    goal = goals.cpu_per_mib_max
    v = Verdict(NOT_MEASURED, "", "CPU per MiB", c.phase, goal=goal,
                goal_text=f"≤ {goal}", decides=True, basis="cpu_per_mib")
    head = f"{c.phase} CPU cost per MiB, {what}"
    if not c.measured:
        return replace(v, text=f"{head}: not measured ({c.reason}).")
    status, core, judged = _judge(c.cpu, goal, "lower")
    tp, tp_s = _beside(c.bw, goals.bw_min, "higher", "throughput", is_read)
    lat, lat_s = _beside(c.latency["p99"], goals.p99_max, "lower",
                         "p99 latency", is_read)
    if status == NOT_CONCLUSIVE:
        core += f": {L.reps_needed_text()}"
    return replace(v, status=status, text=f"{head}: {core}. Beside it (not "
                   f"deciding): {tp}, {lat}.", **judged,
                   beside={"throughput": tp_s, "p99 latency": lat_s})


def _fallback_verdicts(run, c, goals, what):
    """The verdicts of one read phase (c: its PhaseComparison) without CPU
    data, as format 2 judged: throughput and p99 latency, labelled as the
    old metric."""
    label = (" [old metric: this run has no CPU data; decided on "
             "throughput and p99 latency as format 2 did]"
             if run.format >= 3 else
             " [old metric: a format-2 run has no CPU data]")
    out = []
    for metric, key, goal, better in (
            ("throughput", None, goals.bw_min, "higher"),
            ("p99 latency", "p99", goals.p99_max, "lower")):
        head = f"{c.phase} {metric}, {what}"
        sign = "≥" if better == "higher" else "≤"
        v = Verdict(NOT_MEASURED, "", metric, c.phase, goal=goal,
                    goal_text=f"{sign} {goal}", decides=True,
                    basis="fallback")
        r = c.latency[key] if c.measured and key else c.bw
        if not c.measured:
            v = replace(v, text=f"{head}: not measured ({c.reason}).")
        elif not isnum(r["ratio"]):
            v = replace(v, text=f"{head}: not measured (no latency bins).")
        else:
            status, core, judged = _judge(r, goal, better)
            if status == NOT_CONCLUSIVE:
                core += f": {L.reps_needed_text()}"
            v = replace(v, status=status, text=f"{head}: {core}.{label}",
                        **judged)
        out.append(v)
    return out


def extent_check(run):
    """Per-rep extent counts of the test file vs min_extents, if recorded."""
    counts = run.extent_counts
    if not isinstance(counts, dict) or not counts:
        return None
    want = run.min_extents
    out = {}
    for arm in run.ordered(counts):
        v = [x for x in counts[arm] if isinstance(x, (int, float))]
        low = [x for x in v if isinstance(want, (int, float)) and x < want]
        out[arm] = {"counts": v, "median": L.summary(v)["median"],
                    "below_min": low}
        if low:
            run.warnings.append(
                f"{arm}: extent count {low} below min_extents={want}: the "
                "file was less fragmented than the workload asks")
    return {"min_extents": want, "arms": out}


def analyze(run, threshold):
    """Everything the report says, as one JSON-able dict."""
    res = {
        "format": "fscrypt-lab-report/2",
        "run": os.path.basename(os.path.normpath(run.dir)),
        "threshold_pct": threshold,
        "units": {"bw_bytes": "bytes/s", "iops": "I/O per s",
                  "latency_ns": "ns", "cpu_s": "CPU s",
                  "cpu_per_mib": "CPU s per MiB",
                  "cpu_per_op": "CPU s per I/O",
                  "tables": "MiB/s = 2^20 bytes/s; CPU ms per MiB; CPU "
                            "µs per I/O"},
        # everything below comes from the run directory (its spec)
        "goals": run.goals.recorded,
        "analysis": run.analysis,
        "comparison_order": [c.name for c in run.comparisons],
        "ratio_definition": run.spec.get("ratio"),
        "metrics": run.metrics,
        "kernel": run.kernel.recorded,
        "run_format": run.format,
        "spec_notes": run.spec_notes,
        "has_cpu": run.has_cpu,
        "meta": run.meta,
        "arms": {},
    }
    for name, arm in run.arms.items():
        entry = {"status": arm.status, "spec": arm.recorded}
        if arm.measured:
            entry["phases"] = analyze_arm(run, name)
        else:
            entry["reason"] = arm.why_not_measured
        res["arms"][name] = entry
    res["skipped"] = run.not_measured
    res["comparisons"] = [comparison(run, c, phase, threshold)
                          for c in run.comparisons for phase in run.phases]
    res["verdicts"] = verdicts(run, res["comparisons"])
    res["extent_counts"] = extent_check(run)
    prof = load_profiles(run)
    # folded stacks stay out of results.json (they are written beside it)
    run.folded = {a: e.pop("folded") for a, e in (prof or {}).items()
                     if "folded" in e}
    res["profiles"] = prof
    der = {}
    if prof:
        for arm, e in prof.items():
            n = derivation_count(e["bpftrace"]) if "bpftrace" in e else None
            if n is None and e.get("bpftrace", {}).get("maps") and \
                    arm in run.arms and not run.arms[arm].encrypted:
                n = 0  # an unencrypted arm traced fine and derived nothing
            # the extents of the file the profiled rep read
            x = profiled_extents(run, arm)
            if n is not None and x is not None:
                der[arm] = (x, n)
    res["derivations_vs_extents"] = der
    # the key machinery's work in the profiled phase (bench.bt), per arm
    res["key_work"] = {a: kw for a, e in (prof or {}).items()
                       if (kw := key_work(e.get("bpftrace") or {}))}
    # the count passes (tracefs), per arm and phase
    counts = {a: e["counts"] for a, e in (prof or {}).items()
              if e.get("counts")}
    res["counts"] = counts
    res["memory"] = memory_analysis(run, prof)
    slabs = {a: e["slab"] for a, e in (prof or {}).items() if "slab" in e}
    res["slab_caches"] = slab_selection(slabs) if slabs else []
    # the workload's own analysis (its reports/lab/wl_<kind>.py), if any
    mod = run.module()
    res["workload_kind"] = mod.KIND if mod else None
    res["workload"] = mod.analyze(run, res) if mod else None
    res["warnings"] = run.warnings
    return res
