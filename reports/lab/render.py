"""The report's text: a small document model (Doc) rendered both to
Markdown (summary.md) and HTML (index.html), and the report's sections.
Each section takes the run, the analysis and the plot file names.
"""

import json
import math

from reports.lab import labstats as L
from reports.lab.doc import Doc
from reports.lab.fmt import (
    fmt_ci_of, fmt_cpu_ms_per_mib, fmt_cpu_us_per_op, fmt_mib, fmt_ns, fmt_p,
    fmt_pct, fmt_ratio, isnum, rep_span)
from reports.lab.runmodel import CPU_SOURCES
from reports.lab.profiles import PROFILE_KINDS, profiled_extents
from reports.lab.analysis import key_mode_of


TIMING_NOTE = ("**Timings under TCG or icount are not hardware times.** "
               "QEMU emulates the CPU, so absolute throughput and latency "
               "say little about real machines: compare ratios between arms "
               "of the same run only, never absolute numbers across runs or "
               "machines.")


def section_header(doc, run, res):
    doc.h(1, f"Benchmark report: workload {run.workload}, "
             f"{'undated' if run.date is None else run.date}")
    accel = str(run.run_info.get("accel", "?"))
    note = TIMING_NOTE
    if accel in ("tcg", "icount"):
        note = f"This run used **{accel}**. " + note
    doc.note(note)
    delay = run.injected_delay_ns
    if delay:
        doc.note(f"**Injected slowdown:** every per-extent lookup of this "
                 f"run busy-waited {delay} ns "
                 f"(`fscrypto.extent_lookup_delay_ns={delay}`). This run "
                 "tests the regression check; its numbers are not a "
                 "measurement of the kernel.")


def _n_intervals(res):
    """How many ratio intervals the report shows (for the note on
    multiple comparisons)."""
    return sum(bool(c.bw) + bool(c.cpu) + bool(c.cpu_per_op)
               + len(c.latency or {}) for c in res["comparisons"])


def _of_arm(res):
    """{(A, phase): PhaseComparison}: each arm's comparison with its
    reference, per phase (an arm is the A side of at most one)."""
    return {(c.a, c.phase): c for c in res["comparisons"]}


def section_verdicts(doc, run, res):
    doc.h(2, "Verdicts")
    g = run.goals
    bases = {v.basis for v in res["verdicts"]}
    if not run.main:
        doc.ul(v.text for v in res["verdicts"])
        return
    a, b = run.main.a, run.main.b
    what = (f"Goals of {a} against {b} (see Arms), as this run recorded "
            "them. ")
    if "cpu_per_mib" in bases:
        what += (f"**The verdict decides on CPU cost per MiB** (ratio ≤ "
                 f"{g.cpu_per_mib_max}): guest CPU time of all CPUs, "
                 "kworkers included, per MiB fio moved, in every judged "
                 "phase. Beside it, not deciding: throughput (≥ "
                 f"{g.bw_min}) and p99 latency (≤ {g.p99_max}"
                 "), goals stated for read phases. ")
    if "fallback" in bases:
        what += ("Without CPU data the verdict falls back to the old "
                 f"metric, labelled so: throughput ≥ {g.bw_min} and "
                 f"p99 latency ≤ {g.p99_max} of the read phases. ")
    doc.p(what + "A verdict is \"met\" when the whole 95% CI is on the "
          "goal's side, \"not met\" when all of it is on the other side, "
          "and \"undecided\" when it contains the goal; the metrics beside "
          "it follow the same rule. The ratio is the geometric mean of "
          "per-rep ratios, with Student's 95% t-interval of the mean "
          "log-ratio (p99: a bootstrap over reps of bins merged; see "
          f"Comparisons). With fewer than {L.MIN_PAIRED_REPS} paired reps "
          "a verdict says \"not conclusive (n = N)\". **What the interval "
          "is conditional on:** this run's one boot and, with PREP=once, "
          "its one prepared layout; what varies between boots and between "
          "days is not in it (the nightly's A/A sets measure that: "
          "bench/README.md, \"The nightly\"). About "
          f"{_n_intervals(res)} intervals are in this report; only the "
          "main comparison's verdicts are judged, the rest are "
          "descriptive, and a few of them exclude 1 by chance.")
    doc.ul(v.text for v in res["verdicts"])


def arm_what(run, arm):
    """An arm's DESCRIPTION as the run recorded its definition, or its
    name."""
    return run.definition(arm).get("DESCRIPTION") or arm


def prep_text(run):
    """How the reps were made independent (meta "prep", "saves")."""
    if run.prep == "each":
        return ("each rep on a fresh mkfs with its own preparation (the "
                "workload's fixed seeds make the files alike)")
    if run.prep == "once":
        sv = [s for s in run.saves if s.get("what") == "saved"]
        rs = [s for s in run.saves if s.get("what") == "restored"]
        size = (f"; images of {', '.join(str(s['kib'] // 1024) + ' MiB' for s in sv)}"
                if sv else "")
        took = (f"; a restore took {min(s['seconds'] for s in rs)}-"
                f"{max(s['seconds'] for s in rs)} s" if rs else "")
        return ("each arm prepared once (mkfs, files, FIEMAP check), its "
                "device saved; before every rep the device is zeroed and "
                "the saved image written back, so every rep starts from "
                "the same on-disk state, then a fresh mount, the key added "
                "again, the FIEMAP check again and caches dropped before "
                "each phase: reps are independent in mount, cache and run "
                "order, not in the layout of the files" + size + took)
    return None


