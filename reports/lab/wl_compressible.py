"""The compressible workload's analysis (reports plug-in, see
reports/lab/runmodel.py workload_module): a fragmented file of compressible
data on btrfs mounted with compress=zstd, encrypted with per-extent keys
(btrfs-extent-zstd: data compressed, then the compressed extent
encrypted) against unencrypted (btrfs-plain-zstd), issue #25
(bench/workloads/compressible).

Two things, per arm:

  - the ratios of the pairs of arms that tell what encryption and
    compression cost (PAIRS): btrfs-extent-zstd / btrfs-plain-zstd first
    (the question: encryption on compressed data), then, where the run has
    both arms, encryption on uncompressed data (btrfs-extent /
    btrfs-plain) and compression with and without encryption. Each is the
    report's comparison (analysis.comparison: throughput, CPU cost per MiB
    and per I/O paired by rep, geometric mean, bootstrap CI, significance;
    p99 latency), per phase;
  - the bytes on disk of the prepared file, raw/<arm>/disk-bytes.tsv
    (bench/workloads/compressible/hooks.sh cz_disk_bytes, "name<TAB>value"
    lines): its size, the bytes its file extent items reference, the
    uncompressed and on-disk bytes of its extents (each counted once, as
    compsize counts), how many are compressed, the mount's compression,
    and compsize's numbers beside them where compsize could read the file
    (or its error: compsize 1.5 refuses the longer file extent items of
    encrypted extents). Compression ratio = uncompressed / on-disk bytes
    (compsize's "Perc" is the inverse); the guest already failed the run
    when a compressing mount left the file uncompressed or compsize
    disagreed with the items.

No phase is judged against the goals of the main comparison (per-extent
against per-inode keys): this workload's question is another pair.
"""

import os

from reports.lab.analysis import comparison
from reports.lab.fmt import MIB, fmt_ci_of, fmt_p, fmt_pct, fmt_ratio, isnum
from reports.lab.plots import _plt, _save, add_skipped_legend
from reports.lab.runmodel import Comparison, read_command_result

KIND = "compressible"
DISK_BYTES = "disk-bytes.tsv"
# The pairs (A, B, what A / B tells), the first the workload's question;
# each is reported when the run measured both arms.
PAIRS = (
    Comparison("btrfs-extent-zstd", "btrfs-plain-zstd",
               "per-extent-key encryption on compressed data (both "
               "compress=zstd)"),
    Comparison("btrfs-extent", "btrfs-plain",
               "per-extent-key encryption on uncompressed data (context)"),
    Comparison("btrfs-plain-zstd", "btrfs-plain",
               "zstd compression, unencrypted"),
    Comparison("btrfs-extent-zstd", "btrfs-extent",
               "zstd compression, encrypted with per-extent keys"),
)
# The ratios of a comparison shown per phase: (attribute of an
# analysis.PhaseComparison, label).
RATIOS = (("bw", "throughput"), ("cpu", "CPU per MiB"),
          ("cpu_per_op", "CPU per I/O"))


def owns_phases(phases):
    """Runs record their analysis kind; none is guessed from phase names."""
    return False


def judged_phases(phases):
    """No phase is judged against the goals of the main comparison
    (per-extent against per-inode keys, neither of which this workload
    runs by default): its question is btrfs-extent-zstd against
    btrfs-plain-zstd (see "Compression")."""
    return []


def not_judged_text(run, phases):
    """The verdicts' line for the phases not judged (analysis.verdicts)."""
    return (f"{', '.join(phases) or 'no phase'}: not judged against the "
            "goals of the main comparison (per-extent against per-inode "
            "keys): this workload measures encryption on compressed data, "
            "btrfs-extent-zstd against btrfs-plain-zstd, both mounted with "
            "compress=zstd; see \"Compression\" for those ratios and the "
            "bytes on disk.")


def read_disk_bytes(run, arm):
    """raw/<arm>/disk-bytes.tsv as {name: value}, with the compression
    ratio (uncompressed / on-disk bytes), the on-disk share of the file's
    size and whether compsize agrees with the file extent items; None when
    the file is not there."""
    path = os.path.join(run.dir, "raw", arm, DISK_BYTES)
    if not os.path.exists(path):
        return None
    d = read_command_result(path)
    disk, unc, size = (d.get("disk_bytes"), d.get("uncompressed_bytes"),
                       d.get("file_bytes"))
    d["ratio"] = (unc / disk if isnum(disk) and isnum(unc) and disk > 0
                  else None)
    d["disk_share"] = (disk / size if isnum(disk) and isnum(size)
                       and size > 0 else None)
    cs = d.get("compsize_disk_bytes")
    if isnum(cs):
        d["compsize"] = ("agrees" if cs == disk and d.get(
            "compsize_referenced_bytes") == d.get("referenced_bytes")
            else "differs")
    else:
        d["compsize"] = ("error: " + str(d["compsize_error"])
                         if "compsize_error" in d else "not recorded")
    return d


