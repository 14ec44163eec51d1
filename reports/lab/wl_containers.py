"""The containers workload's analysis (reports plug-in, see
reports/lab/runmodel.py workload_module): container image generations over
snapshots (bench/workloads/containers).

The guest's preparation writes, per arm, raw/<arm>/generations.tsv: one
line per generation (gen, method: base, snapshot or copy, seconds of guest
time, overwritten_bytes, data_used_bytes: btrfs's data in use after it,
du_total, du_exclusive, du_set_shared: `btrfs filesystem du -s` of its
tree, note: why a snapshot was refused) and raw/<arm>/subvol-probe.txt
(whether a subvolume can be made inside the encrypted bench directory).
The timed phases are treeread-genG: the whole tree of generation G read
cold; the FIEMAP checks record the largest file of every generation
(labels genG-L<n>: extents and how many are shared).
"""

import os
import re

from reports.lab import labstats as L
from reports.lab.fmt import MIB, fmt_mib, fmt_ratio, isnum
from reports.lab.plots import _plt, _save, add_skipped_legend

KIND = "containers"
PHASE = re.compile(r"treeread-gen(?P<g>\d+)")
GEN_FIELDS = ("gen", "method", "seconds", "overwritten_bytes",
              "data_used_bytes", "du_total", "du_exclusive",
              "du_set_shared", "note")
LABEL = re.compile(r"gen(?P<g>\d+)-L\d+")


def owns_phases(phases):
    """Runs record their analysis kind; none is guessed from phase names."""
    return False


def judged_phases(phases):
    """Every phase (both tree reads) is judged against the goals."""
    return None


def _num(s):
    try:
        v = float(s)
    except (TypeError, ValueError):
        return None
    return int(v) if v.is_integer() and "." not in str(s) else v


def read_generations(path):
    """The rows of one generations.tsv as dicts (numbers parsed; "-" and
    empty fields are None), or None when the file is missing; a line that
    is not a generation (header, wrong field count) is skipped."""
    if not os.path.exists(path):
        return None
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < len(GEN_FIELDS) - 1 or not parts[0].isdigit():
                continue
            parts += [""] * (len(GEN_FIELDS) - len(parts))
            row = dict(zip(GEN_FIELDS, parts))
            for k in GEN_FIELDS:
                if k not in ("method", "note"):
                    row[k] = None if row[k] in ("", "-") else _num(row[k])
            rows.append(row)
    return sorted(rows, key=lambda r: r["gen"])


def _space(rows):
    """Space and time of the generations after the base: data in use per
    generation, growth per generation (MiB of data written per generation
    past the base) against the bytes it overwrote, and the seconds."""
    base = rows[0] if rows and rows[0]["method"] == "base" else None
    later = [r for r in rows if r["method"] != "base"]
    out = {"methods": sorted({r["method"] for r in later}),
           "base_used": base["data_used_bytes"] if base else None,
           "final_used": rows[-1]["data_used_bytes"] if rows else None,
           "base_seconds": base["seconds"] if base else None,
           "gen_seconds": [r["seconds"] for r in later],
           "gen_seconds_total": sum(r["seconds"] for r in later
                                    if isnum(r["seconds"])),
           "overwritten_total": sum(r["overwritten_bytes"] or 0
                                    for r in later)}
    prev, growth = out["base_used"], []
    for r in later:
        u = r["data_used_bytes"]
        growth.append(u - prev if isnum(u) and isnum(prev) else None)
        prev = u
    out["growth"] = growth
    g = [x for x in growth if isnum(x)]
    out["growth_mean"] = sum(g) / len(g) if g else None
    ow = out["overwritten_total"]
    # data the generations added per byte they overwrote: 1 = only the
    # new data (sharing), about 1 + tree/overwritten = full copies
    out["added_per_overwritten"] = (sum(g) / ow if g and ow else None)
    return out


def _sharing(run):
    """{arm: {gen: {"extents", "shared"}}} of the FIEMAP checks of the
    largest file per generation (median over the non-prepare checks)."""
    acc = {}
    for c in run.extent_checks:
        m = LABEL.fullmatch(str(c.get("label", "")))
        if not m or c.get("rep") == "prepare":
            continue
        d = acc.setdefault(c.get("arm"), {}).setdefault(int(m.group("g")),
                                                        {"extents": [],
                                                         "shared": []})
        for k in ("extents", "shared"):
            if isnum(c.get(k)):
                d[k].append(c[k])
    return {arm: {g: {k: (L.summary(v)["median"] if v else None)
                      for k, v in d.items()}
                  for g, d in sorted(gens.items())}
            for arm, gens in acc.items()}


