"""The rekey workload's analysis (reports plug-in, see
reports/lab/runmodel.py workload_module): reads of a file whose extents are
under two fscrypt master keys, against the same reads of a file under one
(bench/workloads/rekey).

Its phases are KIND-onekey and KIND-twokeys: the same read KIND (seqread,
randread) of file onekey, every extent under K2, and of file twokeys,
every other extent under K1 and the others under K2 (written across a
rekey of their subvolume from K1 to K2, BTRFS_IOC_FSCRYPT_REKEY). There is
no reference arm: each arm is compared with itself, twokeys over onekey.
Per arm and read kind, the ratio of each per-rep metric (throughput, CPU
cost per MiB and per I/O) pairs rep N's twokeys with rep N's onekey (the
driver ran them back to back on the same mount, so host drift cancels in
the pair, as between the arms of a comparison): labstats.ratio (geometric
mean of the per-rep ratios, bootstrap CI) and the report's significance
test, as every comparison of the report; p99 latency as the report's
latency ratios (bins merged over reps, reps resampled).

From the count passes of the profiled rep (profiles/<arm>/counts.tsv,
tracefs, analysis.analyze's res["counts"]) the key derivations (HKDF),
extent keys derived, key-slot programs and evictions and extent lookups
of each read, also per read: over the I/Os fio made in that count pass
(profiles/<arm>/count-PHASE.json). What the preparation's rekey moved is
raw/<arm>/prep-rekey.tsv (fscrypt_setup rekey's "name<TAB>value" lines).
"""

import os
import re

from reports.lab import labstats as L
from reports.lab.analysis import values_ratio
from reports.lab.fmt import (fmt_ci_of, fmt_cpu_ms_per_mib, fmt_cpu_us_per_op,
                         fmt_mib, fmt_ns, fmt_p, fmt_pct, fmt_ratio, isnum)
from reports.lab.plots import _plt, _save, add_skipped_legend
from reports.lab.runmodel import RunError, parse_fio, read_command_result

KIND = "rekey"
PHASE = re.compile(r"(?P<kind>[A-Za-z]+)-(?P<file>onekey|twokeys)")
# The per-rep metrics whose ratio twokeys / onekey is reported: name,
# label, formatter of one value.
METRICS = (("bw_bytes", "throughput, MiB/s", fmt_mib),
           ("cpu_per_mib", "CPU ms per MiB", fmt_cpu_ms_per_mib),
           ("cpu_per_op", "CPU µs per I/O", fmt_cpu_us_per_op))
# The counters of a count pass shown per read (bench/guest/lib.sh
# trace_counts), in table order.
COUNTERS = ("lookups", "derivations", "key_setups_derived", "slot_programs",
            "slot_evicts")
PREP_REKEY = "prep-rekey.tsv"


def owns_phases(phases):
    """Runs record their analysis kind; none is guessed from phase names."""
    return False


def judged_phases(phases):
    """No phase is judged against the goals of the main comparison (an arm
    against its reference arm): this workload compares each arm with
    itself, twokeys against onekey, and the reference of the main
    comparison (per-inode keys) cannot rekey."""
    return []


def not_judged_text(run, phases):
    """The verdicts' line for the phases not judged (analysis.verdicts)."""
    return (f"{', '.join(phases) or 'no phase'}: not judged against the "
            "goals of the main comparison (an arm against its reference "
            "arm): this workload compares each arm with itself, the read of "
            "a file under two keys with the same read of a file under one "
            "(twokeys / onekey, see \"Reads across a rekey\"), and per-inode "
            "keys, the main comparison's reference, cannot rekey.")


def read_kinds(run):
    """The read kinds with both files' phases, in the order of the run's
    phases: [(kind, onekey phase, twokeys phase)]."""
    seen = {}
    for p in run.phases:
        m = PHASE.fullmatch(p)
        if m:
            seen.setdefault(m.group("kind"), {})[m.group("file")] = p
    return [(k, f["onekey"], f["twokeys"]) for k, f in seen.items()
            if "onekey" in f and "twokeys" in f]


def phase_ratio(run, arm, num, den, metric, threshold):
    """The ratio num / den of one per-rep metric of one arm, two of its
    phases paired by rep: labstats.ratio (geometric mean of per-rep
    ratios, bootstrap CI) and the significance test of the report's
    comparisons (analysis.values_ratio, as analysis.comparison); the
    medians of both phases. None when either phase has no value of the
    metric (no CPU data)."""
    va = run.values(arm, num, metric)
    vb = run.values(arm, den, metric)
    e = values_ratio(va, vb, metric, threshold, ("n_num", "n_den"))
    if e is not None:
        e.update(median_num=L.summary(va.values())["median"],
                 median_den=L.summary(vb.values())["median"])
    return e


