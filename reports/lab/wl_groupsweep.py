"""The groupsweep workload's analysis (reports plug-in, see
reports/lab/runmodel.py workload_module): cost against the size of key groups.

Its phases are KIND-gN (bench/workloads/groupsweep/hooks.sh): a read of
the file written with at most N extents per key group (0: no bound); the
count passes add write-gN, the counted writing of that file. Only the
point without a bound is judged against the goals.
"""

import math
import re

from reports.lab import labstats as L
from reports.lab.fmt import fmt_ci_of, fmt_mib, fmt_ratio, isnum
from reports.lab.plots import _plt, _save, add_skipped_legend
from reports.lab.render import _ratio_cells

KIND = "groupsweep"
PHASE = re.compile(r"(?P<kind>[A-Za-z]+)-g(?P<n>\d+)")
# What a point keeps of a ratio (analysis.values_ratio's dict).
RATIO_KEYS = ("ratio", "ci_lo", "ci_hi", "ci_supported", "not_conclusive")


def owns_phases(phases):
    """A run that did not record its analysis kind (run format 2) is a
    groupsweep when a phase is named KIND-gN."""
    return any(PHASE.fullmatch(p) for p in phases)


def judged_phases(phases):
    """Only the file written without a bound on the key groups (KIND-g0)
    is judged against the goals: a bounded point measures the bound."""
    return [p for p in phases
            if not (PHASE.fullmatch(p) and int(PHASE.fullmatch(p).group("n")))]


def not_judged_text(run, phases):
    """Why the bounded points are not judged (the verdicts' last line)."""
    a = run.main.a if run.main else "the per-extent arm"
    if not phases:
        return "No phase of this run is judged."
    return (f"{', '.join(phases)}: not judged against the goals: those "
            "files were written with at most N extents per key group "
            f"(fscrypt_extents_per_key=N), not as {a} writes them (no "
            "bound); see \"Cost against the size of key groups\".")


def analyze(run, res):
    """res["workload"]: see load_groupsweep."""
    return load_groupsweep(run, res["comparisons"], res.get("counts") or {})


def plot(run, res, out_dir, colors):
    path = plot_groupsweep(run, res.get("workload"), out_dir, colors)
    return {"groupsweep": path} if path else {}


def render(doc, run, res, plots):
    section_groupsweep(doc, run, res, plots)


