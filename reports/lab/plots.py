"""The report's PNG plots (matplotlib, Agg) and flame graph SVGs
(reports.lab.flame). Each plot function takes the run and the analysis and
returns the file name it wrote, or None when it has nothing to draw.
"""

import math
import os
import re
import textwrap

from reports.lab import flame as F
from reports.lab.fmt import MIB, fmt_count, fmt_ns
from reports.lab.profiles import MEMORY_CACHES, hist_total
from reports.lab.analysis import PERCENTILES, pct_name


def arm_colors(run):
    """A fixed color per arm (tab10 in the order of the run's arm
    definitions, all of them, so that an arm keeps its color whichever
    arms ran)."""
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
    names = run.ordered(set(run.arm_order) | set(run.arms))
    return {a: palette[i % len(palette)] for i, a in enumerate(names)}


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, out_dir, name):
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    _plt().close(fig)
    return name


def _phase_grid(plt, n, height):
    """One panel per phase, at most 4 per row; returns (fig, [axes])."""
    cols = max(1, min(4, n))
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, height * rows),
                             squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def skipped_note(run, arms=None):
    """"skipped: a, b" for the figure text, or "" (arms: the candidates)."""
    names = [a for a in run.not_measured if arms is None or a in arms]
    return ("not measured (skipped): " + ", ".join(names)) if names else ""


def add_skipped_legend(ax, run, arms=None, **kw):
    """The legend, with a gray entry per skipped arm."""
    from matplotlib.patches import Patch
    handles, labels = ax.get_legend_handles_labels()
    for a in run.not_measured:
        if arms is None or a in arms:
            handles.append(Patch(facecolor="white", edgecolor="gray",
                                 hatch="//"))
            labels.append(f"{a}: skipped")
    if handles:
        ax.legend(handles, labels, fontsize=kw.get("fontsize", 7))


def plot_throughput(run, res, out_dir, colors):
    """Median bars, min-max whiskers, one dot per rep; per phase panel."""
    plt = _plt()
    arms = list(run.arms)
    phases = run.phases
    fig, axlist = _phase_grid(plt, len(phases), 4)

    def stats(arm, phase):
        ph = res["arms"][arm]["phases"][phase]
        if not ph["reps"]:
            return None
        s = ph["bw_bytes"]
        return (s["median"] / MIB, s["min"] / MIB, s["max"] / MIB,
                [d["bw_bytes"] / MIB for d in ph["reps"].values()])
    for ax, phase in zip(axlist, phases):
        _bar_panel(ax, run, phase, arms, colors,
                   lambda arm, phase=phase: stats(arm, phase),
                   "no data", "throughput, MiB/s")
    fig.suptitle("Throughput: bar = median, whiskers = min-max, "
                 "dots = reps", fontsize=10)
    return _save(fig, out_dir, "throughput.png")


def _bar_panel(ax, run, phase, arms, colors, stats, missing, ylabel):
    """One phase's panel: per arm, a bar at the median, min-max whiskers
    and a dot per rep; stats(arm) gives (median, min, max, rep values) in
    the panel's unit, or None (labelled @missing, or "skipped")."""
    for i, arm in enumerate(arms):
        st = stats(arm) if arm in run.measured else None
        if st is None:
            ax.text(i, 0.05, "skipped" if arm in run.not_measured
                    else missing, rotation=90, ha="center",
                    va="bottom", fontsize=9, color="gray",
                    transform=ax.get_xaxis_transform())
            continue
        med, lo, hi, vals = st
        ax.bar(i, med, color=colors[arm], alpha=0.75)
        ax.errorbar(i, med, yerr=[[med - lo], [hi - med]],
                    color="black", capsize=4, lw=1)
        ax.plot([i] * len(vals), vals, "o", ms=3, color="black",
                alpha=0.6)
    ax.set_xticks(range(len(arms)))
    ax.set_xticklabels(arms, rotation=30, ha="right", fontsize=8)
    ax.set_xlim(-0.6, len(arms) - 0.4)
    ax.set_title(f"{phase} ({run.direction(phase)})")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)