def section_run(doc, run):
    info = run.run_info
    doc.h(2, "Run")
    k = run.kernel
    rows = [
        ("workload", run.workload),
        ("what it does", run.description),
        ("analysis", run.analysis),
        ("workload parameters", ", ".join(
            f"{k}={v}" for k, v in run.workload_params.items()) or None),
        ("run format", run.format),
        ("arm definitions", run.spec.get("arms_source")),
        ("date", run.date),
        ("reps per arm", run.reps),
        ("how reps were made", prep_text(run)),
        ("phases", ", ".join(run.phases) or (
            "none run by fio" if run.command_phases else None)),
        ("kernel release", k.release),
        ("linux source", k.linux_source),
        ("kernel series hash", k.series_hash),
        ("kernel tree commit (series applied)", k.tree_head),
        ("kernel config sha256", k.config_sha256),
        ("lab commit", k.lab_commit + (
            " (with local changes)" if k.lab_dirty else "")
         if k.lab_commit else None),
        ("CPU time", f"per timed phase, {cpu_source_text(run)}; window: "
         f"{run.cpu.measured_window}" if run.has_cpu else "not recorded"),
        ("accel", info.get("accel")),
        ("vCPUs", info.get("cpus")),
        ("guest memory, MB", info.get("mem_mb")),
        ("fio", run.fio_version),
        ("elapsed, s", info.get("elapsed_s")),
        ("injected lookup delay, ns", run.injected_delay_ns),
    ]
    if run.command_phases:
        rows.insert([r[0] for r in rows].index("phases") + 1, (
            "command phases (the workload's command, not fio)",
            ", ".join(run.command_phases)))
    # the rest of what the host recorded about the run, in the same table
    rows += [(k.replace("_", " "), info[k]) for k in sorted(
        set(info) - {"accel", "cpus", "mem_mb", "qemu_cmdline", "date",
                     "kernel_release", "kernel_series_hash",
                     "kernel_config_sha256", "elapsed_s",
                     "kernel_tree_head", "kernel_linux_source"})]
    doc.table(["item", "value"],
              [(k, f"`{v}`" if v not in (None, "") else "not recorded")
               for k, v in rows])
    for note in run.spec_notes:
        doc.note(f"**Older run:** {note}.")
    doc.code("QEMU command line", str(info.get("qemu_cmdline",
                                               "not recorded")))
    if run.order:
        doc.code(f"Run order ({len(run.order)} arm runs)",
                 " ".join(f"{a}#{r}" for a, r in run.order))
    jobs = run.jobfiles
    if jobs:
        for name in sorted(jobs):
            kind = "fio job file" if name.endswith(".fio") else \
                "workload file"
            doc.code(f"{kind} {name}", str(jobs[name]))
    else:
        doc.p("fio job files: not recorded in meta.json.")


def section_arms(doc, run):
    ref = run.reference
    doc.h(2, "Arms")
    doc.p("What the guest did for each arm, as it recorded it (the host "
          "computes none of it): the mkfs command it ran, the mount options "
          "as `/proc/mounts` showed them after mounting, the tuning it "
          "applied, and the key mode the kernel reported (btrfs: its "
          "`fscrypt_per_*_keys` option in `/proc/mounts`, and with "
          "per-extent keys its `fscrypt_extents_per_key=N` when the "
          "extents of a key group are bounded: per-extent = key groups "
          "without a bound, per-extent-key = one key per extent (N = 1); "
          "otherwise the policy read back with "
          "`FS_IOC_GET_ENCRYPTION_POLICY_EX`). The guest fails the run when "
          "an arm's key mode is not the one its name says.")
    doc.ul(f"`{a}`: {arm_what(run, a)}" for a in run.arms
           if a in run.arm_definitions)
    rows = []
    for name, arm in run.arms.items():
        if arm.measured:
            rows.append((name, "measured", _or(arm.fs, "?"),
                         f"`{_or(arm.mkfs, '?')}`",
                         f"`{arm.mount_options}`"
                         if arm.mount_options else "not recorded",
                         f"**{_or(arm.key_mode, '?')}** "
                         f"({_or(arm.key_mode_source, '?')})",
                         f"`{arm.tuning}`" if arm.tuning else "-",
                         f"`{ref[name]}`" if name in ref else "-"))
        else:
            rows.append((name, "**not measured**", _or(arm.fs, "-"),
                         "-", "-", "-", "-", "-"))
    doc.table(["arm", "status", "fs", "mkfs (as run)",
               "mount options (/proc/mounts)", "key mode (from the kernel)",
               "tuning after mount", "reference arm"], rows)
    for p in run.arm_fact_problems:
        doc.note(f"**Arm set up differently between reps:** {p}")
    doc.h(2, "Skipped arms")
    if run.not_measured:
        doc.ul(f"**{a}**: {r}" for a, r in run.not_measured.items())
    else:
        doc.p("None: every arm of meta.json was measured.")


def _or(value, unrecorded):
    """A fact of an arm, or what the table shows where none was
    recorded."""
    return unrecorded if value is None else value


def mw_footnote(na, nb):
    """Footnote text when n is too small for MW to reach p < 0.05."""
    return (f"n={na} vs {nb}: the smallest two-sided Mann-Whitney p "
            f"attainable is {L.min_mw_p(na, nb):.3f}, not below "
            f"{L.ALPHA}, so no change can be marked significant with this "
            "many reps (5 vs 5 can reach 0.0079).")