def load_groupsweep(run, comps, counts):
    """Cost against the size of key groups (the groupsweep workload).

    Phases KIND-gN read a file written with at most N extents per key
    group (fscrypt_extents_per_key=N; 0: no bound). For every comparison
    (A / reference B) whose arms were both measured on such phases, one
    point per N: the throughput ratio with its CI (from comps, the
    analysis' PhaseComparisons), the CPU cost per MiB ratio (None without CPU data),
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
    phases = [(p, PHASE.fullmatch(p)) for p in run.phases]
    phases = [(p, m.group("kind"), int(m.group("n"))) for p, m in phases
              if m]
    if not phases:
        return None
    extents = run.timed_extent_counts()
    by = {(c.a, c.b, c.phase): c for c in comps}
    sweeps = []
    for comp in run.comparisons:
        a, b, label = comp.a, comp.b, comp.label
        if a not in run.measured or b not in run.measured:
            continue
        kinds = {}
        for phase, kind, n in phases:
            c = by.get((a, b, phase))
            if not c or not c.measured:
                continue
            got = [x for x in extents.get((a, f"g{n}"), []) if isnum(x)]
            ext = L.summary(got)["median"] if got else None
            read = (counts.get(a) or {}).get(phase) or {}
            write = (counts.get(a) or {}).get(f"write-g{n}") or {}
            # the extents the read walked (one lookup each), else FIEMAP's
            walked = read.get("lookups") or ext
            sa = L.summary(run.values(a, phase, "bw_bytes").values())
            sb = L.summary(run.values(b, phase, "bw_bytes").values())
            kinds.setdefault(kind, []).append({
                "phase": phase, "n": n, "bounded": n > 0,
                "x": n if n > 0 else walked,
                "extents": ext,
                "extents_read": read.get("lookups"),
                "groups_expected": (math.ceil(walked / n) if n and walked
                                    else 1 if walked else None),
                "bw_a_median": sa["median"], "bw_b_median": sb["median"],
                "n_a": c.n_a, "n_b": c.n_b,
                **{k: c.bw[k] for k in RATIO_KEYS},
                "per_rep_ratio": c.per_rep_ratio,
                # CPU cost per MiB of A over B (None without CPU data)
                "cpu": ({k: c.cpu[k] for k in RATIO_KEYS} if c.cpu
                        else None),
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


def plot_groupsweep(run, sweep, out_dir, colors):
    """Cost against extents per key group (groupsweep): per sweep (arm A
    against its reference B, one read kind), (1) the throughput ratio A/B
    with its 95% CI against extents per group, (2) the key derivations and
    key-slot programs of A's counted read of each file, with the key groups
    the bound implies and the group starts of its writing; log x (and log
    y for the counts). No bound is drawn at the file's extent count (the
    extents its read walked)."""
    if not sweep:
        return None
    plt = _plt()
    rows = sweep["sweeps"]
    fig, axes = plt.subplots(len(rows), 2, figsize=(12, 4.2 * len(rows)),
                             squeeze=False)
    for (ax, axc), sw in zip(axes, rows):
        pts = [p for p in sw["points"] if p["x"]]
        xs = [p["x"] for p in pts]
        ticks = [(p["x"], f"{p['n']}" if p["bounded"] else
                  f"no bound\n({p['x']:g})") for p in pts]
        for p in pts:
            lo, hi = p["ci_lo"], p["ci_hi"]
            ok = p["ci_supported"] and not math.isnan(lo)
            ax.errorbar(p["x"], p["ratio"],
                        yerr=[[p["ratio"] - lo], [hi - p["ratio"]]]
                        if ok else None, fmt="o" if ok else "x", capsize=4,
                        color=colors.get(sw["a"]))
            ax.annotate(f"{p['ratio']:.3f}", (p["x"], p["ratio"]),
                        textcoords="offset points", xytext=(5, 5),
                        fontsize=7)
        ax.plot(xs, [p["ratio"] for p in pts], "-", lw=1,
                color=colors.get(sw["a"]),
                label=f"{sw['a']} / {sw['b']} ({sw['kind']})")
        ax.axhline(1.0, color="gray", lw=1)
        if run.goals.bw_min is not None:
            ax.axhline(run.goals.bw_min, color="#d62728", ls="--",
                       lw=1, label=f"goal ≥ {run.goals.bw_min}")
        ax.set_ylabel(f"{sw['kind']} throughput ratio\n{sw['a']} / "
                      f"{sw['b']} (x: no CI, too few reps)")
        ax.set_title(f"{sw['kind']} throughput against extents per key",
                     fontsize=10)
        ax.legend(fontsize=7)
        series = (("read_counts", "key_setups_derived", "o-",
                   "keys derived in the read"),
                  ("read_counts", "slot_programs", "s-",
                   "key-slot programs in the read"),
                  ("write_counts", "key_setups_derived", "^:",
                   "keys derived writing the file"))
        drawn = False
        for where, counter, fmt, what in series:
            have = [(p["x"], (p[where] or {}).get(counter)) for p in pts]
            have = [(x, max(y, 0.8)) for x, y in have if y is not None]
            if have:
                drawn = True
                axc.plot([x for x, _ in have], [y for _, y in have], fmt,
                         label=what, ms=5)
        exp = [(p["x"], p["groups_expected"]) for p in pts
               if p["groups_expected"]]
        if exp:
            axc.plot([x for x, _ in exp], [y for _, y in exp], "--",
                     color="gray", lw=1, label="extents / N (groups if "
                     "every group is full)")
        if drawn:
            axc.set_yscale("log")
            axc.legend(fontsize=7)
        else:
            axc.text(0.5, 0.5, "no counts: the profiled repetition did not "
                     "run (PROFILE=0)\nor this kernel lacks the events",
                     ha="center", va="center", fontsize=9,
                     transform=axc.transAxes)
        axc.set_ylabel(f"events ({sw['a']}, count passes, tracefs)")
        axc.set_title(f"key work against extents per key ({sw['a']})",
                      fontsize=10)
        for a_ in (ax, axc):
            a_.set_xscale("log", base=2)
            a_.set_xticks([t for t, _ in ticks])
            a_.set_xticklabels([lab for _, lab in ticks], fontsize=8)
            a_.minorticks_off()
            a_.set_xlabel("at most N extents per key group "
                          "(fscrypt_extents_per_key=N; log)")
            a_.grid(alpha=0.3, which="both")
        add_skipped_legend(ax, run)
    fig.suptitle("Cost against the size of key groups (one key per extent "
                 "at N = 1, one key for the whole file with no bound)",
                 fontsize=10)
    return _save(fig, out_dir, "groupsweep.png")


def section_groupsweep(doc, run, res, plots):
    sw = res.get("workload")
    if not sw:
        return
    doc.h(2, "Cost against the size of key groups")
    doc.p("Each point N is a file written with at most N extents per key "
          "group (`fscrypt_extents_per_key=N` set by remounting just before "
          "writing it; N = 1 gives every extent a key of its own, the "
          "upstream design; no bound (0) gives the whole file one key), "
          "with the layout of the fragmented workload's file, then read "
          "from a cold cache in every rep (CPU per MiB ratio: guest CPU "
          "time per MiB read, as in \"CPU cost\"). The reference arm "
          "writes and "
          "reads the same files in the same order (its keys do not depend "
          "on N), so both filesystems hold the same files. Ratio = "
          "geometric mean of the per-rep throughput ratios of the arm over "
          "its reference, 95% bootstrap CI over the pairs (none with too "
          f"few reps: {L.reps_needed_text()}). Counts, "
          "of the arm: its counted read of each file (extent keys derived, "
          "key-slot programs: an AES key schedule each; the key pool has "
          "`fscrypto.extent_key_slots` slots, 32 by default, so a read "
          "whose consecutive blocks belong to more keys than that programs "
          "a slot for most blocks) and the writing of the file (keys "
          "derived, key groups started; one key per extent, N = 1, starts "
          "no group: its extents get version 1 contexts); key groups "
          "expected = ceil(extents read / N).")
    if plots.get("groupsweep"):
        doc.img(plots["groupsweep"], "cost against extents per key group")
    for s in sw["sweeps"]:
        doc.h(3, f"{s['kind']}: {s['a']} / {s['b']}")
        rows = []
        for p in s["points"]:
            rc, wc = p["read_counts"] or {}, p["write_counts"] or {}
            rows.append((
                str(p["n"]) if p["bounded"] else "0 (no bound)",
                "-" if p["extents"] is None else f"{p['extents']:g}",
                "-" if p["groups_expected"] is None
                else f"{p['groups_expected']:g}",
                wc.get("key_setups_derived", "not counted"),
                wc.get("group_starts", "not counted"),
                fmt_mib(p["bw_a_median"]), fmt_mib(p["bw_b_median"]),
                fmt_ratio(p["ratio"]),
                fmt_ci_of({"ci_lo": p["ci_lo"], "ci_hi": p["ci_hi"],
                           "ci_supported": p["ci_supported"],
                           "not_conclusive": p["not_conclusive"]}),
                rc.get("key_setups_derived", "not counted"),
                rc.get("slot_programs", "not counted"),
                rc.get("lookups", "not counted"),
                *_ratio_cells(p.get("cpu"))))
        doc.table(["N (extents per key at most)", "extents (FIEMAP)",
                   "key groups expected", "keys derived (write)",
                   "key groups started (write)",
                   f"{s['a']} median MiB/s", f"{s['b']} median MiB/s",
                   "throughput ratio", "95% CI", "keys derived (read)",
                   "key-slot programs (read)", "lookups (read)",
                   "CPU per MiB ratio", "95% CI"], rows,
                  [f"raw data: `raw/<arm>/rep<N>/{s['kind']}-g<N>.json`, "
                   "`profiles/<arm>/counts.tsv`"])
    for arm, why in run.not_measured.items():
        doc.p(f"{arm}: skipped: {why}")