def plot_cpu(run, res, out_dir, colors):
    """CPU cost per MiB: median bars, min-max whiskers, one dot per rep;
    per phase panel. None when the run recorded no CPU time."""
    if not run.has_cpu:
        return None
    plt = _plt()
    arms = list(run.arms)
    phases = run.phases
    fig, axlist = _phase_grid(plt, len(phases), 4)

    def stats(arm, phase):
        ph = (res["arms"][arm].get("phases") or {}).get(phase)
        if not ph or not ph["cpu_per_mib"]["n"]:
            return None
        s = ph["cpu_per_mib"]
        return (s["median"] * 1e3, s["min"] * 1e3, s["max"] * 1e3,
                [d["cpu_per_mib"] * 1e3 for d in ph["reps"].values()
                 if d.get("cpu_per_mib") is not None])
    for ax, phase in zip(axlist, phases):
        _bar_panel(ax, run, phase, arms, colors,
                   lambda arm, phase=phase: stats(arm, phase),
                   "no CPU data", "CPU ms per MiB")
    fig.suptitle("CPU cost per MiB (guest /proc/stat, all CPUs; lower is "
                 "cheaper): bar = median, whiskers = min-max, dots = reps",
                 fontsize=10)
    return _save(fig, out_dir, "cpu.png")


def plot_latency(run, res, out_dir, colors):
    """p50/p99/p99.9 of merged bins per arm, log scale, per phase."""
    plt = _plt()
    arms = [a for a in run.measured]
    if not arms:
        return None
    phases = run.phases
    fig, axlist = _phase_grid(plt, len(phases), 4)
    width = 0.8 / len(arms)
    any_data = False
    for ax, phase in zip(axlist, phases):
        for j, arm in enumerate(arms):
            lat = res["arms"][arm]["phases"][phase]["latency_ns"]
            ys = [lat[pct_name(q)] / 1000.0 for q in PERCENTILES]
            xs = [i + (j - (len(arms) - 1) / 2) * width
                  for i in range(len(PERCENTILES))]
            ok = [(x, y) for x, y in zip(xs, ys) if not math.isnan(y)]
            if ok:
                any_data = True
                ax.bar([x for x, _ in ok], [y for _, y in ok], width,
                       color=colors[arm], label=arm)
        ax.set_xticks(range(len(PERCENTILES)))
        ax.set_xticklabels([pct_name(q) for q in PERCENTILES])
        ax.set_yscale("log")
        ax.set_ylabel("completion latency, µs (log)")
        ax.set_title(phase)
        ax.grid(axis="y", alpha=0.3, which="both")
    if not any_data:
        plt.close(fig)
        return None
    add_skipped_legend(axlist[0], run)
    fig.suptitle("Completion latency percentiles from fio bins merged "
                 "over all reps", fontsize=10)
    return _save(fig, out_dir, "latency.png")


def against_main_reference(run):
    """The comparisons against the main comparison's reference arm, the
    main one first: (A, B) pairs in the run's comparison order."""
    if not run.main:
        return []
    return [(c.a, c.b) for c in run.comparisons if c.b == run.main.b]