def section_phases(doc, run, res, threshold, plots):
    doc.h(2, "Throughput")
    doc.p("Throughput is fio `bw_bytes` in MiB/s (2^20 bytes/s), one value "
          "per rep. Change % = 100 x (ratio - 1) against the reference arm "
          "named in the row (the ratio: geometric mean of per-rep ratios, "
          "see Comparisons); p is the two-sided Mann-Whitney U p of the "
          "per-rep values; * = significant: p < 0.05 AND the ranges of the "
          f"two samples do not overlap AND |change| ≥ {threshold:g}%.")
    if plots.get("throughput"):
        doc.img(plots["throughput"], "throughput per arm and phase")
    comps = _of_arm(res)
    for phase in run.phases:
        direction = run.direction(phase)
        doc.h(3, f"{phase} ({direction})")
        rows, notes, small = [], [], set()
        for arm in run.arms:
            ref = run.reference.get(arm)
            if arm not in run.measured:
                rows.append((arm, ref or "-", 0, "skipped", "", "", "", "",
                             "", ""))
                continue
            a = res["arms"][arm]["phases"][phase]
            s = a["bw_bytes"]
            c = comps.get((arm, phase))
            if ref is None:
                ch, p, mark = "reference", "", ""
            elif c is None or not c.measured:
                ch, p, mark = f"n/a ({c.reason if c else 'no ref'})", "", ""
            else:
                ch, p = fmt_pct(c.bw["change_pct"]), fmt_p(c.bw["p"])
                mark = "*" if c.bw["significant"] else ""
                if not c.bw["can_reach"]:
                    small.add((c.n_a, c.n_b))
            rows.append((arm, ref or "-", s["n"], fmt_mib(s["median"]),
                         fmt_mib(s["mean"]), fmt_mib(s["stddev"]),
                         fmt_pct(100 * s["cov"], sign=False), ch, p, mark))
        reps = sorted({r for arm in run.measured
                       for r in run.data[arm][phase]})
        notes.append(f"raw data: `raw/<arm>/rep<N>/{phase}.json`, "
                     f"N = {rep_span(reps) or 'none'}")
        notes += [mw_footnote(na, nb) for na, nb in sorted(small)]
        doc.table(["arm", "vs", "n", "median MiB/s", "mean", "stddev",
                   "CoV", "change % vs ref", "p (MW)", "sig"], rows, notes)


def section_latency(doc, run, res, plots):
    doc.h(2, "Completion latency")
    doc.p("Percentiles are nearest-rank on the fio json+ `clat_ns` "
          "histograms of all reps merged (not averages of per-rep "
          "percentiles). The ratio column is this arm over its reference "
          "arm, with a 95% bootstrap CI that resamples whole reps (a "
          "statistic of all I/Os, not of reps, so no t-interval).")
    if plots.get("latency"):
        doc.img(plots["latency"], "latency percentiles")
    comps = _of_arm(res)
    for phase in run.phases:
        doc.h(3, f"{phase} latency")
        rows = []
        for arm in run.arms:
            if arm not in run.measured:
                rows.append((arm, "skipped", "", "", "", "", ""))
                continue
            a = res["arms"][arm]["phases"][phase]
            lat = a["latency_ns"]
            c = comps.get((arm, phase))
            if c and c.measured:
                r = c.latency["p99"]
                rr = f"{fmt_ratio(r['ratio'])} [{fmt_ci_of(r)}] vs {c.b}"
            else:
                rr = "reference" if arm not in run.reference else "n/a"
            rows.append((arm, a["latency_reps"], a["latency_ios"],
                         fmt_ns(lat["p50"]), fmt_ns(lat["p99"]),
                         fmt_ns(lat["p99.9"]), rr))
        doc.table(["arm", "reps", "I/Os", "p50", "p99", "p99.9",
                   "p99 ratio [95% CI]"], rows,
                  [f"raw data: `raw/<arm>/rep<N>/{phase}.json` "
                   "(jobs[0] clat_ns.bins)"])


def _ratio_cells(r):
    """(ratio, CI) cells of a ratio dict, or why there is none."""
    if r is None:
        return "no CPU data", ""
    return fmt_ratio(r["ratio"]), fmt_ci_of(r)


def cpu_source_text(run):
    """Where the CPU times came from, for the Run table."""
    cpu = run.cpu
    text = CPU_SOURCES.get(cpu.source, f"unknown source {cpu.source!r}")
    if cpu.source == "stat":
        text += f" of 1/{cpu.units_per_s} s ({cpu.user_hz_source})"
    if str(run.run_info.get("accel")) == "icount":
        text += ("; under icount this is guest instruction time (4 ns per "
                 "instruction while the vCPU runs), not hardware cycles: a "
                 "cache miss weighs nothing, an AES-NI instruction as much "
                 "as an add")
    return text


def cpu_window_text(run):
    """Where the CPU window of the run's phases began and ended
    (run.cpu.window, recorded by reports.lab.collect)."""
    window, counts = run.cpu.measured_window, run.cpu.window_counts
    io = ("fio's I/O, from its exec_prerun (after fio's start-up, before "
          "the first I/O) to its exec_postrun (after the last I/O and "
          "end_fsync); fio's start and exit are not in it")
    process = ("the whole fio run, so it holds fio's start and exit too: "
               "the same work for every arm, which pulls every ratio "
               "toward 1")
    if window == "io":
        return io
    if window == "mixed":
        return (f"for {counts.get('io', 0)} phase(s) {io}; for "
                f"{counts.get('process', 0)} (job files of several jobs), "
                f"{process}")
    return process