def p99_ratio(run, arm, num, den):
    """p99 completion latency num / den (bins merged over reps), its CI
    resampling whole reps, none with too few reps (as the report's latency
    ratios). None without bins."""
    la, lb = run.bins(arm, num), run.bins(arm, den)
    if not la or not lb:
        return None
    r, lo, hi = L.bootstrap_percentile_ratio_ci(la, lb, 99)
    ok = L.ci_supported(len(la), len(lb))
    if not ok:
        lo = hi = float("nan")
    return {"ratio": r, "ci_lo": lo, "ci_hi": hi, "ci_supported": ok,
            "not_conclusive": L.conclusive_n(len(la), len(lb)),
            "n_num": len(la), "n_den": len(lb)}


def count_pass(run, arm, phase, counters):
    """One count pass of one read: its counters (counts.tsv), the I/Os and
    bytes fio made in it (profiles/<arm>/count-PHASE.json), and each
    counter per read (None without the pass's fio output)."""
    reads = nbytes = None
    path = os.path.join(run.dir, "profiles", arm, f"count-{phase}.json")
    if os.path.exists(path):
        try:
            d = parse_fio(path, f"profiles/{arm}/count-{phase}.json")
            reads, nbytes = d.total_ios or None, d.io_bytes
        except RunError as e:
            run.warnings.append(str(e).replace(
                run.dir.rstrip("/") + "/", ""))
    per = {c: (counters.get(c, 0) / reads if reads else None)
           for c in COUNTERS}
    return {"counters": counters, "reads": reads, "io_bytes": nbytes,
            "per_read": per, "lost_events": counters.get("lost_events", 0)}


def analyze(run, res):
    """res["workload"]: {"kinds": [[kind, onekey phase, twokeys phase]],
    "arms": {arm: {"reads": {kind: {"ratios": {metric: phase_ratio},
    "p99": p99_ratio}}, "counts": {phase: count_pass}, "prep_rekey":
    {name: value} or None}}}, or None when the run has no pair of phases
    or no arm measured them."""
    kinds = read_kinds(run)
    if not kinds:
        return None
    threshold = res.get("threshold_pct", 5.0)
    counts = res.get("counts") or {}
    arms = {}
    for arm in run.measured:
        reads = {}
        for kind, one, two in kinds:
            ratios = {m: phase_ratio(run, arm, two, one, m, threshold)
                      for m, _, _ in METRICS}
            if ratios["bw_bytes"] is None:
                continue
            reads[kind] = {"onekey": one, "twokeys": two, "ratios": ratios,
                           "p99": p99_ratio(run, arm, two, one)}
        if not reads:
            continue
        cnt = {}
        for kind, one, two in kinds:
            for p in (one, two):
                c = (counts.get(arm) or {}).get(p)
                if c:
                    cnt[p] = count_pass(run, arm, p, c)
        prep = os.path.join(run.dir, "raw", arm, PREP_REKEY)
        arms[arm] = {"reads": reads, "counts": cnt,
                     "prep_rekey": (read_command_result(prep)
                                    if os.path.exists(prep) else None)}
        if arms[arm]["prep_rekey"] is None:
            run.warnings.append(f"raw/{arm}/{PREP_REKEY}: missing (the "
                                   "rekey workload's preparation records "
                                   "its rekey there)")
    if not arms:
        return None
    return {"kinds": [list(k) for k in kinds], "arms": arms,
            "threshold_pct": threshold}


def _err(r):
    """Whiskers of a ratio dict for errorbar, or None (no CI)."""
    if not r["ci_supported"] or not isnum(r["ci_lo"]):
        return None
    return [[r["ratio"] - r["ci_lo"]], [r["ci_hi"] - r["ratio"]]]