def plot_main_ratio(run, res, out_dir, colors):
    """CPU cost per MiB (when recorded), throughput and p99 ratios with
    95% CIs of every arm compared with the main reference arm
    (btrfs-extent/btrfs-inode, the main one, and e.g.
    btrfs-extent-key/btrfs-inode), side by side per phase."""
    pairs = against_main_reference(run)
    main_a, main_b = (run.main.a, run.main.b) if run.main else ("?", "?")
    goals = run.goals
    comps = [c for c in res["comparisons"]
             if (c.a, c.b) in pairs and c.measured]
    plt = _plt()
    if not comps:
        # the plot still exists, and says why it has no points
        reason = next((c.reason for c in res["comparisons"]
                       if c.comparison == run.main), "no data")
        return _text_figure(out_dir, "ratio_main.png",
                            f"{main_a} / {main_b} ratio with 95% t-interval "
                            "CI: not measured", reason.replace("; ", "\n"))
    phases = [p for p in run.phases if any(c.phase == p for c in comps)]
    shown = [(a, b) for a, b in pairs
             if any((c.a, c.b) == (a, b) for c in comps)]
    width = 0.7 / max(1, len(shown))
    no_ci = False
    panels = [("bw", goals.bw_min, "≥",
               "throughput ratio (geometric mean of per-rep ratios)"),
              ("p99", goals.p99_max, "≤",
               "p99 latency ratio (bins merged over reps)")]
    if any(c.cpu for c in comps):
        decides = goals.decide == "cpu_per_mib"
        panels.insert(0, ("cpu", goals.cpu_per_mib_max, "≤",
                          "CPU cost per MiB ratio"
                          + (" (decides the verdict)" if decides else "")))
    fig, axes = plt.subplots(1, len(panels), figsize=(
        max(5 * len(panels), 1.1 * len(panels) * len(phases) + 4), 4.2),
        squeeze=False)
    for ax, (key, goal, sign, title) in zip(axes[0], panels):
        for j, (a, b) in enumerate(shown):
            first = True
            for c in comps:
                if (c.a, c.b) != (a, b):
                    continue
                r = c.latency["p99"] if key == "p99" else getattr(c, key)
                if r is None or r["ratio"] is None or math.isnan(r["ratio"]):
                    continue
                x = phases.index(c.phase) + (j - (len(shown) - 1) / 2) \
                    * width
                lo, hi = r["ci_lo"], r["ci_hi"]
                yerr = ([[r["ratio"] - lo], [hi - r["ratio"]]]
                        if not math.isnan(lo) else None)
                main = (a, b) == (main_a, main_b)
                ax.errorbar(x, r["ratio"], yerr=yerr,
                            fmt="o" if yerr else "x", capsize=6,
                            color=colors.get(a),
                            label=(f"{a} / {b}" + (" (main)" if main else ""))
                            if first else None)
                first = False
                no_ci = no_ci or not yerr
                ax.annotate(f"{r['ratio']:.3f}", (x, r["ratio"]),
                            textcoords="offset points", xytext=(6, 0),
                            fontsize=7)
        ax.axhline(1.0, color="gray", lw=1)
        if goal is not None:
            ax.axhline(goal, color="#d62728", ls="--", lw=1,
                       label=f"goal of {main_a}: {sign} {goal}"
                             + ("" if key == "cpu" else " (read phases)"))
        ax.set_xticks(range(len(phases)))
        ax.set_xticklabels(phases)
        ax.set_xlim(-0.5, len(phases) - 0.5)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    why = next((c.bw["not_conclusive"] for c in comps
                if c.bw["not_conclusive"]), None) or "too few reps"
    fig.suptitle(f"Against {main_b}, with 95% t-interval ({main_a} / "
                 f"{main_b} is the main comparison)"
                 + (f"; x: no CI, {why}" if no_ci else ""), fontsize=10)
    return _save(fig, out_dir, "ratio_main.png")


def plot_comparisons(res, out_dir):
    """Every measured comparison's throughput ratio and CI, per phase."""
    comps = [c for c in res["comparisons"] if c.measured]
    if not comps:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(comps) + 1.2))
    for i, c in enumerate(comps):
        r = c.bw
        color = "#d62728" if r["significant"] else "#1f77b4"
        xerr = ([[r["ratio"] - r["ci_lo"]], [r["ci_hi"] - r["ratio"]]]
                if r["ci_supported"] else None)
        ax.errorbar(r["ratio"], i, xerr=xerr, fmt="o" if xerr else "x",
                    color=color, capsize=3)
    ax.axvline(1.0, color="gray", lw=1)
    ax.set_yticks(range(len(comps)))
    ax.set_yticklabels([f"{c.name} {c.phase}" for c in comps], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("throughput ratio (geometric mean of per-rep ratios), "
                  "95% t-interval (red: significant change; x: no CI, "
                  "too few reps)")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, out_dir, "comparisons.png")


def _bucket_label(b, unit_ns):
    lo = b.get("min")
    if lo is None:
        return f"<{fmt_count(b.get('max'))}"
    if unit_ns:
        return fmt_ns(lo)
    return fmt_count(lo)


# Histograms the report always shows (the issue's "lookup and derivation
# histograms"), with a placeholder that says why when no arm has events.
REQUIRED_HISTS = (("@lookup_ns", "extent-info lookup latency"),
                  ("@derive_ns", "key derivation latency"))


def _text_figure(out_dir, fname, title, text):
    """A figure that only says why it has no data (wrapped, centered)."""
    plt = _plt()
    lines = [title, ""] + [w for para in text.split("\n")
                           for w in textwrap.wrap(para, 100) or [""]]
    fig = plt.figure(figsize=(9, 0.25 * len(lines) + 0.8))
    fig.text(0.5, 0.5, "\n".join(lines), ha="center", va="center",
             fontsize=9)
    fig.savefig(os.path.join(out_dir, fname), dpi=110)
    plt.close(fig)
    return fname


