#!/usr/bin/python3
"""Regression check of a benchmark run against a baseline.

    /usr/bin/python3 -m reports.check RUN_DIR BASELINE_JSON [--threshold PCT]
    /usr/bin/python3 -m reports.check --make-baseline RUN_DIR OUT_JSON

Tracked numbers are ratios between arms of one run (absolute times under
TCG mean nothing): for each comparison A/B the run recorded (its spec, not
the lab's current arm files) and each phase, the per-rep ratios
A.metric[repN] / B.metric[repN] of the baseline's metric (bw_bytes by
default; --metric cpu_per_mib tracks CPU cost per MiB). The ratio of a set
of samples is reports.labstats.ratio_of_samples(): their geometric mean,
the one definition the report and the history use too. A tracked ratio
regressed when, between the baseline's samples and this run's, its ratio
moved the bad way (down for throughput, up for a cost) by at least the
threshold AND the two-sided Mann-Whitney p < 0.05 AND the two sets of
samples do not overlap.

Exit status: 0 no regression, 1 at least one regression, 2 usage or data
error (message on stderr), 3 not conclusive: no tracked ratio has enough
samples for the test to reach p < 0.05 (e.g. a REPS=1 run), so the run
can neither pass nor fail. The baseline format is in reports/README.md.
"""

import argparse
import json
import math
import os
import sys

from reports import labstats as L
from reports import runmodel as M
from reports.analysis import DEFAULT_THRESHOLD

FORMAT = "fscrypt-lab-baseline/2"
READS = ("fscrypt-lab-baseline/1", FORMAT)


class UsageError(Exception):
    """Bad arguments or unusable input (exit 2)."""


def make_baseline(run_dir, out_json, threshold, metric="bw_bytes"):
    """Write the baseline of RUN_DIR to OUT_JSON; return the exit status."""
    run = M.load_run(run_dir)
    known = [k for k, v in run["metrics"].items() if v.get("per_rep")]
    if metric not in known:
        raise UsageError(f"{run_dir}: no per-rep metric '{metric}' in this "
                         f"run (format {run['format']}: {', '.join(known)})")
    if metric.startswith("cpu") and not run["has_cpu"]:
        raise UsageError(f"{run_dir} recorded no CPU time: no baseline of "
                         f"{metric}")
    for w in run["warnings"]:
        print(f"check: warning: {w}", file=sys.stderr)
    meta = run["meta"]
    if M.injected_delay_ns(meta):
        raise UsageError(f"{run_dir} ran with an injected slowdown "
                         f"({M.injected_delay_ns(meta)} ns per "
                         "lookup); a baseline must come from a real run")
    info = meta.get("run_info") or {}
    k = run["kernel"] or {}
    base = {
        "format": FORMAT,
        "workload": meta.get("workload"),
        "metric": metric,
        "better": M.metric_better(run, metric),
        "ratio_definition": M.RATIO_DEFINITION["name"],
        "threshold_pct": threshold,
        "created_from": {
            "run": os.path.basename(os.path.normpath(run_dir)),
            "run_format": run["format"],
            "date": meta.get("date"),
            "kernel_release": k.get("release"),
            "kernel_base": M.kernel_base(k),
            "kernel_series_hash": k.get("series_hash"),
            "kernel_tree_head": k.get("tree_head"),
            "kernel_config_sha256": k.get("config_sha256"),
            "lab_commit": k.get("lab_commit"),
            "accel": info.get("accel"),
            "reps": meta.get("reps"),
        },
        "ratios": {},
        "not_tracked": {},
    }
    for name, phases in M.tracked_ratios(run, metric).items():
        for phase, v in phases.items():
            if isinstance(v, str):
                base["not_tracked"].setdefault(name, {})[phase] = v
                continue
            reps, ratios = v
            r = L.ratio_of_samples(ratios)
            base["ratios"].setdefault(name, {})[phase] = {
                "value": r["value"],
                "ci_lo": r["ci_lo"] if r["ci_supported"] else None,
                "ci_hi": r["ci_hi"] if r["ci_supported"] else None,
                "samples": ratios,
                "reps": reps,
            }
    if not base["ratios"]:
        raise UsageError(f"{run_dir}: no ratio can be computed (every "
                         "comparison has a skipped or empty arm); no "
                         "baseline written")
    with open(out_json, "w", encoding="utf-8") as f:
        json.dump(base, f, indent=1)
        f.write("\n")
    n = sum(len(p) for p in base["ratios"].values())
    print(f"check: baseline with {n} tracked ratio(s) written to {out_json}")
    for name, phases in base["not_tracked"].items():
        print(f"check: not tracked: {name} ({next(iter(phases.values()))})")
    small = sorted({len(e["samples"]) for p in base["ratios"].values()
                    for e in p.values()})
    if small and not L.can_reach_significance(small[0], small[0]):
        print(f"check: warning: only {small[0]} samples per ratio; against "
              "a run with as few reps no change can reach p < 0.05",
              file=sys.stderr)
    return 0


