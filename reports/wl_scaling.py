"""The scaling workload's analysis (reports plug-in, see
reports/runmodel.py workload_module): cost against the extent count.

Its phases are KIND-eN (bench/workloads/scaling/hooks.sh): the same read
KIND over a file of at least N extents. Runs from before the scaling
workload, collected with a scaling.json ({arm: [{"extents", "bw_bytes"}]}),
are read too (legacy_applies).
"""

import os
import re

from reports import labstats as L
from reports.fmt import fmt_mib, isnum
from reports.plots import _plt, _save, add_skipped_legend
from reports.runmodel import RunError, arm_order, read_json_file

KIND = "scaling"
PHASE = re.compile(r"(?P<kind>[A-Za-z]+)-e(?P<n>\d+)")


def owns_phases(phases):
    """A run that did not record its analysis kind (run format 2) is a
    scaling run when a phase is named KIND-eN."""
    return any(PHASE.fullmatch(p) for p in phases)


def judged_phases(run):
    """Every phase is judged against the goals."""
    return None


def legacy_applies(run):
    """A run of another kind that carries a scaling.json of the old lab."""
    return os.path.exists(os.path.join(run["dir"], "scaling.json"))


def analyze(run, res):
    """res["workload"]: see load_scaling."""
    return load_scaling(run)


def plot(run, res, out_dir, colors):
    path = plot_scaling(run, res.get("workload"), out_dir, colors)
    return {"scaling": path} if path else {}


def render(doc, run, res, plots):
    section_scaling(doc, run, res, plots)


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
    phases = [(p, PHASE.fullmatch(p)) for p in run["phases"]
              if run["analysis"] == "scaling"]
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
    for arm in arm_order(run, raw if isinstance(raw, dict) else {}):
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


def section_scaling(doc, run, res, plots):
    doc.h(2, "Scaling with extent count")
    sc = res.get("workload")
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
