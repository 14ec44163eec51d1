"""The scaling workload's analysis (reports plug-in, see
reports/lab/runmodel.py workload_module): cost against the extent count.

Its phases are KIND-eN (bench/workloads/scaling/hooks.sh): the same read
KIND over a file of at least N extents. Runs from before the scaling
workload, collected with a scaling.json ({arm: [{"extents", "bw_bytes"}]}),
are read too (legacy_applies).

Since the scaling workload reaches 1048576 extents (issue #22 item 4), every
extent of a point's file is one 4 KiB block and each phase reads a fixed
amount, so the extents a phase touches are its bytes read / 4 KiB; the
cost per extent is the phase's CPU time over them (cost_per_extent), and
the fscrypt and btrfs slab caches' memory after each read is read from
raw/<arm>/rep<N>/<phase>.slabinfo (slab, SLAB_CACHES).
"""

import os
import re

from reports.lab import labstats as L
from reports.lab.fmt import fmt_mib, isnum
from reports.lab.plots import _plt, _save, add_skipped_legend
from reports.lab.profiles import parse_slabinfo
from reports.lab.runmodel import RunError, read_json_file

KIND = "scaling"
BLOCK = 4096
# The slab caches whose memory is plotted against the extent count: the
# per-file and per-extent fscrypt state, and btrfs' in-memory extents and
# inodes (the "fscrypt" total sums every fscrypt_* cache found).
SLAB_CACHES = ("fscrypt_info", "fscrypt_inode_info", "fscrypt_extent_info",
               "fscrypt_extent_key", "btrfs_extent_map", "btrfs_inode")
PHASE = re.compile(r"(?P<kind>[A-Za-z]+)-e(?P<n>\d+)")


def owns_phases(phases):
    """A run that did not record its analysis kind (run format 2) is a
    scaling run when a phase is named KIND-eN."""
    return any(PHASE.fullmatch(p) for p in phases)


def judged_phases(phases):
    """Every phase is judged against the goals."""
    return None


def legacy_applies(run):
    """A run of another kind that carries a scaling.json of the old lab."""
    return os.path.exists(os.path.join(run.dir, "scaling.json"))


def analyze(run, res):
    """res["workload"]: see load_scaling."""
    return load_scaling(run)


def plot(run, res, out_dir, colors):
    out = {}
    for name, fn in (("scaling", plot_scaling),
                     ("scaling-cpu", plot_cost_per_extent),
                     ("scaling-slab", plot_slab)):
        path = fn(run, res.get("workload"), out_dir, colors)
        if path:
            out[name] = path
    return out


def render(doc, run, res, plots):
    section_scaling(doc, run, res, plots)


def _count(x):
    """An extent count as written: whole counts as integers (1048576, not
    1.04858e+06), a median between two counts with its fraction."""
    return str(int(x)) if float(x).is_integer() else f"{x:.1f}"


def _scaling_point(extents, bw, **extra):
    bw = [float(x) for x in (bw if isinstance(bw, list) else [bw])]
    cost = [4096.0 / x * 1e6 for x in bw if x > 0]
    return {"extents": extents, "bw_bytes": bw, "summary": L.summary(bw),
            "cost_us_per_4k": L.summary(cost), **extra}


def cost_per_extent(reps):
    """CPU µs per extent touched, per rep: cpu_s / (io_bytes / 4 KiB)
    (every extent of a scaling file is one 4 KiB block). reps: the rep
    (runmodel.RepValue) of one arm and phase; a rep without CPU time or bytes is left
    out. Returns {"per_rep": [...], "summary": labstats.summary or None,
    "extents_touched": [...]}."""
    vals, touched = [], []
    for d in reps:
        cpu, nbytes = d.cpu_s, d.io_bytes or 0
        if not isnum(cpu) or nbytes < BLOCK:
            continue
        n = nbytes // BLOCK
        touched.append(n)
        vals.append(cpu / n * 1e6)
    return {"per_rep": vals, "extents_touched": touched,
            "summary": L.summary(vals) if vals else None}


def slab_bytes(caches):
    """{name: bytes} of SLAB_CACHES found in caches (parse_slabinfo's
    output), plus "fscrypt": the sum over every fscrypt_* cache."""
    out = {c: caches[c]["bytes"] for c in SLAB_CACHES if c in caches}
    fs = [v["bytes"] for k, v in caches.items() if k.startswith("fscrypt_")]
    if fs:
        out["fscrypt"] = sum(fs)
    return out