def _reads(run):
    """Per arm: per treeread phase the throughput and CPU per MiB
    (summaries over reps), and the newest/oldest throughput ratio (paired
    by rep: how the generations' overwrites slow a tree read)."""
    phases = sorted((int(m.group("g")), p) for p in run.phases
                    for m in [PHASE.fullmatch(p)] if m)
    out = {}
    for arm in run.measured:
        per = {}
        for g, p in phases:
            reps = run.data.get(arm, {}).get(p) or {}
            bw = {r: d.bw_bytes for r, d in reps.items()
                  if isnum(d.bw_bytes)}
            cpu = [d.cpu_per_mib for d in reps.values()
                   if isnum(d.cpu_per_mib)]
            per[p] = {"gen": g, "bw_by_rep": bw,
                      "bw": L.summary(list(bw.values())) if bw else None,
                      "cpu_per_mib": L.summary(cpu) if cpu else None,
                      "io_bytes": next((d.io_bytes for d in
                                        reps.values()), None)}
        entry = {"phases": per}
        if len(phases) >= 2:
            old, new = per[phases[0][1]], per[phases[-1][1]]
            common = sorted(set(old["bw_by_rep"]) & set(new["bw_by_rep"]))
            rs = [new["bw_by_rep"][r] / old["bw_by_rep"][r] for r in common
                  if old["bw_by_rep"][r] > 0]
            entry["newest_over_oldest"] = L.summary(rs) if rs else None
        for p in per.values():
            p["bw_by_rep"] = {str(r): v for r, v in p["bw_by_rep"].items()}
        out[arm] = entry
    return out


def analyze(run, res):
    """res["workload"]: {"generations": {arm: [row]}, "space": {arm:
    _space()}, "probe": {arm: text}, "sharing": _sharing(), "reads":
    _reads()}, or None when no arm left a generations.tsv."""
    gens, probe = {}, {}
    for arm in run.measured:
        d = os.path.join(run.dir, "raw", arm)
        rows = read_generations(os.path.join(d, "generations.tsv"))
        if rows:
            gens[arm] = rows
        elif rows is None:
            run.warnings.append(f"raw/{arm}/generations.tsv: missing "
                                   "(the containers workload's preparation "
                                   "records each generation there)")
        p = os.path.join(d, "subvol-probe.txt")
        if os.path.exists(p):
            with open(p, encoding="utf-8") as f:
                probe[arm] = f.read().strip()
    if not gens:
        return None
    return {"generations": gens,
            "space": {a: _space(r) for a, r in gens.items()},
            "probe": probe, "sharing": _sharing(run), "reads": _reads(run)}


def plot(run, res, out_dir, colors):
    wl = res.get("workload")
    if not wl:
        return {}
    plt = _plt()
    fig, (a0, a1) = plt.subplots(1, 2, figsize=(11, 3.8))
    arms = run.ordered(wl["generations"])
    for arm in arms:
        rows = wl["generations"][arm]
        xs = [r["gen"] for r in rows]
        a0.plot(xs, [(r["data_used_bytes"] or 0) / MIB for r in rows], "o-",
                color=colors.get(arm), label=arm)
        a1.plot(xs[1:], [r["seconds"] or 0 for r in rows[1:]], "o-",
                color=colors.get(arm), label=arm)
    a0.set_ylabel("btrfs data in use (MiB)")
    a0.set_xlabel("after generation (0: the base tree)")
    a1.set_ylabel("guest seconds to make the generation\n"
                  "(snapshot or copy, then the overwrites)")
    a1.set_xlabel("generation")
    gens = sorted({r["gen"] for rows in wl["generations"].values()
                   for r in rows})
    a0.set_xticks(gens)
    a1.set_xticks(gens[1:])
    for ax in (a0, a1):
        ax.grid(alpha=0.3)
    add_skipped_legend(a0, run)
    a1.legend(fontsize=7)
    fig.suptitle("Image generations: space and time per generation",
                 fontsize=10)
    return {"containers": _save(fig, out_dir, "containers.png")}


