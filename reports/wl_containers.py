"""Report plug-in of the containers workload (bench/workloads/containers):
what each generation of the container image cost to make (a snapshot, or
on per-inode keys, whose snapshots the kernel refuses, a full copy) and
the space each generation took, beside the cold reads the generic report
tables and judges. Reads raw/<arm>/containers-prep.tsv (prep number,
generation, key, value), which the workload's wl_prep writes.
"""

import os

from reports import labstats as L
from reports.fmt import MIB, fmt_mib, isnum
from reports.runmodel import bw_by_rep

KIND = "containers"
PREP_FILE = "containers-prep.tsv"
INT_KEYS = ("make_ms", "overwrite_ms", "overwrite_writes", "overwrite_bytes",
            "tree_bytes", "du_total", "du_exclusive", "du_set_shared",
            "df_used_kib")


def owns_phases(phases):
    """Old runs without an analysis kind are never containers runs."""
    return False


def judged_phases(run):
    """Every phase is judged (the reads of snapshots against copies)."""
    return None


def read_prep(path):
    """{prep: {gen: {key: value}}} of one arm's containers-prep.tsv;
    numbers as int, other values as str; bad lines are skipped."""
    out = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            row = line.rstrip("\n").split("\t")
            if len(row) != 4 or not row[0].isdigit() or not row[1].isdigit():
                continue
            prep, gen, key, value = int(row[0]), int(row[1]), row[2], row[3]
            if key in INT_KEYS:
                try:
                    value = int(value)
                except ValueError:
                    continue
            out.setdefault(prep, {}).setdefault(gen, {})[key] = value
    return out


def analyze(run, res):
    """Per measured arm: the generations of its first preparation (how
    each was made, ms to make it and to overwrite, bytes overwritten, the
    tree's bytes, btrfs du total/exclusive/shared, df used after all were
    made), the space of all generations over that of gen0, and the median
    throughput of each phase. None when no arm recorded a preparation."""
    arms = {}
    for arm in run["measured"]:
        path = os.path.join(run["dir"], "raw", arm, PREP_FILE)
        if not os.path.exists(path):
            continue
        preps = read_prep(path)
        if not preps:
            continue
        gens = preps[min(preps)]
        rows = [{"gen": g, **gens[g]} for g in sorted(gens)]
        df = [r.get("df_used_kib") for r in rows if isnum(r.get("df_used_kib"))]
        tree0 = rows[0].get("tree_bytes") if rows else None
        later = [r for r in rows if r["gen"] > 0]
        arms[arm] = {
            "preps": len(preps),
            "generations": rows,
            "make": sorted({r.get("make", "?") for r in later}),
            "make_ms_later": sum(r.get("make_ms", 0) for r in later),
            "overwrite_ms": sum(r.get("overwrite_ms", 0) for r in later),
            "df_used_kib": df[-1] if df else None,
            "du_exclusive_sum": sum(r.get("du_exclusive", 0) for r in rows),
            "logical_bytes": sum(r.get("tree_bytes", 0) for r in rows),
            "space_over_gen0": (df[-1] * 1024.0 / tree0
                                if df and isnum(tree0) and tree0 else None),
            "bw_median": {p: L.summary(bw_by_rep(run, arm, p).values())
                          ["median"] for p in run["phases"]},
        }
    return {"arms": arms, "skipped": dict(run["not_measured"])} if arms \
        else None


def plot(run, res, out_dir, colors):
    """space.png: df used after every generation was made, and the time
    to make the later generations, per arm."""
    w = res.get("workload")
    if not w:
        return {}
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(w["arms"])
    fig, (ax, axt) = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, a in enumerate(names):
        e = w["arms"][a]
        ax.bar(i, (e["df_used_kib"] or 0) / 1024.0, color=colors.get(a))
        ax.bar(i, e["logical_bytes"] / MIB, fill=False, edgecolor="black",
               ls="--")
        axt.bar(i, e["make_ms_later"] / 1000.0, color=colors.get(a))
    for a_ in (ax, axt):
        a_.set_xticks(range(len(names)))
        a_.set_xticklabels(names, fontsize=8, rotation=15)
    ax.set_ylabel("MiB used (df; dashed: bytes of all trees)")
    ax.set_title("space of all generations", fontsize=10)
    axt.set_ylabel("guest s")
    axt.set_title("making generations 1.. (snapshot or copy)", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "containers.png"), dpi=110)
    plt.close(fig)
    return {"containers": "containers.png"}


def render(doc, run, res, plots):
    w = res.get("workload")
    doc.h(2, "Container generations: snapshots and copies")
    if not w:
        doc.p("No arm recorded its preparation (raw/<arm>/"
              f"{PREP_FILE}): nothing to show.")
        return
    doc.p("Each generation after gen0 is a read-write snapshot of the one "
          "before, then a part of its bytes overwritten at random places. "
          "On per-inode keys the kernel refuses the snapshot (a key and "
          "tweak would be reused when both copies are written), so there a "
          "generation is a new subvolume with a full copy (`cp -a "
          "--reflink=never`). Times are guest time (under icount: "
          "instructions), sync included; space after all generations "
          "were made (first preparation of the arm).")
    if plots.get("containers"):
        doc.img(plots["containers"], "space and time of the generations")
    rows = []
    for arm, e in w["arms"].items():
        rows.append((arm, ", ".join(e["make"]),
                     f"{e['make_ms_later'] / 1000.0:.1f}",
                     f"{e['overwrite_ms'] / 1000.0:.1f}",
                     fmt_mib(e["logical_bytes"]),
                     "n/a" if e["df_used_kib"] is None
                     else f"{e['df_used_kib'] / 1024.0:.1f}",
                     "n/a" if e["space_over_gen0"] is None
                     else f"{e['space_over_gen0']:.2f}",
                     *(fmt_mib(e["bw_median"].get(p)) for p in run["phases"])))
    for arm, why in w["skipped"].items():
        rows.append((arm, f"skipped: {why}", "", "", "", "", "",
                     *("" for _ in run["phases"])))
    doc.table(["arm", "generations made by", "s to make them",
               "s to overwrite", "MiB in all trees", "MiB used (df)",
               "used / gen0 tree",
               *(f"{p} median MiB/s" for p in run["phases"])], rows,
              [f"raw data: `raw/<arm>/{PREP_FILE}`"])
    for arm, e in w["arms"].items():
        doc.h(3, f"{arm}: per generation")
        doc.table(["gen", "made by", "ms", "overwrite ms", "writes",
                   "MiB overwritten", "tree MiB", "du total MiB",
                   "du exclusive MiB", "du shared MiB"],
                  [(g["gen"], g.get("make", "?"), g.get("make_ms", ""),
                    g.get("overwrite_ms", "-"), g.get("overwrite_writes", "-"),
                    fmt_mib(g.get("overwrite_bytes")),
                    fmt_mib(g.get("tree_bytes")), fmt_mib(g.get("du_total")),
                    fmt_mib(g.get("du_exclusive")),
                    fmt_mib(g.get("du_set_shared")))
                   for g in e["generations"]])