def load_baseline(path):
    """Read and validate a baseline file (raises UsageError)."""
    try:
        with open(path, encoding="utf-8") as f:
            base = json.load(f)
    except OSError as e:
        raise UsageError(f"cannot read baseline {path}: {e.strerror}") from e
    except ValueError as e:
        raise UsageError(f"baseline {path} is not valid JSON: {e}") from e
    ratios = base.get("ratios") if isinstance(base, dict) else None
    if isinstance(base, dict) and base.get("format") not in (None,) + READS:
        raise UsageError(f"baseline {path}: format {base.get('format')!r}, "
                         f"this check reads {', '.join(READS)}")
    if not isinstance(ratios, dict) or not ratios:
        raise UsageError(f"baseline {path}: no 'ratios' object (make one "
                         "with --make-baseline)")
    for name, phases in ratios.items():
        if "/" not in name or not isinstance(phases, dict):
            raise UsageError(f"baseline {path}: bad ratio entry '{name}'")
        for phase, e in phases.items():
            s = e.get("samples") if isinstance(e, dict) else None
            if not isinstance(s, list) or not s or not all(
                    isinstance(x, (int, float)) for x in s):
                raise UsageError(f"baseline {path}: {name} {phase}: "
                                 "'samples' must be a non-empty number list")
    return base


def ratio_order(run, names):
    """Comparisons in the run's order, then others sorted."""
    known = [f"{a}/{b}" for a, b, _ in run["comparisons"]]
    return ([n for n in known if n in names]
            + sorted(n for n in names if n not in known))


def check(run_dir, baseline_path, threshold):
    """Compare RUN_DIR with the baseline, print the table, return status."""
    base = load_baseline(baseline_path)
    run = M.load_run(run_dir)
    for w in run["warnings"]:
        print(f"check: warning: {w}", file=sys.stderr)
    wl_base, wl_run = base.get("workload"), run["meta"].get("workload")
    if wl_base and wl_run and wl_base != wl_run:
        raise UsageError(f"baseline is for workload '{wl_base}', the run is "
                         f"'{wl_run}': not comparable")
    cf = base.get("created_from") or {}
    b_kbase = cf.get("kernel_base") or M.kernel_base(
        {"release": cf.get("kernel_release")})
    r_kbase = M.kernel_base(run["kernel"])
    if b_kbase and r_kbase and b_kbase != r_kbase:
        raise UsageError(f"the baseline was made on Linux {b_kbase}, the run "
                         f"on Linux {r_kbase}: not comparable (make a "
                         f"baseline from a run on {r_kbase}: check.py "
                         "--make-baseline)")
    if threshold is None:
        threshold = float(base.get("threshold_pct", DEFAULT_THRESHOLD))
    # a baseline without "metric" (format 1) tracks throughput
    metric = base.get("metric") or "bw_bytes"
    if metric.startswith("cpu") and not run["has_cpu"]:
        raise UsageError(f"the baseline tracks {metric}, and {run_dir} "
                         "recorded no CPU time: not comparable")
    higher = M.metric_better(run, metric) == "higher"
    now = M.tracked_ratios(run, metric)
    rows, regressions, errors, undecidable = [], [], [], []
    for name in ratio_order(run, base["ratios"]):
        for phase, e in base["ratios"][name].items():
            b = e["samples"]
            bmed = L.ratio_of_samples(b)["value"]
            v = now.get(name, {}).get(phase)
            if v is None:
                why = (f"ratio {name} is not computed by this check"
                       if name not in now else f"phase {phase} not in run")
                rows.append((name, phase, bmed, None, None, None, None,
                             f"not tracked: {why}"))
                continue
            if isinstance(v, str):
                if "skipped" in v or "not an arm" in v:
                    rows.append((name, phase, bmed, None, None, None, None,
                                 f"not tracked: skipped ({v})"))
                else:
                    errors.append(f"{name} {phase}: {v}")
                    rows.append((name, phase, bmed, None, None, None, None,
                                 f"DATA ERROR: {v}"))
                continue
            samples = v[1]
            nmed = L.ratio_of_samples(samples)["value"]
            sc = L.significant_change(samples, b, threshold,
                                      change=100.0 * (nmed / bmed - 1.0))
            worse = sc["change_pct"] < 0 if higher else sc["change_pct"] > 0
            if sc["significant"] and worse:
                verdict = "REGRESSION"
                regressions.append(f"{name} {phase}")
            elif sc["significant"]:
                verdict = "improved"
            elif not sc["can_reach"]:
                n = (f"{len(samples)}" if len(samples) == len(b)
                     else f"{len(samples)} vs {len(b)}")
                verdict = (f"not conclusive (n = {n}): smallest p "
                           f"{L.min_mw_p(len(samples), len(b)):.3f}")
                undecidable.append(f"{name} {phase}")
            else:
                verdict = "ok"
            rows.append((name, phase, bmed, nmed, sc["change_pct"], sc["p"],
                         sc["separated"], verdict))
    print_table(rows, threshold, base, run, metric, higher)
    untracked = [f"{n} {p}" for n in ratio_order(run, now)
                 for p, v in now[n].items()
                 if not isinstance(v, str) and p not in
                 base["ratios"].get(n, {})]
    if untracked:
        print("check: measured but not in the baseline (not checked): "
              + ", ".join(untracked))
    if undecidable:
        print(f"check: {len(undecidable)} ratio(s) not conclusive: too few "
              "samples for Mann-Whitney to reach p < 0.05, so they can "
              f"neither pass nor fail ({L.reps_needed_text()}): "
              + ", ".join(undecidable))
    if regressions:
        print(f"check: FAIL: {len(regressions)} regression(s): "
              + ", ".join(regressions))
        return 1
    if errors:
        for e in errors:
            print(f"check: error: {e}", file=sys.stderr)
        return 2
    tracked = sum(1 for r in rows if not r[7].startswith(
        ("not tracked", "not conclusive")))
    if not tracked and undecidable:
        ns = sorted({len(v[1]) for n in now.values() for v in n.values()
                     if not isinstance(v, str)})
        print(f"check: not conclusive (n = {', '.join(map(str, ns))}): no "
              "tracked ratio could be decided; run with at least "
              f"{L.reps_for_test()} reps")
        return 3
    print(f"check: pass: {tracked} ratio(s) checked, no regression beyond "
          f"{threshold:g}%" + (f"; {len(undecidable)} not conclusive"
                               if undecidable else ""))
    return 0