def _compact(c):
    """What the section shows of one analysis.PhaseComparison: per ratio
    key its ratio dict (or None), and p99 latency."""
    out = {"status": c.status, "reason": c.reason}
    if c.measured:
        for key, _ in RATIOS:
            r = getattr(c, key)
            out[key] = None if r is None else {
                k: r.get(k) for k in ("ratio", "ci_lo", "ci_hi",
                                      "ci_supported", "not_conclusive",
                                      "change_pct", "p", "significant",
                                      "n_pairs")}
        p99 = c.latency["p99"]
        out["p99"] = {k: p99.get(k) for k in ("ratio", "ci_lo", "ci_hi",
                                              "ci_supported",
                                              "not_conclusive")}
    return out


def analyze(run, res):
    """res["workload"]: {"pairs": [{"a", "b", "label", "phases": {phase:
    _compact(analysis.comparison)}}], "disk": {arm: read_disk_bytes}},
    or None when the run has neither a pair of measured arms nor bytes on
    disk."""
    threshold = res.get("threshold_pct", 5.0)
    measured = set(run.measured)
    pairs = []
    for c in PAIRS:
        if c.a in measured and c.b in measured:
            pairs.append({"a": c.a, "b": c.b, "label": c.label, "phases": {
                p: _compact(comparison(run, c, p, threshold))
                for p in run.phases}})
    disk = {}
    # the workload's arms first, in the order of PAIRS, then any other
    first = list(dict.fromkeys(x for c in PAIRS for x in (c.a, c.b)))
    for arm in ([x for x in first if x in measured]
                + [x for x in run.ordered(measured) if x not in first]):
        d = read_disk_bytes(run, arm)
        if d is None:
            run.warnings.append(
                f"raw/{arm}/{DISK_BYTES}: missing (the compressible "
                "workload's preparation records the file's bytes on disk "
                "there)")
            continue
        disk[arm] = d
    if not pairs and not disk:
        return None
    return {"pairs": pairs, "disk": disk, "threshold_pct": threshold}


def plot(run, res, out_dir, colors):
    """compressible.png: (1) per arm the file's size and its bytes on
    disk, with the compression ratio; (2) per phase the throughput and CPU
    per MiB ratios of the first pair measured, with their 95% CIs."""
    wl = res.get("workload")
    if not wl:
        return {}
    plt = _plt()
    fig, (ax, axr) = plt.subplots(1, 2, figsize=(13, 4.4))
    arms = list(wl["disk"])
    for i, arm in enumerate(arms):
        d = wl["disk"][arm]
        size, disk = d.get("file_bytes"), d.get("disk_bytes")
        if isnum(size):
            ax.bar(i - 0.2, size / MIB, 0.4, color="lightgray",
                   label="file size" if i == 0 else None)
        if isnum(disk):
            ax.bar(i + 0.2, disk / MIB, 0.4, color=colors.get(arm))
            ax.annotate(f"{fmt_ratio(d['ratio'])}x" if d["ratio"] else "",
                        (i + 0.2, disk / MIB), textcoords="offset points",
                        xytext=(0, 3), ha="center", fontsize=8)
    ax.set_xticks(range(len(arms)))
    ax.set_xticklabels(arms, rotation=15, ha="right", fontsize=8)
    ax.set_ylabel("MiB (gray: file size; colored: on disk)")
    ax.set_title("Bytes on disk of the prepared file "
                 "(label: compression ratio)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    if arms:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no bytes on disk recorded", ha="center",
                va="center", transform=ax.transAxes)
    pair = wl["pairs"][0] if wl["pairs"] else None
    if pair:
        phases = list(pair["phases"])
        for j, (key, label) in enumerate(RATIOS[:2]):
            for i, p in enumerate(phases):
                r = pair["phases"][p].get(key)
                if not r or not isnum(r["ratio"]):
                    continue
                x = i + (j - 0.5) * 0.3
                ok = r["ci_supported"] and isnum(r["ci_lo"])
                axr.errorbar(x, r["ratio"], yerr=[[r["ratio"] - r["ci_lo"]],
                                                  [r["ci_hi"] - r["ratio"]]]
                             if ok else None, fmt="o" if ok else "x",
                             capsize=5, color=f"C{j}",
                             label=label if i == 0 else None)
                axr.annotate(f"{r['ratio']:.3f}", (x, r["ratio"]),
                             textcoords="offset points", xytext=(5, 3),
                             fontsize=7)
        axr.axhline(1.0, color="gray", lw=1)
        axr.set_xticks(range(len(phases)))
        axr.set_xticklabels(phases, fontsize=8)
        axr.set_ylabel(f"{pair['a']} / {pair['b']}\n(95% bootstrap CI; x: "
                       "no CI, too few reps)")
        axr.legend(fontsize=8)
        axr.set_title(pair["label"], fontsize=10)
    else:
        axr.text(0.5, 0.5, "no pair of arms measured", ha="center",
                 va="center", transform=axr.transAxes)
    axr.grid(axis="y", alpha=0.3)
    add_skipped_legend(axr, run)
    fig.suptitle("Compression: bytes on disk, and the cost of encryption on "
                 "compressed data", fontsize=10)
    return {"compressible": _save(fig, out_dir, "compressible.png")}