def _mib(b):
    return fmt_mib(b) if isnum(b) else "n/a"


def render(doc, run, res, plots):
    doc.h(2, "Container image generations")
    wl = res.get("workload")
    if not wl:
        doc.p("Container generations: no arm recorded its generations "
              "(raw/<arm>/generations.tsv).")
        return
    doc.p("A base tree (generation 0, its own subvolume) and generations "
          "made one from the previous, each overwriting a part of the data "
          "in random places of random files (fixed seed). Where the kernel "
          "allows it a generation is a read-write snapshot, sharing every "
          "extent it does not overwrite; with per-inode keys it refuses "
          "the snapshot (EOPNOTSUPP: the snapshot's files would reuse "
          "their (key, tweak) pairs for new data), so the generation is a "
          "new subvolume with a full copy (`cp -a --reflink=never`). "
          "Seconds are guest time (under icount: instructions, not the "
          "host's clock).")
    if plots.get("containers"):
        doc.img(plots["containers"], "space and time per generation")
    rows = []
    for arm in run.ordered(wl["generations"]):
        for r in wl["generations"][arm]:
            rows.append((arm, r["gen"], r["method"],
                         "n/a" if r["seconds"] is None
                         else f"{r['seconds']:.2f}",
                         _mib(r["overwritten_bytes"]),
                         _mib(r["data_used_bytes"]), _mib(r["du_total"]),
                         _mib(r["du_exclusive"]), _mib(r["du_set_shared"])))
    for arm, why in run.not_measured.items():
        rows.append((arm, "", f"skipped: {why}", "", "", "", "", "", ""))
    doc.table(["arm", "gen", "method", "seconds", "overwritten MiB (base: "
               "written)", "data in use MiB", "tree MiB (du)",
               "exclusive MiB", "shared MiB"], rows,
              ["raw data: `raw/<arm>/generations.tsv`; data in use: "
               "`btrfs filesystem df`, whole filesystem, after a sync; "
               "du: `btrfs filesystem du -s` of that generation's tree"])
    rows = []
    for arm in run.ordered(wl["space"]):
        s = wl["space"][arm]
        rows.append((arm, ", ".join(s["methods"]), _mib(s["base_used"]),
                     _mib(s["final_used"]), _mib(s["growth_mean"]),
                     fmt_ratio(s["added_per_overwritten"]),
                     f"{s['gen_seconds_total']:.2f}"))
    doc.table(["arm", "generations by", "base MiB", "after the last MiB",
               "added per generation MiB (mean)",
               "added / overwritten", "seconds of all generations"], rows,
              ["added / overwritten: 1 when a generation costs only the "
               "data it rewrote; a full copy adds the whole tree"])
    rows = []
    for arm in run.ordered(wl["reads"]):
        e = wl["reads"][arm]
        for p, d in sorted(e["phases"].items(), key=lambda kv: kv[1]["gen"]):
            bw, cpu = d["bw"], d["cpu_per_mib"]
            rows.append((arm, p, bw["n"] if bw else 0,
                         fmt_mib(bw["median"]) if bw else "n/a",
                         f"{cpu['median'] * 1e3:.3g}" if cpu else "n/a",
                         _sh(wl["sharing"].get(arm, {}).get(d["gen"]))))
        r = e.get("newest_over_oldest")
        if r:
            rows.append((arm, "newest / oldest throughput", r["n"],
                         f"{fmt_ratio(r['median'])} (median of per-rep "
                         "ratios)", "", ""))
    doc.table(["arm", "phase", "n", "median MiB/s", "CPU ms per MiB "
               "(median)", "largest file: extents (shared)"], rows,
              ["the comparisons between arms and their verdicts are in the "
               "phase tables above"])
    if wl["probe"]:
        doc.h(3, "A subvolume inside the encrypted bench directory")
        for arm in run.ordered(wl["probe"]):
            doc.code(arm, wl["probe"][arm])


def _sh(d):
    if not d or not isnum(d.get("extents")):
        return ""
    return f"{d['extents']:g} ({d['shared']:g})" if isnum(
        d.get("shared")) else f"{d['extents']:g}"