def _f(x, spec):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return format(x, spec)


def print_table(rows, threshold, base, run, metric, higher):
    """The per-ratio table: baseline, now, change, p, verdict."""
    cf = base.get("created_from") or {}
    print(f"check: run {run['dir']} ({run['meta'].get('date', '?')}) "
          f"against baseline from {cf.get('date', '?')} "
          f"(series {cf.get('kernel_series_hash', '?')})")
    print(f"check: metric {metric}; ratio = geometric mean of per-rep "
          f"ratios; regression = ratio {'down' if higher else 'up'} by "
          f"≥ {threshold:g}% AND Mann-Whitney p < 0.05 AND ranges separate")
    head = ("ratio", "phase", "baseline", "now", "change", "p (MW)",
            "separate", "verdict")
    table = [head] + [
        (n, p, _f(b, ".4f"), _f(c, ".4f"),
         "-" if ch is None else _f(ch, "+.2f") + "%", _f(pv, ".4f"),
         "-" if sep is None else ("yes" if sep else "no"), v)
        for n, p, b, c, ch, pv, sep, v in rows]
    widths = [max(len(str(r[i])) for r in table) for i in range(len(head))]
    for r in table:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Regression check of the per-rep ratios of a run "
                    "against a baseline (exit 0 pass, 1 regression, 2 usage "
                    "or data error, 3 not conclusive).",
        usage="%(prog)s RUN_DIR BASELINE_JSON [--threshold PCT]\n"
              "       %(prog)s --make-baseline RUN_DIR OUT_JSON "
              "[--threshold PCT]")
    ap.add_argument("--make-baseline", action="store_true",
                    help="write a baseline from RUN_DIR to OUT_JSON")
    ap.add_argument("--metric", default="bw_bytes",
                    choices=("bw_bytes", "cpu_per_mib", "cpu_per_op"),
                    help="with --make-baseline: the per-rep metric whose "
                         "ratios the baseline tracks (default %(default)s)")
    ap.add_argument("--threshold", type=float, default=None, metavar="PCT",
                    help="minimum drop, in %%, that can fail (default: the "
                         f"baseline's, else {DEFAULT_THRESHOLD:g})")
    ap.add_argument("run_dir", metavar="RUN_DIR")
    ap.add_argument("other", metavar="BASELINE_JSON|OUT_JSON")
    args = ap.parse_args(argv)
    if args.threshold is not None and not args.threshold >= 0:
        ap.error("--threshold must be a number >= 0")
    try:
        if args.make_baseline:
            t = (args.threshold if args.threshold is not None
                 else DEFAULT_THRESHOLD)
            return make_baseline(args.run_dir, args.other, t, args.metric)
        return check(args.run_dir, args.other, args.threshold)
    except (UsageError, M.RunError) as e:
        print(f"check: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