def slab_of(run_dir, reps):
    """Median over reps of slab_bytes of each rep's PHASE.slabinfo (beside
    its fio json, rep.file); {} when no rep has one."""
    per = {}
    for d in reps:
        rel = d.file or ""
        if not rel.endswith(".json"):
            continue
        path = os.path.join(run_dir, rel[:-len(".json")] + ".slabinfo")
        if not os.path.exists(path):
            continue
        try:
            got = slab_bytes(parse_slabinfo(path))
        except OSError:
            continue
        for k, v in got.items():
            per.setdefault(k, []).append(v)
    return {k: L.summary(v)["median"] for k, v in per.items()}


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
    phases = [(p, PHASE.fullmatch(p)) for p in run.phases
              if run.analysis == "scaling"]
    phases = [(p, m.group("kind"), int(m.group("n"))) for p, m in phases
              if m]
    if phases:
        counts = run.timed_extent_counts()
        reads = {}
        for phase, kind, n in phases:
            for arm in run.measured:
                reps = run.data[arm][phase]
                if not reps:
                    continue
                got = [x for x in counts.get((arm, f"e{n}"), [])
                       if isnum(x)]
                x = L.summary(got)["median"] if got else n
                rds = [d for _, d in sorted(reps.items())]
                reads.setdefault(kind, {}).setdefault(arm, []).append(
                    _scaling_point(x, [d.bw_bytes for d in rds],
                                   nominal=n, phase=phase,
                                   files=[d.file for d in rds],
                                   cost_per_extent=cost_per_extent(rds),
                                   slab=slab_of(run.dir, rds)))
        for kind in reads:
            for arm in reads[kind]:
                reads[kind][arm].sort(key=lambda p: p["nominal"])
        return {"source": "phases", "reads": reads} if reads else None
    path = os.path.join(run.dir, "scaling.json")
    if not os.path.exists(path):
        return None
    try:
        raw = read_json_file(path)
    except RunError as e:
        run.warnings.append(str(e))
        return None
    out = {}
    for arm in run.ordered(raw if isinstance(raw, dict) else {}):
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
            ax.set_xticklabels([_count(t) for t in ticks], fontsize=8)
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
                             _count(p["extents"]), p["summary"]["n"],
                             fmt_mib(p["summary"]["median"]),
                             f"{c['median']:.1f}",
                             f"{c['min']:.1f}-{c['max']:.1f}",
                             f"{c['median'] / base:.3f}"))
    for arm, why in run.not_measured.items():
        rows.append(("all", arm, "", "", 0, f"skipped: {why}", "", "", ""))
    src = ("`raw/<arm>/rep<N>/<kind>-e<N>.json`" if sc["source"] == "phases"
           else "`scaling.json`")
    doc.table(["read", "arm", "promised extents", "extents (FIEMAP)", "n",
               "median MiB/s", "µs per 4 KiB (median)", "min-max",
               "relative to fewest"], rows, [f"raw data: {src}"])
    section_cost_per_extent(doc, run, sc, plots)


def _log_axes(ax, ticks):
    from matplotlib.ticker import (FormatStrFormatter, LogLocator,
                                   NullLocator)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(ticks)
    ax.set_xticklabels([_count(t) for t in ticks], fontsize=8)
    ax.xaxis.set_minor_locator(NullLocator())
    # labelled ticks at 1, 2 and 5 x 10^k: the lines often span less than
    # a decade, where plain log ticks would leave the axis unlabelled
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("extents in the file (FIEMAP; log)")
    ax.grid(alpha=0.3, which="both")


def plot_cost_per_extent(run, scaling, out_dir, colors):
    """Log-log: CPU µs per extent touched (median over reps, whiskers
    min-max) against the file's extent count, one panel per read kind, one
    line per arm. None without CPU data."""
    if not scaling:
        return None
    reads = {k: {a: [p for p in pts if (p.get("cost_per_extent") or {})
                     .get("summary")] for a, pts in arms.items()}
             for k, arms in scaling["reads"].items()}
    reads = {k: {a: pts for a, pts in arms.items() if pts}
             for k, arms in reads.items()}
    reads = {k: arms for k, arms in reads.items() if arms}
    if not reads:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, len(reads), figsize=(5.5 * len(reads), 4),
                             squeeze=False)
    for ax, (kind, arms) in zip(axes[0], sorted(reads.items())):
        ticks = set()
        for arm, pts in arms.items():
            xs = [p["extents"] for p in pts]
            ticks.update(p.get("nominal", p["extents"]) for p in pts)
            c = [p["cost_per_extent"]["summary"] for p in pts]
            med = [x["median"] for x in c]
            ax.errorbar(xs, med, yerr=[[m - x["min"] for m, x in zip(med, c)],
                                       [x["max"] - m for m, x in zip(med, c)]],
                        fmt="o-", capsize=3, color=colors.get(arm), label=arm)
        _log_axes(ax, sorted(ticks))
        ax.set_ylabel("CPU µs per extent read (log)")
        ax.set_title(kind, fontsize=10)
        ax.legend(fontsize=7)
    add_skipped_legend(axes[0][0], run)
    fig.suptitle("Read cost per extent against extent count "
                 "(CPU time / extents touched; lower is cheaper)", fontsize=10)
    return _save(fig, out_dir, "scaling-cpu.png")


