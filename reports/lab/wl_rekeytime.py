"""The rekeytime workload's analysis (reports plug-in, see
reports/lab/runmodel.py workload_module): the time of a rekey
(BTRFS_IOC_FSCRYPT_REKEY) against the number of names it moves
(bench/workloads/rekeytime).

Its phases are command phases rekey-nN (bench/guest/lib.sh, "Command
phases"), no fio: each rep's raw/<arm>/rep<R>/rekey-nN.tsv has what
`fscrypt_setup rekey` printed (from_seed, to_seed, from_key, to_key,
nr_dirs, nr_names, nr_symlinks, nr_files, elapsed_ns: CLOCK_MONOTONIC
around the ioctl) and what the driver added (cpu_units, cpu_units_per_s,
cpu_source, hence cpu_s: the CPU time of all CPUs around the whole
command). runmodel.load_run reads them into run.commands. Point N is a
subvolume of N empty files in directories of at most REKEY_DIR_NAMES
names, so the rekey moves N + ceil(N / REKEY_DIR_NAMES) names (the files'
and the directories') in ceil(N / REKEY_DIR_NAMES) + 1 directories. Per
arm and point: the time (median, min-max, CoV over reps), the cost per
name moved (time / nr_names, per rep), the CPU time, and the exponent of
the time's growth (log-log slope between points and over all: 1 is
linear in the names).
"""

import math
import re

from reports.lab import labstats as L
from reports.lab.fmt import fmt_ns, isnum
from reports.lab.plots import _plt, _save, add_skipped_legend

KIND = "rekeytime"
PHASE = re.compile(r"rekey-n(?P<n>\d+)")
COUNTS = ("nr_dirs", "nr_names", "nr_symlinks", "nr_files")


def owns_phases(phases):
    """Runs record their analysis kind; none is guessed from phase names."""
    return False


def judged_phases(phases):
    """Nothing of this workload is judged against the goals: it has no fio
    phase, and no arm is compared with a reference."""
    return []


def not_judged_text(run, phases):
    """The verdicts' line (analysis.verdicts): why nothing is judged."""
    return ("No phase of this run is judged: every phase is a command "
            "phase (the rekey ioctl, timed), not fio's, and each arm is "
            "measured against the number of names, not against a reference "
            "arm; see \"Rekey time against names\".")


def dir_names(run):
    """REKEY_DIR_NAMES as the run recorded it (workload_params), else the
    workload's 1000."""
    v = run.workload_params.get("REKEY_DIR_NAMES")
    try:
        return int(v) if int(v) > 0 else 1000
    except (TypeError, ValueError):
        return 1000