def _bytes(x):
    """Bytes as MiB with two decimals, and the bytes."""
    return "n/a" if not isnum(x) else f"{x / MIB:.2f} ({x})"


def render(doc, run, res, plots):
    doc.h(2, "Compression")
    wl = res.get("workload")
    if not wl:
        skipped = "; ".join(f"{a}: {w}"
                            for a, w in run.not_measured.items())
        doc.p("Compression: not measured (no arm recorded its bytes on disk"
              + (f"; skipped: {skipped}" if skipped else "") + ").")
        return
    doc.p("The file is written in pieces of 64 KiB in a random order, each "
          "write fsynced, each 4 KiB block of them partly zeros and partly "
          "random (fio `buffer_compress_percentage`), so that each piece is "
          "its own extent and one that btrfs compresses (it keeps a "
          "compressed extent only when it saves a 4 KiB sector). On "
          "btrfs-extent-zstd the kernel compresses the data, then encrypts "
          "the compressed extent with its per-extent key; btrfs-plain-zstd "
          "compresses the same data unencrypted.")
    if plots.get("compressible"):
        doc.img(plots["compressible"], "bytes on disk per arm, and the "
                "ratios of the first pair of arms")
    doc.h(3, "Ratios")
    doc.p("Each ratio A / B is the report's comparison (see Comparisons): "
          "rep N of A paired with rep N of B, geometric mean of the per-rep "
          "ratios, 95% bootstrap CI over the pairs; change % = 100 x "
          "(ratio - 1); p: two-sided Mann-Whitney U of the per-rep values; "
          "* = significant: p < 0.05, ranges apart and |change| ≥ "
          f"{wl['threshold_pct']:g}%. Throughput below 1 and CPU cost above "
          "1 mean A is slower or costlier. The first pair is the question; "
          "the others, where the run has their arms, say how much of it is "
          "encryption and how much compression.")
    rows = []
    for pair in wl["pairs"]:
        name = f"{pair['a']} / {pair['b']}"
        for phase, c in pair["phases"].items():
            if c["status"] != "measured":
                rows.append((name, phase, f"not measured: {c['reason']}",
                             "", "", "", "", ""))
                continue
            for key, label in RATIOS:
                r = c.get(key)
                if r is None:
                    rows.append((name, phase, label, "no CPU data", "", "",
                                 "", ""))
                    continue
                rows.append((name, phase, label, fmt_ratio(r["ratio"]),
                             fmt_ci_of(r), fmt_pct(r["change_pct"]),
                             fmt_p(r["p"]), "*" if r["significant"] else ""))
            r = c["p99"]
            rows.append((name, phase, "p99 latency (bins merged over reps)",
                         fmt_ratio(r["ratio"]), fmt_ci_of(r), "", "", ""))
    if not rows:
        rows.append(("-", "-", "no pair of arms measured (the question "
                     "needs btrfs-extent-zstd and btrfs-plain-zstd)", "", "",
                     "", "", ""))
    doc.table(["A / B", "phase", "metric", "ratio", "95% CI", "change",
               "p", "sig"], rows,
              [f"`{p['a']}/{p['b']}`: {p['label']}" for p in wl["pairs"]]
              + ["raw data: `raw/<arm>/rep<N>/<phase>.json`, `cpu.tsv`"])
    doc.h(3, "Bytes on disk")
    doc.p("The prepared file, measured in the guest after the preparation "
          "(before any timed rep; every rep restores that filesystem): its "
          "size, the bytes its file extent items reference, and per extent "
          "on disk (each counted once) its uncompressed and on-disk bytes, "
          "read from the items (`btrfs inspect-internal dump-tree`). "
          "Compression ratio = uncompressed / on disk; on disk = the share "
          "of the file's size on disk. compsize: whether `compsize -b` "
          "counted the same (it cannot read encrypted extents' longer "
          "items: its error is shown). MiB = 2^20 bytes.")
    rows = []
    for arm, d in wl["disk"].items():
        rows.append((arm, d.get("mount_compress", "?"),
                     _bytes(d.get("file_bytes")),
                     _bytes(d.get("referenced_bytes")),
                     _bytes(d.get("uncompressed_bytes")),
                     _bytes(d.get("disk_bytes")),
                     fmt_pct(100 * d["disk_share"], sign=False)
                     if isnum(d["disk_share"]) else "n/a",
                     fmt_ratio(d["ratio"]),
                     f"{d.get('compressed_extents', '?')} of "
                     f"{d.get('extents', '?')}",
                     d["compsize"]))
    for arm, why in run.not_measured.items():
        rows.append((arm, f"skipped: {why}", "", "", "", "", "", "", "", ""))
    doc.table(["arm", "compression", "file size, MiB (bytes)",
               "referenced", "uncompressed", "on disk", "on disk / size",
               "compression ratio", "compressed extents", "compsize"], rows,
              [f"raw data: `raw/<arm>/{DISK_BYTES}`"])