def plot(run, res, out_dir, colors):
    """rekey.png: (1) per read kind and metric, the ratio twokeys / onekey
    of each arm with its 95% CI (x: no CI, too few reps); (2) the key
    derivations and key-slot programs per read of every counted read."""
    wl = res.get("workload")
    if not wl:
        return {}
    plt = _plt()
    arms = run.ordered(wl["arms"])
    fig, (ax, axc) = plt.subplots(1, 2, figsize=(13, 4.4))
    slots = [(kind, m, label) for kind, _, _ in wl["kinds"]
             for m, label, _ in METRICS
             if any((wl["arms"][a]["reads"].get(kind) or {}).get("ratios",
                                                                 {}).get(m)
                    for a in arms)]
    width = 0.7 / max(1, len(arms))
    for j, arm in enumerate(arms):
        first = True
        for i, (kind, m, _) in enumerate(slots):
            r = (wl["arms"][arm]["reads"].get(kind) or {}).get(
                "ratios", {}).get(m)
            if not r or not isnum(r["ratio"]):
                continue
            x = i + (j - (len(arms) - 1) / 2) * width
            yerr = _err(r)
            ax.errorbar(x, r["ratio"], yerr=yerr, fmt="o" if yerr else "x",
                        capsize=5, color=colors.get(arm),
                        label=arm if first else None)
            first = False
            ax.annotate(f"{r['ratio']:.3f}", (x, r["ratio"]),
                        textcoords="offset points", xytext=(5, 3),
                        fontsize=7)
    ax.axhline(1.0, color="gray", lw=1)
    ax.set_xticks(range(len(slots)))
    ax.set_xticklabels([f"{k}\n{label}" for k, _, label in slots],
                       fontsize=7)
    ax.set_ylabel("twokeys / onekey (geometric mean of per-rep ratios,\n"
                  "95% bootstrap CI; x: no CI, too few reps)")
    ax.set_title("A file under two keys against one (same arm)",
                 fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    add_skipped_legend(ax, run)
    phases = [p for _, one, two in wl["kinds"] for p in (one, two)]
    what = {"derivations": "HKDF derivations",
            "slot_programs": "key-slot programs"}
    bars = [(arm, c) for arm in arms for c in what]
    bw = 0.8 / max(1, len(bars))
    drawn = False
    for b, (arm, c) in enumerate(bars):
        xs, ys = [], []
        for i, p in enumerate(phases):
            v = ((wl["arms"][arm]["counts"].get(p) or {}).get("per_read")
                 or {}).get(c)
            if isnum(v):
                xs.append(i + (b - (len(bars) - 1) / 2) * bw)
                ys.append(v)
        # log scale: a count of 0 has no bar, its label says 0
        if xs:
            drawn = True
            axc.bar([x for x, y in zip(xs, ys) if y > 0],
                    [y for y in ys if y > 0], bw, color=colors.get(arm),
                    alpha=1.0 if c == "derivations" else 0.45,
                    hatch=None if c == "derivations" else "//",
                    label=f"{arm}: {what[c]}")
            for x, y in zip(xs, ys):
                axc.annotate(f"{y:.3g}", (x, y if y > 0 else 1e-4),
                             textcoords="offset points", xytext=(0, 2),
                             ha="center", fontsize=6, rotation=90)
    if drawn:
        axc.set_yscale("log")
        axc.legend(fontsize=7)
    else:
        axc.text(0.5, 0.5, "no counts: the profiled repetition did not run "
                 "(PROFILE=0)\nor this kernel lacks the events", ha="center",
                 va="center", fontsize=9, transform=axc.transAxes)
    axc.set_xticks(range(len(phases)))
    axc.set_xticklabels(phases, rotation=20, ha="right", fontsize=8)
    axc.set_ylabel("per read (fio I/O) of the count pass (log)")
    axc.set_title("Key work per read (count passes, tracefs)", fontsize=10)
    axc.grid(axis="y", alpha=0.3)
    fig.suptitle("Reads across a rekey: every other extent under K1, the "
                 "others under K2 (twokeys) against all under K2 (onekey)",
                 fontsize=10)
    return {"rekey": _save(fig, out_dir, "rekey.png")}


def _per_read(cp, c):
    """"total (per read)" of one counter of a count pass."""
    v = cp["counters"].get(c, 0)
    per = cp["per_read"].get(c)
    return f"{v} ({per:.3g})" if isnum(per) else f"{v} (n/a)"


def render(doc, run, res, plots):
    doc.h(2, "Reads across a rekey")
    wl = res.get("workload")
    if not wl:
        skipped = "; ".join(f"{a}: {w}"
                            for a, w in run.not_measured.items())
        doc.p("Reads across a rekey: not measured (no arm read both files"
              + (f"; skipped: {skipped}" if skipped else "") + ").")
        return
    doc.p("File `twokeys` has every other 4 KiB extent under master key K1 "
          "and the others under K2: its even blocks were written (random "
          "order, each write fsynced), then its subvolume was rekeyed from "
          "K1 to K2 (`BTRFS_IOC_FSCRYPT_REKEY`, which moves names and "
          "contexts, not file data), then its odd blocks were written. "
          "File `onekey` has the same size and write pattern, all written "
          "after the rekey, under K2: the reference, in the same directory, "
          "read under the same conditions. Each arm is compared with "
          "itself: ratio = twokeys / onekey of each per-rep metric, rep N's "
          "two reads paired (they ran back to back), geometric mean of the "
          "per-rep ratios with a 95% bootstrap CI over the pairs (none with "
          f"too few reps: {L.reps_needed_text()}); change % = 100 x (ratio "
          "- 1); p: two-sided Mann-Whitney U of the per-rep values; * = "
          "significant: p < 0.05, ranges apart and |change| ≥ "
          f"{wl['threshold_pct']:g}%. Throughput below 1 and CPU cost above "
          "1 mean the file under two keys reads slower.")
    if plots.get("rekey"):
        doc.img(plots["rekey"], "twokeys / onekey per arm, and key work "
                "per read")
    rows = []
    for arm in run.ordered(wl["arms"]):
        for kind, e in wl["arms"][arm]["reads"].items():
            for m, label, fmt in METRICS:
                r = e["ratios"].get(m)
                if r is None:
                    rows.append((arm, kind, label, "no data", "", "", "", "",
                                 "", ""))
                    continue
                rows.append((arm, kind, label, fmt(r["median_den"]),
                             fmt(r["median_num"]), fmt_ratio(r["ratio"]),
                             fmt_ci_of(r), fmt_pct(r["change_pct"]),
                             fmt_p(r["p"]),
                             "*" if r["significant"] else ""))
            r = e["p99"]
            if r:
                rows.append((arm, kind, "p99 latency (bins merged over "
                             "reps)", "", "", fmt_ratio(r["ratio"]),
                             fmt_ci_of(r), "", "", ""))
    for arm, why in run.not_measured.items():
        rows.append((arm, "", f"skipped: {why}", "", "", "", "", "", "", ""))
    doc.table(["arm", "read", "metric", "onekey (median)",
               "twokeys (median)", "twokeys / onekey", "95% CI", "change",
               "p", "sig"], rows,
              ["raw data: `raw/<arm>/rep<N>/<read>-onekey.json` and "
               "`<read>-twokeys.json`, `cpu.tsv`"])
    doc.h(3, "Key work per read")
    doc.p("The count passes of the profiled repetition: each read once more "
          "from a cold cache with the fscrypt events recorded through "
          "tracefs (`profiles/<arm>/counts.tsv`); per read = the count over "
          "the I/Os fio made in that pass (`profiles/<arm>/count-<phase>."
          "json`: 128 KiB reads for seqread, 4 KiB for randread). HKDF "
          "derivations count every context (extent keys and others); an "
          "extent key is derived once per key it needs and then cached; a "
          "key-slot program is an AES key schedule, needed when a block's "
          "key is not in a slot. Lost events must be 0 for the counts to "
          "be whole.")
    rows = []
    for arm in run.ordered(wl["arms"]):
        cnt = wl["arms"][arm]["counts"]
        for _, one, two in wl["kinds"]:
            for p in (one, two):
                cp = cnt.get(p)
                if not cp:
                    rows.append((arm, f"`{p}`", "not counted", "", "", "",
                                 "", "", ""))
                    continue
                rows.append((arm, f"`{p}`",
                             "n/a" if cp["reads"] is None else cp["reads"],
                             *(_per_read(cp, c) for c in COUNTERS),
                             ("**" + str(cp["lost_events"]) + "**")
                             if cp["lost_events"] else 0))
    doc.table(["arm", "read", "reads (fio I/Os)", "lookups (per read)",
               "HKDF derivations (per read)", "extent keys derived "
               "(per read)", "key-slot programs (per read)",
               "key-slot evictions (per read)", "lost events"], rows,
              ["raw data: `profiles/<arm>/counts.tsv`, "
               "`profiles/<arm>/count-<phase>.json`"])
    doc.h(3, "The preparation's rekey")
    rows = []
    for arm in run.ordered(wl["arms"]):
        pr = wl["arms"][arm]["prep_rekey"]
        if not pr:
            rows.append((arm, "not recorded", "", "", "", "", ""))
            continue
        rows.append((arm, f"K{pr.get('from_seed', '?')} to "
                     f"K{pr.get('to_seed', '?')}",
                     pr.get("nr_dirs", "?"), pr.get("nr_names", "?"),
                     pr.get("nr_symlinks", "?"), pr.get("nr_files", "?"),
                     fmt_ns(pr.get("elapsed_ns"))))
    doc.table(["arm", "keys (seeds)", "dirs", "names", "symlinks", "files",
               "time (ioctl)"], rows,
              [f"raw data: `raw/<arm>/{PREP_REKEY}` (fscrypt_setup rekey; "
               "the subvolume held the directory bench and twokeys, its "
               "even blocks written)"])