def _hist_placeholder(plt, out_dir, fname, name, what, text):
    return _text_figure(out_dir, fname,
                        f"bpftrace {name} ({what}): no events", text)


def plot_bpftrace_hists(run, profiles, out_dir, colors):
    """One PNG per bpftrace histogram name, arms side by side; the lookup
    and derivation histograms always, with skipped arms named."""
    found = {n for e in profiles.values()
             for n in e.get("bpftrace", {}).get("hists", {})}
    required = dict(REQUIRED_HISTS)
    names = [n for n, _ in REQUIRED_HISTS] + sorted(found - set(required))
    out = []
    plt = _plt()
    for name in names[:14]:
        fname = "bpftrace_" + re.sub(r"[^A-Za-z0-9_.-]+", "_",
                                     name.lstrip("@")).strip("_") + ".png"
        per_arm = {a: e["bpftrace"]["hists"][name]
                   for a, e in profiles.items()
                   if name in e.get("bpftrace", {}).get("hists", {})
                   and hist_total(e["bpftrace"]["hists"][name]) > 0}
        keys = sorted({(b.get("min") if b.get("min") is not None else -1)
                       for bs in per_arm.values() for b in bs})
        if not keys:
            if name not in required:
                continue
            quiet = [a for a in run.measured if a not in per_arm]
            lines = []
            if quiet:
                lines.append("profiled, no such event: " + ", ".join(quiet))
            note = skipped_note(run)
            if note:
                lines.append(note)
            if not profiles:
                lines.append("no profiled repetition in this run")
            out.append({"name": name, "file": _hist_placeholder(
                plt, out_dir, fname, name, required[name],
                "\n".join(lines))})
            continue
        label_of = {}
        for bs in per_arm.values():
            for b in bs:
                k = b.get("min") if b.get("min") is not None else -1
                label_of[k] = _bucket_label(b, name.endswith("_ns")
                                            or "_ns[" in name)
        fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(keys) + 2), 3.8))
        width = 0.8 / len(per_arm)
        for j, (arm, bs) in enumerate(per_arm.items()):
            counts = {(b.get("min") if b.get("min") is not None else -1):
                      int(b.get("count", 0)) for b in bs}
            xs = [i + (j - (len(per_arm) - 1) / 2) * width
                  for i in range(len(keys))]
            ax.bar(xs, [counts.get(k, 0) for k in keys], width,
                   color=colors.get(arm), label=f"{arm} (n={hist_total(bs)})")
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels([label_of[k] for k in keys], rotation=45,
                           ha="right", fontsize=7)
        ax.set_ylabel("count")
        what = f", {required[name]}" if name in required else ""
        ax.set_title(f"bpftrace {name}{what} (bucket lower bound)",
                     fontsize=10)
        add_skipped_legend(ax, run)
        ax.grid(axis="y", alpha=0.3)
        out.append({"name": name, "file": _save(fig, out_dir, fname)})
    return out


def plot_derivations_vs_extents(run, points, out_dir, colors):
    """Key derivations (bpftrace) against extent count, one dot per arm;
    skipped arms in the legend."""
    if not points:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    markers = "osD^v<>p"
    for i, (arm, (ext, der)) in enumerate(points.items()):
        # hollow markers of different shapes: arms on one point stay visible
        ax.plot(ext, der, markers[i % len(markers)], ms=9 + 3 * (i % 3),
                mfc="none", mew=2, color=colors.get(arm),
                label=f"{arm}: {der:g} derivations, {ext:g} extents")
    xmax = max(x for x, _ in points.values())
    ymax = max(y for _, y in points.values())
    top_x, top_y = (xmax * 1.15 or 1), (ymax * 1.15 or 1)
    ax.set_xlim(-0.04 * top_x, top_x)  # room for markers at 0
    ax.set_ylim(-0.06 * top_y, top_y)
    add_skipped_legend(ax, run)
    ax.set_xlabel("extents in the file the profiled rep read")
    ax.set_ylabel("key derivations (bpftrace)")
    ax.grid(alpha=0.3)
    return _save(fig, out_dir, "derivations_vs_extents.png")