def expected_counts(n, per_dir):
    """What a rekey of point N moves: {nr_dirs, nr_names, nr_symlinks,
    nr_files} (the policy's directory d holds the directories, each of at
    most per_dir files)."""
    dirs = -(-n // per_dir)
    return {"nr_dirs": dirs + 1, "nr_names": n + dirs, "nr_symlinks": 0,
            "nr_files": n}


def _median(by_rep):
    """The median of a count over reps, whole counts as ints; None if no
    rep has it."""
    if not by_rep:
        return None
    m = L.summary(list(by_rep.values()))["median"]
    return int(m) if float(m).is_integer() else m


def slope(x0, y0, x1, y1):
    """d log y / d log x between two points, None where undefined."""
    if not all(isnum(v) and v > 0 for v in (x0, y0, x1, y1)) or x0 == x1:
        return None
    return math.log(y1 / y0) / math.log(x1 / x0)


def fit_exponent(xs, ys):
    """Least-squares slope of log y against log x (the exponent of a power
    law y = c x^k), None with fewer than two usable points."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys)
           if isnum(x) and isnum(y) and x > 0 and y > 0]
    if len({p[0] for p in pts}) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def load_points(run):
    """{arm: [point]} of the measured arms, points by N: phase, nominal N,
    per-rep elapsed_ns, ns_per_name and cpu_s with their summaries, the
    counts moved (median over reps; a rep that moved other counts than
    the others is noted), the counts expected, and the directions (keys
    moved from and to) seen."""
    phases = sorted(((int(m.group("n")), p)
                     for p in run.command_phases
                     for m in [PHASE.fullmatch(p)] if m))
    per_dir = dir_names(run)
    out = {}
    for arm in run.measured:
        pts = []
        for n, phase in phases:
            el = run.command_values(arm, phase, "elapsed_ns")
            if not el:
                continue
            names = run.command_values(arm, phase, "nr_names")
            per_name = {r: el[r] / names[r] for r in el
                        if names.get(r, 0) > 0}
            cpu = run.command_values(arm, phase, "cpu_s")
            reps = run.commands[arm][phase]
            counts = {c: _median(run.command_values(arm, phase, c))
                      for c in COUNTS}
            differ = sorted({c for c in COUNTS
                             if len(set(run.command_values(arm, phase,
                                                       c).values())) > 1})
            dirs = sorted({f"K{d.get('from_seed', '?')} to "
                           f"K{d.get('to_seed', '?')}"
                           for d in reps.values()})
            pts.append({
                "phase": phase, "nominal": n,
                "names": counts["nr_names"], "counts": counts,
                "expected": expected_counts(n, per_dir),
                "counts_differ_between_reps": differ,
                "directions": dirs,
                "elapsed_ns_by_rep": el,
                "elapsed_ns": L.summary(list(el.values())),
                "ns_per_name_by_rep": per_name,
                "ns_per_name": (L.summary(list(per_name.values()))
                                if per_name else None),
                "cpu_s": L.summary(list(cpu.values())) if cpu else None,
                "files": [d["file"] for _, d in sorted(reps.items())
                          if d.get("file")]})
        if pts:
            out[arm] = pts
    return out


def analyze(run, res):
    """res["workload"]: {"dir_names": REKEY_DIR_NAMES, "arms": {arm:
    {"points": load_points(), "exponent": fit over the points,
    "slopes": between consecutive points}}}, or None when no arm has a
    rekey result. A point whose counts are not those expected is a
    warning."""
    pts = load_points(run)
    if not pts:
        return None
    arms = {}
    for arm, ps in pts.items():
        xs = [p["names"] if isnum(p["names"]) else p["nominal"] for p in ps]
        ys = [p["elapsed_ns"]["median"] for p in ps]
        for p in ps:
            got = {c: p["counts"][c] for c in COUNTS}
            if got != p["expected"]:
                run.warnings.append(
                    f"{arm} {p['phase']}: the rekey moved {got}, the "
                    f"workload's layout gives {p['expected']}")
            if p["counts_differ_between_reps"]:
                run.warnings.append(
                    f"{arm} {p['phase']}: the reps moved different "
                    f"{', '.join(p['counts_differ_between_reps'])}")
        arms[arm] = {"points": ps, "exponent": fit_exponent(xs, ys),
                     "slopes": [slope(xs[i], ys[i], xs[i + 1], ys[i + 1])
                                for i in range(len(ps) - 1)]}
    return {"dir_names": dir_names(run), "arms": arms}


def _x(p):
    return p["names"] if isnum(p["names"]) else p["nominal"]


def _per_name_text(p):
    s = p["ns_per_name"]
    return "n/a" if not s else f"{s['median'] / 1e3:.3g} µs/name"


def plot(run, res, out_dir, colors):
    """rekeytime.png: (1) the rekey's time against the names it moved,
    log-log, per arm (median, whiskers min-max), each point annotated with
    its cost per name; (2) the cost per name against the names (log x)."""
    wl = res.get("workload")
    if not wl:
        return {}
    plt = _plt()
    fig, (ax, axp) = plt.subplots(1, 2, figsize=(12, 4.4))
    ticks = set()
    for arm in run.ordered(wl["arms"]):
        ps = wl["arms"][arm]["points"]
        xs = [_x(p) for p in ps]
        ticks.update(xs)
        t = [p["elapsed_ns"] for p in ps]
        med = [s["median"] / 1e6 for s in t]
        ax.errorbar(xs, med, yerr=[[m - s["min"] / 1e6 for m, s in
                                    zip(med, t)],
                                   [s["max"] / 1e6 - m for m, s in
                                    zip(med, t)]],
                    fmt="o-", capsize=3, color=colors.get(arm),
                    label=f"{arm} (exponent "
                          f"{wl['arms'][arm]['exponent']:.2f})"
                    if isnum(wl["arms"][arm]["exponent"]) else arm)
        for x, m, p in zip(xs, med, ps):
            ax.annotate(_per_name_text(p), (x, m), textcoords="offset "
                        "points", xytext=(6, -10), fontsize=7,
                        color=colors.get(arm))
        pp = [(x, p["ns_per_name"]) for x, p in zip(xs, ps)
              if p["ns_per_name"]]
        if pp:
            pm = [s["median"] / 1e3 for _, s in pp]
            axp.errorbar([x for x, _ in pp], pm,
                         yerr=[[m - s["min"] / 1e3 for m, (_, s) in
                                zip(pm, pp)],
                               [s["max"] / 1e3 - m for m, (_, s) in
                                zip(pm, pp)]],
                         fmt="o-", capsize=3, color=colors.get(arm),
                         label=arm)
    from matplotlib.ticker import (FormatStrFormatter, LogLocator,
                                   NullLocator)
    ax.set_xscale("log")
    ax.set_yscale("log")
    # labelled ticks at 1, 2 and 5 x 10^k: the line may span less than a
    # decade, where plain log ticks leave the axis unlabelled
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_ylabel("rekey time, ms (ioctl; median, min-max; log)")
    ax.set_title("Rekey time against names moved (labels: cost per name)",
                 fontsize=10)
    add_skipped_legend(ax, run)
    axp.set_xscale("log")
    axp.set_ylim(0, axp.get_ylim()[1] * 1.15)
    axp.set_ylabel("µs per name moved (time / names; median, min-max)")
    axp.set_title("Cost per name", fontsize=10)
    axp.legend(fontsize=7)
    for a in (ax, axp):
        a.set_xticks(sorted(ticks))
        a.set_xticklabels([f"{t:g}" for t in sorted(ticks)], fontsize=8)
        a.xaxis.set_minor_locator(NullLocator())
        a.margins(x=0.15)
        a.set_xlabel("names moved (files and directories; log)")
        a.grid(alpha=0.3, which="both")
    fig.suptitle("BTRFS_IOC_FSCRYPT_REKEY, K1 to K2, from a cold cache: "
                 f"directories of at most {wl['dir_names']} names",
                 fontsize=10)
    return {"rekeytime": _save(fig, out_dir, "rekeytime.png")}


def render(doc, run, res, plots):
    doc.h(2, "Rekey time against names")
    wl = res.get("workload")
    if not wl:
        doc.p("Rekey time: not measured (no arm recorded a rekey: "
              "raw/<arm>/rep<N>/rekey-n<N>.tsv)"
              + "".join(f"; {a} skipped: {w}"
                        for a, w in run.not_measured.items()) + ".")
        return
    doc.p("Point N: a subvolume whose encrypted directory (v2 policy under "
          "K1) holds N empty files in directories of at most "
          f"{wl['dir_names']} names, prepared once; in every rep, after "
          "sync and dropped caches, `fscrypt_setup rekey` moves it to K2 "
          "(`BTRFS_IOC_FSCRYPT_REKEY`: every directory's names and every "
          "inode's context, one transaction per directory, committed "
          "before it returns; no file data). Time: `CLOCK_MONOTONIC` "
          "around the ioctl alone; per name: time / names moved (the "
          "files' and the directories'), per rep; CPU: all CPUs around the "
          "whole command (the tool's start and key setup included). "
          "Exponent: the log-log slope of the median time against the "
          "names (1: linear). Times under TCG or icount are not hardware "
          "times: read the shape, not the values.")
    if plots.get("rekeytime"):
        doc.img(plots["rekeytime"], "rekey time against names, log-log")
    rows = []
    for arm in run.ordered(wl["arms"]):
        e = wl["arms"][arm]
        for i, p in enumerate(e["points"]):
            t, c, pn = p["elapsed_ns"], p["cpu_s"], p["ns_per_name"]
            cnt = p["counts"]
            rows.append((
                arm, p["nominal"],
                "/".join("-" if cnt[k] is None else f"{cnt[k]:g}"
                         for k in ("nr_names", "nr_dirs", "nr_files",
                                   "nr_symlinks")),
                ", ".join(p["directions"]), t["n"], fmt_ns(t["median"]),
                f"{fmt_ns(t['min'])}-{fmt_ns(t['max'])}",
                f"{t['cov']:.3f}" if isnum(t.get("cov")) else "n/a",
                "n/a" if not pn else f"{pn['median'] / 1e3:.3g}",
                "n/a" if not c else f"{c['median']:.3g}",
                "-" if i == 0 or e["slopes"][i - 1] is None
                else f"{e['slopes'][i - 1]:.2f}"))
        rows.append((arm, "all", "", "", "", "", "", "", "", "",
                     "n/a" if e["exponent"] is None
                     else f"fit {e['exponent']:.2f}"))
    for arm, why in run.not_measured.items():
        rows.append((arm, "", f"skipped: {why}", "", "", "", "", "", "", "",
                     ""))
    doc.table(["arm", "N (files)", "moved: names/dirs/files/symlinks",
               "keys", "n", "time (median)", "min-max", "CoV",
               "µs per name (median)", "CPU s (median)",
               "exponent from the previous point"], rows,
              ["raw data: `raw/<arm>/rep<N>/rekey-n<N>.tsv` (fscrypt_setup "
               "rekey's lines and the driver's CPU time)"])