def section_cpu(doc, run, res, plots):
    doc.h(2, "CPU cost")
    if not run.has_cpu:
        doc.p("Not recorded: "
              + ("a format-2 run did not measure CPU time."
                 if run.format < 3 else
                 "the guest recorded no CPU time (no usable cpu line in "
                 "/proc/stat).")
              + " The verdicts fall back to throughput and p99 latency.")
        return
    hz = run.cpu.units_per_s
    precise = run.cpu.source == "schedstat"
    doc.p("CPU time of each timed phase, all CPUs (so the kworkers that "
          "decrypt are in it; idle is not): "
          + ("the guest summed `rq_cpu_time` of the `cpuN` lines of "
             "`/proc/schedstat` (nanoseconds every task but idle ran, from "
             "the scheduler clock; under icount that clock counts guest "
             "instructions) at both ends of a window"
             if precise else
             "the guest read the `cpu` line of `/proc/stat` at both ends "
             "of a window and counted user + nice + system + irq + softirq "
             f"(iowait and steal not), in ticks of 1/{hz} s sampled at the "
             "timer tick (coarse: a phase of few ticks carries +-1 tick per "
             "task switch; the ticks column says how many)")
          + f". The window: {cpu_window_text(run)}. Cost per MiB = CPU "
          "time / (fio `io_bytes` / 2^20), in CPU ms per MiB; per I/O = CPU "
          "time / fio `total_ios`, in CPU µs. Ratio = the arm over its "
          "reference (geometric mean of per-rep ratios, 95% t-interval "
          "of the mean log-ratio); lower is cheaper.")
    if plots.get("cpu"):
        doc.img(plots["cpu"], "CPU cost per MiB per arm and phase")
    comps = _of_arm(res)
    for phase in run.phases:
        doc.h(3, f"{phase} CPU cost")
        rows = []
        for arm in run.arms:
            ref = run.reference.get(arm)
            if arm not in run.measured:
                rows.append((arm, ref or "-", 0, "skipped", "", "", "", "",
                             ""))
                continue
            a = res["arms"][arm]["phases"][phase]
            m, op, t = a["cpu_per_mib"], a["cpu_per_op"], a["cpu_s"]
            c = comps.get((arm, phase))
            if ref is None:
                rr, ci = "reference", ""
            elif c is None or not c.measured:
                rr, ci = f"n/a ({c.reason if c else 'no ref'})", ""
            else:
                rr, ci = _ratio_cells(c.cpu)
            ticks = ((f"{t['median'] * 1000:.1f}" if precise else
                      f"{t['median'] * hz:.0f}")
                     if isnum(t["median"]) and hz else "n/a")
            rows.append((arm, ref or "-", m["n"],
                         fmt_cpu_ms_per_mib(m["median"]),
                         fmt_pct(100 * m["cov"], sign=False)
                         if isnum(m["cov"]) else "n/a",
                         fmt_cpu_us_per_op(op["median"]), ticks, rr, ci))
        doc.table(["arm", "vs", "n", "CPU ms per MiB (median)", "CoV",
                   "CPU µs per I/O (median)",
                   "CPU ms (median)" if precise else "ticks (median)",
                   "ratio per MiB vs ref", "95% CI"], rows,
                  [f"raw data: `cpu.tsv` (arm, rep, phase, "
                   f"{'ns' if precise else 'ticks'}) and "
                   f"`raw/<arm>/rep<N>/{phase}.json` (io_bytes, total_ios)"])


def first_in_rep(run, a, b):
    """{rep: a or b}: which of the two arms ran first in each rep (meta
    order: the order the guest ran them)."""
    seen = {}
    for arm, rep in run.order:
        if arm in (a, b):
            seen.setdefault(rep, arm)
    return seen