def plot_slab(slabs, caches, out_dir, colors):
    """Memory (num_objs * objsize) of selected slab caches per arm."""
    if not slabs or not caches:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(caches) * len(slabs)
                                    / 2 + 1.5))
    height = 0.8 / len(slabs)
    for j, (arm, s) in enumerate(slabs.items()):
        ys = [i + (j - (len(slabs) - 1) / 2) * height
              for i in range(len(caches))]
        ax.barh(ys, [s.get(c, {}).get("bytes", 0) / 1024 for c in caches],
                height, color=colors.get(arm), label=arm)
    ax.set_yticks(range(len(caches)))
    ax.set_yticklabels(caches, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("slab memory, KiB (num_objs x objsize)")
    ax.legend(fontsize=7)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, out_dir, "slab.png")


def plot_order(run, out_dir, colors):
    """Throughput against run order, to show drift over the run."""
    if not run.order:
        return None
    plt = _plt()
    phases = run.phases
    fig, axlist = _phase_grid(plt, len(phases), 3.5)
    seen = False
    for ax, phase in zip(axlist, phases):
        labelled = set()
        for pos, (arm, rep) in enumerate(run.order):
            d = run.data.get(arm, {}).get(phase, {}).get(rep)
            if d is None:
                continue
            seen = True
            ax.plot(pos + 1, d.bw_bytes / MIB, "o", color=colors.get(arm),
                    label=None if arm in labelled else arm)
            labelled.add(arm)
        ax.set_title(phase)
        ax.set_xlabel("position in run order")
        ax.set_ylabel("MiB/s")
        ax.grid(alpha=0.3)
    if not seen:
        plt.close(fig)
        return None
    add_skipped_legend(axlist[0], run)
    fig.suptitle("Throughput in run order (drift check)", fontsize=10)
    return _save(fig, out_dir, "run_order.png")


def plot_memory(run, mem, out_dir, colors):
    """KiB of each key-object cache per arm after the read (bar) and
    before it (black tick); skipped arms and absent caches labelled."""
    if not mem or not any(m["status"] == "measured" for m in mem.values()):
        return None
    plt = _plt()
    arms = list(mem)
    fig, axes = plt.subplots(1, len(MEMORY_CACHES),
                             figsize=(5 * len(MEMORY_CACHES), 4),
                             squeeze=False)
    for ax, cache in zip(axes[0], MEMORY_CACHES):
        for i, arm in enumerate(arms):
            m = mem[arm]
            c = (m.get("caches") or {}).get(cache)
            if m["status"] != "measured" or c["status"] != "measured":
                label = ("skipped" if m["status"] == "skipped" else
                         "not profiled" if m["status"] != "measured"
                         else "cache absent")
                ax.text(i, 0.03, label, rotation=90, ha="center",
                        va="bottom", fontsize=9, color="gray",
                        transform=ax.get_xaxis_transform())
                continue
            kib = c["bytes_after"] / 1024
            ax.bar(i, kib, color=colors.get(arm), alpha=0.8)
            ax.annotate(f"{c['active_after']} objs", (i, kib),
                        textcoords="offset points", xytext=(0, 3),
                        ha="center", fontsize=7)
            if c.get("active_before") is not None:
                ax.plot([i - 0.35, i + 0.35],
                        [c["active_before"] * c["objsize"] / 1024] * 2,
                        color="black", lw=2)
        ax.set_xticks(range(len(arms)))
        ax.set_xticklabels(arms, rotation=30, ha="right", fontsize=8)
        ax.set_xlim(-0.6, len(arms) - 0.4)
        ax.set_ylim(bottom=0)
        ax.set_title(f"slab cache {cache}", fontsize=10)
        ax.set_ylabel("KiB in use (active objects x size)")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Key-object memory after the profiled read (bar) and "
                 "before it, after dropping caches (black line)",
                 fontsize=10)
    return _save(fig, out_dir, "memory.png")


def flame_pair(run, flames):
    """(target, base, is_main) for the differential flame graph: the main
    comparison when both arms were profiled, else the first comparison of
    the run whose arms both were, else the first two profiled arms in
    display order; None with fewer than two profiled arms."""
    for c in run.comparisons:
        if c.a in flames and c.b in flames and \
                flames[c.a]["busy_samples"] and flames[c.b]["busy_samples"]:
            return c.a, c.b, c == run.main
    # no comparison of the report has both arms: any two profiled arms
    names = [a for a in run.ordered(flames)
             if flames[a]["busy_samples"]]
    if len(names) >= 2:
        return names[0], names[1], False
    return None


