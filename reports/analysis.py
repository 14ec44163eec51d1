"""What the report says, as numbers: per-arm summaries, comparisons with
bootstrap CIs and significance, goal verdicts (honest about too few
reps), fragmentation checks, profiles, memory and scaling. analyze()
returns one JSON-able dict (results.json); statistics are in
reports.labstats.
"""

import math
import os
import re

from reports import labstats as L
from reports.fmt import fmt_ci, isnum
from reports.runmodel import (
    COMPARISONS, MAIN_A, MAIN_B, RunError, arm_absent_reason, arm_order,
    bins_of, bw_by_rep, phase_direction, read_json_file)
from reports.profiles import (
    derivation_count, key_work, load_profiles, memory_analysis,
    profiled_extents, slab_selection)


GOAL_BW_RATIO = 0.97    # per-extent / per-inode throughput, at least


GOAL_P99_RATIO = 1.05   # per-extent / per-inode p99 latency, at most


PERCENTILES = (50, 99, 99.9)
DEFAULT_THRESHOLD = 5.0


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
    # groupsweep: a file written with at most N extents per key group is
    # not what the main arm writes (no bound), so it is not judged
    bounded = [p for p in read_phases if GROUP_PHASE.fullmatch(p)
               and int(GROUP_PHASE.fullmatch(p).group("n")) > 0]
    read_phases = [p for p in read_phases if p not in bounded]
    if not read_phases and not bounded:
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
    if bounded:  # last: the main verdict stays first
        out.append({"metric": "-", "phase": "-", "phases": bounded,
                    "status": "not judged",
                    "text": f"{', '.join(bounded)}: not judged against the "
                            "goals: those files were written with at most N "
                            "extents per key group (fscrypt_extents_per_key"
                            f"=N), not as {MAIN_A} writes them (no bound); "
                            "see \"Cost against the size of key groups\"."})
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
            if isinstance(c, dict) and c.get("rep") not in ("profiled",
                                                             "prepare"):
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


GROUP_PHASE = re.compile(r"(?P<kind>[A-Za-z]+)-g(?P<n>\d+)")


def load_groupsweep(run, comps, counts):
    """Cost against the size of key groups (the groupsweep workload).

    Phases KIND-gN read a file written with at most N extents per key
    group (fscrypt_extents_per_key=N; 0: no bound). For every comparison
    (A / reference B) whose arms were both measured on such phases, one
    point per N: the throughput ratio of medians with its CI (from comps),
    both arms' medians, the extents of A's file (FIEMAP median over the
    timed reps, label gN; FIEMAP merges physically adjacent extents, so the
    extents read, the lookups of the counted read, are used where known),
    the key groups that implies (ceil(extents / N), 1 without a bound), and
    what the count passes saw (counts: {arm: {phase: {counter: n}}}): keys
    derived, HKDF derivations, key-slot programs and lookups of A's read of
    the file, and the keys derived and key-group starts of its writing
    (phase write-gN). x is N, or the file's extents for no bound (one group
    holds the whole file). Returns {"sweeps": [{a, b, label, kind,
    points}]} or None.
    """
    phases = [(p, GROUP_PHASE.fullmatch(p)) for p in run["phases"]]
    phases = [(p, m.group("kind"), int(m.group("n"))) for p, m in phases
              if m]
    if not phases:
        return None
    extents = {}
    for c in run["meta"].get("extent_checks") or []:
        if isinstance(c, dict) and c.get("rep") not in ("profiled",
                                                         "prepare"):
            extents.setdefault((c.get("arm"), c.get("label")),
                               []).append(c.get("extents"))
    by = {(c["a"], c["b"], c["phase"]): c for c in comps}
    sweeps = []
    for a, b, label in COMPARISONS:
        if a not in run["measured"] or b not in run["measured"]:
            continue
        kinds = {}
        for phase, kind, n in phases:
            c = by.get((a, b, phase))
            if not c or c["status"] != "measured":
                continue
            got = [x for x in extents.get((a, f"g{n}"), []) if isnum(x)]
            ext = L.summary(got)["median"] if got else None
            read = (counts.get(a) or {}).get(phase) or {}
            write = (counts.get(a) or {}).get(f"write-g{n}") or {}
            # the extents the read walked (one lookup each), else FIEMAP's
            walked = read.get("lookups") or ext
            sa = L.summary(bw_by_rep(run, a, phase).values())
            sb = L.summary(bw_by_rep(run, b, phase).values())
            kinds.setdefault(kind, []).append({
                "phase": phase, "n": n, "bounded": n > 0,
                "x": n if n > 0 else walked,
                "extents": ext,
                "extents_read": read.get("lookups"),
                "groups_expected": (math.ceil(walked / n) if n and walked
                                    else 1 if walked else None),
                "bw_a_median": sa["median"], "bw_b_median": sb["median"],
                "n_a": c["n_a"], "n_b": c["n_b"],
                "ratio": c["bw"]["ratio"], "ci_lo": c["bw"]["ci_lo"],
                "ci_hi": c["bw"]["ci_hi"],
                "ci_supported": c["bw"]["ci_supported"],
                "not_conclusive": c["bw"]["not_conclusive"],
                "per_rep_ratio": c["per_rep_ratio"],
                "read_counts": read or None,
                "write_counts": write or None,
            })
        for kind, pts in sorted(kinds.items()):
            if not any(p["extents"] is not None for p in pts):
                continue  # A has no file per point: not a sweep of A
            # no bound last: it is the largest group
            pts.sort(key=lambda p: (not p["bounded"], p["n"]))
            sweeps.append({"a": a, "b": b, "label": label, "kind": kind,
                           "points": pts})
    return {"sweeps": sweeps} if sweeps else None


def analyze(run, threshold):
    """Everything the report says, as one JSON-able dict."""
    res = {
        "format": "fscrypt-lab-report/1",
        "run": os.path.basename(os.path.normpath(run["dir"])),
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
    res["scaling"] = load_scaling(run)
    res["groupsweep"] = load_groupsweep(run, res["comparisons"], counts)
    res["warnings"] = run["warnings"]
    return res