def slab_rows(scaling):
    """[(arm, nominal, extents, {cache: bytes})] after the sequential read
    (the kind "seqread", else the first kind), points with slab data."""
    if not scaling:
        return []
    reads = scaling["reads"]
    kind = "seqread" if "seqread" in reads else (sorted(reads) or [None])[0]
    rows = []
    for arm, pts in (reads.get(kind) or {}).items():
        for p in pts:
            if p.get("slab"):
                rows.append((arm, p.get("nominal", p["extents"]),
                             p["extents"], p["slab"]))
    return rows


def plot_slab(run, scaling, out_dir, colors):
    """Log-log: the memory of the fscrypt caches (their sum) and of
    btrfs_extent_map and btrfs_inode after the sequential read, against the
    extent count, one line per arm. None without slabinfo files."""
    rows = slab_rows(scaling)
    if not rows:
        return None
    panels = [c for c in ("fscrypt", "fscrypt_extent_info",
                          "fscrypt_extent_key", "btrfs_extent_map")
              if any(r[3].get(c) for r in rows)]
    if not panels:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4),
                             squeeze=False)
    ticks = sorted({r[1] for r in rows})
    for ax, cache in zip(axes[0], panels):
        for arm in dict.fromkeys(r[0] for r in rows):
            pts = [(r[2], r[3][cache] / 1024.0) for r in rows
                   if r[0] == arm and r[3].get(cache)]
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts], "o-",
                        color=colors.get(arm), label=arm)
        _log_axes(ax, ticks)
        ax.set_ylabel("KiB in the cache (num_objs x objsize; log)")
        ax.set_title(cache if cache != "fscrypt" else "all fscrypt_* caches",
                     fontsize=10)
        ax.legend(fontsize=7)
    fig.suptitle("Slab memory after the sequential read against extent "
                 "count (median over reps)", fontsize=10)
    return _save(fig, out_dir, "scaling-slab.png")


def section_cost_per_extent(doc, run, sc, plots):
    """Cost per extent and slab memory (runs with CPU data or slabinfo)."""
    rows = []
    for kind, arms in sorted(sc["reads"].items()):
        for arm, pts in arms.items():
            for p in pts:
                c = (p.get("cost_per_extent") or {}).get("summary")
                if not c:
                    continue
                touched = p["cost_per_extent"]["extents_touched"]
                rows.append((kind, arm, p.get("nominal", ""),
                             _count(p["extents"]), c["n"],
                             f"{min(touched)}" if touched else "",
                             f"{c['median']:.2f}",
                             f"{c['min']:.2f}-{c['max']:.2f}"))
    if rows:
        doc.h(3, "Read cost per extent")
        doc.p("CPU time of the phase (the guest's, over fio's I/O) divided "
              "by the extents it touched: bytes read / 4 KiB, since every "
              "extent of a scaling file is one 4 KiB block; both reads "
              "touch the same number of extents at every point, so only "
              "the file's extent count changes.")
        if plots.get("scaling-cpu"):
            doc.img(plots["scaling-cpu"], "CPU cost per extent against "
                    "extent count, log-log")
        doc.table(["read", "arm", "promised extents", "extents (FIEMAP)",
                   "n", "extents touched", "CPU µs per extent (median)",
                   "min-max"], rows)
    slab = slab_rows(sc)
    if slab:
        doc.h(3, "Slab memory")
        doc.p("The fscrypt and btrfs slab caches after the sequential read "
              "of each point (`raw/<arm>/rep<N>/<phase>.slabinfo`, written "
              "by the workload's wl_after_phase hook; KiB = num_objs x "
              "objsize / 1024, median over reps). \"fscrypt\" sums every "
              "fscrypt_* cache.")
        if plots.get("scaling-slab"):
            doc.img(plots["scaling-slab"], "slab memory against extent "
                    "count, log-log")
        caches = [c for c in ("fscrypt",) + SLAB_CACHES
                  if any(c in r[3] for r in slab)]
        doc.table(["arm", "promised extents", "extents (FIEMAP)"] +
                  [f"{c} KiB" for c in caches],
                  [(arm, n, _count(x)) + tuple(
                      f"{s[c] / 1024.0:.0f}" if c in s else "" for c in caches)
                   for arm, n, x, s in slab])