def make_flames(run, prof, out_dir):
    """Folded stacks and flame graph SVGs per arm, and the differential one.

    Writes flame/<arm>.folded (every sample, idle included), flame-<arm>.svg
    (idle excluded), and flame-diff-<A>-vs-<B>.svg with a table of the
    functions whose share changed most."""
    out = {"arms": {}, "diff": None}
    if not prof:
        return out
    phase = run.profile_phase or "the profiled phase"
    for arm, e in prof.items():
        if "folded" not in e:
            continue
        os.makedirs(os.path.join(out_dir, "flame"), exist_ok=True)
        folded_rel = f"flame/{arm}.folded"
        with open(os.path.join(out_dir, folded_rel), "w",
                  encoding="utf-8") as f:
            f.write(F.format_folded(e["folded"]))
        busy, idle = F.split_idle(e["folded"])
        n = sum(busy.values())
        svg_rel = f"flame-{arm}.svg"
        with open(os.path.join(out_dir, svg_rel), "w", encoding="utf-8") as f:
            f.write(F.flame_svg(
                busy, f"{arm}: perf record -g, {phase}",
                f"{n} samples ({run.profile_passes} pass(es)) on all CPUs; "
                f"{idle} idle (swapper) samples left out"))
        out["arms"][arm] = {"svg": svg_rel, "folded": folded_rel,
                            "busy_samples": n, "idle_samples": idle,
                            "_busy": busy}
    pair = flame_pair(run, out["arms"])
    if pair:
        a, b, main = pair
        ta, tb = out["arms"][a]["_busy"], out["arms"][b]["_busy"]
        ma, mb = (run.main.a, run.main.b) if run.main else ("?", "?")
        why = (f"{ma} and {mb} were not both profiled"
               + (f"; {skipped_note(run, (ma, mb))}"
                  if skipped_note(run, (ma, mb)) else ""))
        label = (f"{a} against {b}" if main else
                 f"{a} against {b} (NOT the main comparison: {why})")
        rel = f"flame-diff-{a}-vs-{b}.svg"
        with open(os.path.join(out_dir, rel), "w", encoding="utf-8") as f:
            f.write(F.diff_flame_svg(
                ta, tb, f"Differential flame graph: {a} against {b}"
                + ("" if main else " (NOT the main comparison)"),
                f"{phase}" + ("" if main else f"; {why}")))
        out["diff"] = {"target": a, "base": b, "main": main, "label": label,
                       "why_not_main": None if main else why,
                       "svg": rel, "top": F.frame_deltas(ta, tb)[:15],
                       "premium": F.premium_by_category(ta, tb)}
    for v in out["arms"].values():
        v.pop("_busy")
    return out


def make_plots(run, res, out_dir):
    colors = arm_colors(run)
    plots = {}
    # the plots of fio's numbers, one panel per fio phase: none for a
    # workload whose phases are all command phases (its module draws them)
    if run.phases:
        plots.update({
            "throughput": plot_throughput(run, res, out_dir, colors),
            "latency": plot_latency(run, res, out_dir, colors),
            "cpu": plot_cpu(run, res, out_dir, colors),
            "ratio": plot_main_ratio(run, res, out_dir, colors),
            "comparisons": plot_comparisons(res, out_dir),
            "order": plot_order(run, out_dir, colors),
        })
    prof = res.get("profiles") or {}
    plots["bpftrace"] = plot_bpftrace_hists(run, prof, out_dir, colors)
    plots["derivations"] = plot_derivations_vs_extents(
        run, res["derivations_vs_extents"], out_dir, colors)
    plots["slab"] = plot_slab({a: e["slab"] for a, e in prof.items()
                               if "slab" in e}, res["slab_caches"],
                              out_dir, colors)
    # the workload's own plots (its reports/lab/wl_<kind>.py), by their names
    mod = run.module()
    if mod is not None:
        plots.update(mod.plot(run, res, out_dir, colors) or {})
    plots["memory"] = plot_memory(run, res["memory"], out_dir, colors)
    for arm, folded in run.folded.items():
        prof.setdefault(arm, {})["folded"] = folded
    res["flames"] = make_flames(run, prof, out_dir)
    for e in prof.values():
        e.pop("folded", None)
    return plots