def busy_pct(run, arm, phase):
    """The median share of the phase's wall time its guest was busy
    (CPU time over fio's runtime), in %; None without both."""
    vals = []
    for d in run.data.get(arm, {}).get(phase, {}).values():
        if d.cpu_s is not None and d.runtime_ms:
            vals.append(100.0 * d.cpu_s / (d.runtime_ms / 1000.0))
    return sorted(vals)[len(vals) // 2] if vals else None


# Below this share of busy time a phase's throughput and latency follow
# the host (the guest waits for the emulated disk), not the kernel.
HOST_BOUND_BUSY_PCT = 90.0


def section_cpu_reps(doc, run, res):
    """The deciding metric rep by rep: per-rep CPU ratios with the arm
    that ran first, the ratio in each order (a check of carry-over from
    one arm to the next), whether the interval excludes 1, and how busy
    the guest was (throughput of a phase far from 100% busy is
    host-bound)."""
    rows = []
    for c in res["comparisons"]:
        if not c.measured or not c.cpu:
            continue
        a, b = c.a, c.b
        first = first_in_rep(run, a, b)
        per = c.cpu["per_rep_ratio"]
        by_order = {a: [], b: []}
        for rep, r in per.items():
            if first.get(int(rep)) in by_order:
                by_order[first[int(rep)]].append(r)

        def gm(xs):
            return fmt_ratio(math.exp(sum(map(math.log, xs)) / len(xs))) \
                if xs else "-"
        ba, bb = busy_pct(run, a, c.phase), busy_pct(run, b, c.phase)
        busy = " / ".join("-" if x is None else f"{x:.0f}%"
                          for x in (ba, bb))
        if any(x is not None and x < HOST_BOUND_BUSY_PCT for x in (ba, bb)):
            busy += " (host-bound)"
        lo, hi = c.cpu["ci_lo"], c.cpu["ci_hi"]
        sig = ("*" if isnum(lo) and isnum(hi) and (lo > 1 or hi < 1)
               else "")
        rows.append((f"{a} / {b}", c.phase, fmt_ratio(c.cpu["ratio"]),
                     fmt_ci_of(c.cpu), sig,
                     " ".join(f"{r:.4f}{'a' if first.get(int(rep)) == a else 'b'}"
                              for rep, r in per.items()),
                     gm(by_order[a]), gm(by_order[b]), busy))
    if not rows:
        return
    doc.h(3, "CPU cost per MiB, rep by rep (the deciding metric)")
    doc.p("Per-rep ratios in rep order, each marked with the arm that ran "
          "first in its rep (a: the comparison's first arm, b: its "
          "second). The run rotates the order per rep (meta `order_rule`), "
          "so both orders appear; if the ratio differed much between them, "
          "what one arm leaves behind would bias the other. sig: the 95% "
          "t-interval excludes 1. Guest busy: CPU time over fio's runtime "
          "(median over reps) of each arm; below "
          f"{HOST_BOUND_BUSY_PCT:g}% the phase waits for the emulated disk, "
          "so its throughput and latency follow the host, not the kernel; "
          "above 100%, the CPU window held work after fio's runtime "
          "(end_fsync, and the sync of a write phase).")
    doc.table(["comparison", "phase", "CPU per MiB ratio", "95% CI", "sig",
               "per-rep ratios (a/b: arm first)", "ratio, a first",
               "ratio, b first", "guest busy a / b"], rows)


def section_comparisons(doc, run, res, plots):
    doc.h(2, "Comparisons")
    doc.p("Ratio = the geometric mean of the per-rep ratios A[rep N] / "
          "B[rep N] (the arms run interleaved, so rep N of A and of B ran "
          "back to back), with Student's 95% t-interval of the mean "
          "log-ratio: "
          "`reports.lab.labstats.ratio`, the one definition the baseline, the "
          "regression check and the history use too. Throughput: higher "
          "is better; CPU cost per MiB: lower is cheaper. Change % = 100 x "
          "(throughput ratio - 1); p is the Mann-Whitney p of the two "
          "arms' throughput values.")
    rows, small = [], set()
    for c in res["comparisons"]:
        name = f"{c.a} / {c.b}"
        if not c.measured:
            rows.append((name, c.phase, f"not measured: {c.reason}",
                         "", "", "", "", "", "", "", ""))
            continue
        b = c.bw
        if not b["can_reach"]:
            small.add((c.n_a, c.n_b))
        rows.append((name, c.phase, fmt_ratio(b["ratio"]),
                     fmt_ci_of(b), *_ratio_cells(c.cpu),
                     fmt_pct(b["change_pct"]), fmt_p(b["p"]),
                     "yes" if b["separated"] else "no",
                     "*" if b["significant"] else "",
                     " ".join(f"{r:.3f}" for r in
                              c.per_rep_ratio.values())))
    doc.table(["comparison", "phase", "throughput ratio", "95% CI",
               "CPU per MiB ratio", "95% CI", "change %", "p (MW)",
               "ranges separate", "sig",
               "per-rep throughput ratios (in rep order)"], rows,
              [mw_footnote(na, nb) for na, nb in sorted(small)])
    section_cpu_reps(doc, run, res)
    doc.ul(f"`{c.name}`: {c.label}" for c in run.comparisons)
    if not run.main:
        return
    main_a, main_b = run.main.a, run.main.b
    # the main comparison and every other arm against the same reference
    # (e.g. one key per extent, the upstream design, against per-inode keys)
    pairs = [c for c in run.comparisons if c.b == main_b]
    doc.h(3, f"Against {main_b}: " + ", ".join(
        f"{p.a} / {p.b}" + (" (main)" if p == run.main else "")
        for p in pairs))
    # in the order of pairs, then of phases
    group = [c for p in pairs for c in res["comparisons"]
             if c.comparison == p]
    main = [c for c in group if c.comparison == run.main]
    if not any(c.measured for c in main):
        reason = next((c.reason for c in main if not c.measured), "no data")
        doc.p(f"**Main comparison not measured: {reason}.**")
    if any(c.measured for c in group):
        doc.img(plots["ratio"], f"ratios against {main_b}")
        rows = [(f"{c.a} / {c.b}", c.phase, f"not measured: {c.reason}",
                 "", "", "", "", "") if not c.measured else
                (f"{c.a} / {c.b}", c.phase, *_ratio_cells(c.cpu),
                 fmt_ratio(c.bw["ratio"]), fmt_ci_of(c.bw),
                 fmt_ratio(c.latency["p99"]["ratio"]),
                 fmt_ci_of(c.latency["p99"])) for c in group]
        doc.table(["comparison", "phase", "CPU per MiB ratio", "95% CI",
                   "throughput ratio", "95% CI", "p99 ratio", "95% CI"],
                  rows, [f"`{p.name}`: {p.label}" for p in pairs])
    elif plots.get("ratio"):
        doc.img(plots["ratio"], f"{key_mode_of(run, main_a)} / "
                f"{key_mode_of(run, main_b)} ratio: not measured")
    if plots.get("comparisons"):
        doc.img(plots["comparisons"], "all comparisons")


def section_fragmentation(doc, run, res):
    doc.h(2, "Fragmentation of the test files")
    checks = run.extent_checks
    if checks:
        doc.p("FIEMAP counts, checked in the guest before any measurement "
              "of every file the workload promises something about (a "
              "broken promise fails the run). Shared = extents flagged "
              "FIEMAP_EXTENT_SHARED.")
        rows = {}
        for c in checks:
            key = (c.get("arm"), c.get("label"))
            promise = ", ".join(
                x for x in (f"≥ {c['min']}" if c.get("min") is not None
                            else "", f"≤ {c['max']}" if c.get("max")
                            is not None else "",
                            f"shared ≥ {c['min_shared']}"
                            if c.get("min_shared") else "") if x) or "-"
            r = rows.setdefault(key, {"extents": [], "shared": [],
                                      "promise": promise,
                                      "path": c.get("path", "")})
            tag = {"profiled": " (profiled)",
                   "prepare": " (prepared)"}.get(c.get("rep"), "")
            r["extents"].append(f"{c.get('extents')}{tag}")
            r["shared"].append(str(c.get("shared", 0)))
        doc.table(["arm", "file", "extents per rep", "shared extents",
                   "promise"],
                  [(a, f"`{lab}`", ", ".join(r["extents"]),
                    ", ".join(r["shared"]), r["promise"])
                   for (a, lab), r in rows.items()])
        return
    ec = res.get("extent_counts")
    if not ec:
        doc.p("Extent counts: not recorded in meta.json.")
        return
    want = ec["min_extents"]
    rows = [(arm, ", ".join(str(x) for x in v["counts"]),
             "yes" if not v["below_min"] else "**no**")
            for arm, v in ec["arms"].items()]
    doc.table(["arm", "extents per rep", f"all ≥ min_extents ({want})"],
              rows)


def section_profiles(doc, run, res, plots):
    doc.h(2, "Profiles")
    prof = res.get("profiles")
    if not prof:
        doc.p("Profiles: not collected (no profiles/ in the run directory).")
        return
    rows = []
    for arm in run.ordered(set(run.arms) | set(prof)):
        e = prof.get(arm)
        cells = []
        for fname, _ in PROFILE_KINDS:
            if e and fname in e["files"]:
                cells.append(f"[{fname}](profiles/{arm}/{fname})")
            else:
                cells.append("not collected")
        other = [f for f in (e["files"] if e else [])
                 if f not in dict(PROFILE_KINDS)]
        rows.append([arm] + cells + [", ".join(other) or "-"])
    doc.table(["arm"] + [k for _, k in PROFILE_KINDS] + ["other files"],
              rows)
    doc.h(3, "bpftrace")
    if plots.get("bpftrace"):
        for p in plots["bpftrace"]:
            doc.img(p["file"], f"bpftrace {p['name']}")
    else:
        doc.p("bpftrace histograms: not collected.")
    maps = [(arm, n, v) for arm, e in prof.items()
            for n, v in e.get("bpftrace", {}).get("maps", {}).items()]
    if maps:
        doc.table(["arm", "map", "value"],
                  [(a, f"`{n}`", json.dumps(v, sort_keys=True))
                   for a, n, v in maps])
    section_key_work(doc, run, res)
    doc.h(3, "Key derivations vs extents")
    if plots.get("derivations"):
        doc.img(plots["derivations"], "derivations vs extents")
        doc.table(["arm", "extents (median)", "derivations"],
                  [(a, f"{x:g}", f"{y:g}")
                   for a, (x, y) in res["derivations_vs_extents"].items()])
    else:
        doc.p("Not collected (needs bpftrace derivation counts and "
              "extent_counts in meta.json for the same arm).")
    doc.h(3, "Slab memory")
    if plots.get("slab"):
        doc.img(plots["slab"], "slab memory")
        slabs = {a: e["slab"] for a, e in prof.items() if "slab" in e}
        doc.table(["cache"] + [f"{a} KiB" for a in slabs],
                  [[f"`{c}`"] + [f"{s.get(c, {}).get('bytes', 0) / 1024:.0f}"
                                 for s in slabs.values()]
                   for c in res["slab_caches"]],
                  ["KiB = num_objs x objsize / 1024 from the slabinfo "
                   "snapshot `profiles/<arm>/slab.txt`"])
    else:
        doc.p("Slab snapshots: not collected.")
    doc.h(3, "perf stat")
    stats = [(a, e["perf_stat"]) for a, e in prof.items() if "perf_stat" in e]
    if stats:
        for a, text in stats:
            lines = text.splitlines()
            doc.code(f"perf stat, {a}", "\n".join(lines[:200]))
    else:
        doc.p("perf stat: not collected.")


def _reasons(by_reason):
    """"extents 3, new 1" of the reasons that occurred, or "-"."""
    return ", ".join(f"{k} {v:g}" for k, v in sorted(by_reason.items())
                     if v) or "-"


def section_key_work(doc, run, res):
    """Derivations, key-slot programs and key-group starts per arm: the
    profiled phase (bench.bt) and the count passes (tracefs)."""
    doc.h(3, "Key work per arm")
    kw = res.get("key_work") or {}
    phase = run.profile_phase or "the profiled phase"
    doc.p(f"What the key machinery did in the profiled phase ({phase}, "
          "cold cache), from `profiles/bench.bt`: extent lookups (and those "
          "that had to derive their key), extent keys derived or found "
          "cached (`fscrypt_extent_key_setup`), HKDF derivations (all "
          "contexts, and of extent keys: context 9), key-slot programs "
          "(an AES key schedule each) and evictions, and key-group starts "
          "per reason (they happen when a file writes the first extent of "
          "a group, so a read has none). An event bpftrace did not see "
          "counts 0.")
    rows = []
    for arm in run.arms:
        if arm in run.not_measured:
            rows.append((arm, f"skipped: {run.not_measured[arm]}", "",
                         "", "", "", "", "", ""))
            continue
        k = kw.get(arm)
        if not k:
            rows.append((arm, "not collected", "", "", "", "", "", "", ""))
            continue
        x = profiled_extents(run, arm)
        rows.append((arm, "-" if x is None else f"{x:g}",
                     f"{k['lookups']:g} ({k['lookups_derived']:g})",
                     f"{k['key_setups_derived']:g}",
                     f"{k['key_setups_cached']:g}",
                     f"{k['derivations']:g} ({k['derivations_context_9']:g})",
                     f"{k['slot_programs']:g}", f"{k['slot_evicts']:g}",
                     f"{k['group_starts']:g}: "
                     f"{_reasons(k['group_starts_by_reason'])}"))
    doc.table(["arm", "extents of the file read", "lookups (derived)",
               "extent keys derived", "extent keys cached",
               "HKDF derivations (extent keys)", "key-slot programs",
               "key-slot evictions", "key-group starts: per reason"], rows,
              ["raw data: `profiles/<arm>/bpftrace.json` (maps @lookups, "
               "@lookup_key, @extent_key_setup, @derive_by_context, "
               "@slot_programs, @slot_evicts, @group_starts)"])
    counts = res.get("counts") or {}
    if not counts:
        return
    doc.h(3, "Counted passes (tracefs)")
    doc.p("Phases the profiled repetition ran once more each, from a cold "
          "cache, with the fscrypt events recorded through tracefs "
          "(`trace_counts` in bench/guest/lib.sh); a phase the run did "
          "not time is a workload's count of its preparation. Lost events must be "
          "0 for the counts to be whole.")
    rows = []
    for arm, phases in counts.items():
        for ph, c in phases.items():
            starts = {k[len("group_starts_"):]: v for k, v in c.items()
                      if k.startswith("group_starts_")}
            rows.append((arm, f"`{ph}`", c.get("lookups", 0),
                         c.get("key_setups_derived", 0),
                         c.get("key_setups_cached", 0),
                         f"{c.get('derivations', 0)} "
                         f"({c.get('derivations_context_9', 0)})",
                         c.get("slot_programs", 0), c.get("slot_evicts", 0),
                         f"{c.get('group_starts', 0)}: {_reasons(starts)}",
                         ("**" + str(c["lost_events"]) + "**")
                         if c.get("lost_events") else 0))
    doc.table(["arm", "phase", "lookups", "extent keys derived",
               "extent keys cached", "HKDF derivations (extent keys)",
               "key-slot programs", "key-slot evictions",
               "key-group starts: per reason", "lost events"], rows,
              ["raw data: `profiles/<arm>/counts.tsv`"])


def section_tail(doc, run, res, threshold, plots):
    if plots.get("order"):
        doc.h(2, "Run order")
        doc.p("Each point is one arm run; a trend over positions would "
              "mean the host drifted during the run (the runner interleaves "
              "arms so that drift hits all of them).")
        doc.img(plots["order"], "throughput in run order")
    doc.h(2, "Data problems")
    if run.warnings:
        doc.ul(f"`{w}`" for w in run.warnings)
    else:
        doc.p("None found.")
    doc.h(2, "How the numbers are made")
    doc.ul([
        "Each rep's number comes from one fio json+ file; the direction "
        "(read/write) is the side of jobs[0] that moved bytes.",
        "summary: median, mean, sample stddev (ddof=1), CoV = stddev/mean.",
        "Ratios (throughput, CPU cost): geometric mean of the per-rep "
        "ratios A[rep N] / B[rep N]; 95% CI: Student's t-interval of the "
        "mean log-ratio (n - 1 degrees of freedom), exponentiated, so "
        "the report is reproducible (`reports.lab.labstats.ratio`, also used "
        "by the baseline, the check and the history).",
        ("CPU cost: not recorded in this run." if not run.has_cpu else
         f"CPU cost: the guest's CPU time of each timed phase, all CPUs, "
         f"from {cpu_source_text(run)} (window: "
         f"{run.cpu.measured_window}; "
         "see CPU cost), per MiB and per I/O of fio's totals."),
        "Everything the report needs about arms, comparisons, goals and "
        "metrics is read from the run directory (meta.json `spec`), not "
        "from the lab's current bench/arms or bench/workloads.",
        "Significance (LKP style plus a test): Mann-Whitney U two-sided "
        f"p < 0.05 AND non-overlapping ranges AND |change| ≥ "
        f"{threshold:g}% (`--threshold`). With 5 vs 5 reps the smallest "
        "attainable p is 0.0079; with 3 vs 3 it is 0.1, so 3 reps can "
        "never be significant.",
        "Latency percentiles: nearest rank on clat_ns bins merged over "
        "reps; ratios' CIs resample reps.",
        f"Too few reps: {L.reps_needed_text()}; below that, verdicts say "
        "\"not conclusive (n = N)\".",
        "All numbers, per rep, are in `results.json`; raw fio output is in "
        "`raw/`, copied from the run directory.",
    ])


def section_memory(doc, run, res, plots):
    doc.h(2, "Memory of the key objects")
    mem = res.get("memory") or {}
    doc.p("Slab caches `fscrypt_extent_info` (one per extent: with key "
          "groups its number and a reference to its key), "
          "`fscrypt_extent_key` (the derived extent keys, one per key group; "
          "absent on kernels before key groups) and `fscrypt_info` "
          "(per-inode fscrypt infos), from `/proc/slabinfo` "
          "in the profiled repetition: before the read phase (after "
          "dropping caches) and right after it, while the file's inode is "
          "still cached. Objects are active objects; KiB = active objects x "
          "object size; per extent = the growth in bytes / extents of the "
          "file read. SLUB counts every object of the per-CPU slabs as "
          "active, so these counts move in whole slabs (32 objects of 128 "
          "bytes): a change smaller than a slab is noise; thousands of "
          "per-extent objects are not.")
    if plots.get("memory"):
        doc.img(plots["memory"], "key-object memory")
    rows = []
    for arm, m in mem.items():
        if m["status"] != "measured":
            why = m.get("reason", "")
            rows.append((arm, "-", f"{m['status']}" + (f": {why}" if why
                                                       else ""),
                         "", "", "", "", ""))
            continue
        for cache, c in m["caches"].items():
            if c["status"] != "measured":
                rows.append((arm, f"`{cache}`", f"absent: {c['reason']}",
                             "", "", "", "", ""))
                continue
            ab = c.get("active_before")
            ppe = c.get("bytes_per_extent")
            rows.append((arm, f"`{cache}`",
                         "n/a" if ab is None else ab, c["active_after"],
                         "n/a" if c.get("delta_objs") is None
                         else f"{c['delta_objs']:+d}",
                         c["objsize"], f"{c['bytes_after'] / 1024:.1f}",
                         "n/a" if ppe is None else f"{ppe:.2f}"))
    doc.table(["arm", "cache", "objects before read", "objects after read",
               "change", "object size, B", "KiB after", "bytes per extent"],
              rows, ["raw data: `profiles/<arm>/slab-before.txt` and "
                     "`profiles/<arm>/slab.txt`; extents read: "
                     + (", ".join(f"{a} {m['extents']}" for a, m in
                                  mem.items() if m.get("extents"))
                        or "not recorded")])


def section_flames(doc, run, res):
    doc.h(2, "Flame graphs")
    fl = res.get("flames") or {}
    passes = (f", {run.profile_passes} times from a cold cache, their "
              "samples put together" if run.profile_passes > 1 else "")
    doc.p("`perf record -e cpu-clock -F 499 -g -a` around the "
          f"profiled phase{passes} (a separate pass from the bpftrace one), `perf script` "
          "in the guest, folded and drawn here (reports/lab/flame.py): the "
          "width of a frame is its share of the non-idle samples; the "
          "process name is the bottom frame.")
    arms = fl.get("arms") or {}
    rows = []
    for arm in run.arms:
        if arm in arms:
            a = arms[arm]
            rows.append((arm, f"[{a['svg']}]({a['svg']})",
                         f"[{a['folded']}]({a['folded']})",
                         a["busy_samples"], a["idle_samples"]))
        elif arm in run.not_measured:
            rows.append((arm, f"skipped: {run.not_measured[arm]}", "",
                         "", ""))
        else:
            rows.append((arm, "not collected", "", "", ""))
    doc.table(["arm", "flame graph", "folded stacks", "samples",
               "idle samples (left out)"], rows)
    d = fl.get("diff")
    doc.h(3, "Differential flame graph")
    if not d:
        doc.p("Not drawn: fewer than two arms were profiled "
              "(skipped arms have no profile).")
        return
    if not d["main"]:
        a, b = (run.main.a, run.main.b) if run.main else ("?", "?")
        doc.note(f"**This is {d['target']} against {d['base']}, not "
                 f"{a} against {b}**: {d['why_not_main']}.")
    doc.p(f"[{d['svg']}]({d['svg']}): the flame graph of {d['target']}, "
          f"each frame colored by how its share of samples changed from "
          f"{d['base']} (red larger, blue smaller). Functions whose share "
          "as the leaf (self) changed most (hover over a frame in the "
          "SVG, opened on its own, for its numbers):")
    doc.img(d["svg"], f"differential flame graph, {d['target']} against "
            f"{d['base']}")
    doc.table(["function", f"self % {d['target']}", f"self % {d['base']}",
               "change, points", f"incl. % {d['target']}",
               f"incl. % {d['base']}"],
              [(f"`{r['function']}`", f"{100 * r['self_target']:.2f}",
                f"{100 * r['self_base']:.2f}",
                f"{100 * r['self_delta']:+.2f}",
                f"{100 * r['incl_target']:.2f}",
                f"{100 * r['incl_base']:.2f}") for r in d["top"]])
    premium_table(doc, d)


def premium_table(doc, d):
    """Where the extra samples of the target are: categories of functions
    (reports/lab/flame.py PREMIUM_CATEGORIES), in samples, not shares."""
    p = d.get("premium")
    if not p:
        return
    t = p["total"]
    doc.h(3, f"Where {d['target']}'s extra samples are")
    doc.p(f"Busy samples of the profiled phase, {d['target']} against "
          f"{d['base']}: {t['target']} against {t['base']}, "
          f"{100 * t['premium']:+.2f}% (one SD {100 * t['sd']:.2f} points, "
          "counting samples as Poisson). Each sample counts for the "
          "innermost frame of its stack that falls in a category; a "
          "category's premium is its extra samples over the base's busy "
          "samples, so the rows add up to the total. A row within about two "
          "SDs of zero is not told apart from noise"
          + ("; **at this sample count the total itself is not**: a run "
             "with more PROFILE_PASSES gives more samples"
             if abs(t["premium"]) < 2 * t["sd"] else "") + ".")
    doc.table(["category", d["target"], d["base"], "premium, points",
               "one SD"],
              [(r["category"], r["target"], r["base"],
                f"{100 * r['premium']:+.2f}", f"{100 * r['sd']:.2f}")
               for r in p["rows"]])


def section_no_fio_phases(doc, run):
    """In place of the sections of fio's numbers (throughput, latency, CPU
    cost, comparisons) when every phase was a command phase."""
    doc.h(2, "Phases")
    doc.p("Every timed phase of this run ran a command of the workload, not "
          f"fio ({', '.join(run.command_phases) or 'none'}): "
          "there is no throughput, latency or CPU cost per MiB of fio to "
          "show or compare. Each command phase's results are in "
          "`raw/<arm>/rep<N>/<phase>.tsv`, and the workload's own section "
          "below reports them.")


def build_doc(run, res, threshold, plots):
    doc = Doc()
    section_header(doc, run, res)
    section_verdicts(doc, run, res)
    section_run(doc, run)
    section_arms(doc, run)
    if run.phases:
        section_phases(doc, run, res, threshold, plots)
        section_latency(doc, run, res, plots)
        section_cpu(doc, run, res, plots)
        section_comparisons(doc, run, res, plots)
    else:
        section_no_fio_phases(doc, run)
    section_fragmentation(doc, run, res)
    section_profiles(doc, run, res, plots)
    section_memory(doc, run, res, plots)
    section_flames(doc, run, res)
    mod = run.module()
    if mod is not None:
        mod.render(doc, run, res, plots)
    section_tail(doc, run, res, threshold, plots)
    return doc
