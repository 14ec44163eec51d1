"""The lab's regression gate: sets of boots, the nightly's baseline, the
check against it, the A/B comparison of two kernels, and what the A/A
sets say about noise and detection power (issue #34).

    /usr/bin/python3 -m reports.lab.gate summarize SET_DIR
    /usr/bin/python3 -m reports.lab.gate baseline OUT.json SET_DIR... [--fa 0.02] [--floor-pct 0.5]
    /usr/bin/python3 -m reports.lab.gate check SET_DIR BASELINE.json [--junit FILE]
    /usr/bin/python3 -m reports.lab.gate ab SET_DIR [--baseline BASELINE.json] [--junit FILE]
    /usr/bin/python3 -m reports.lab.gate power BASELINE.json
    /usr/bin/python3 -m reports.lab.gate experiment BASELINE.json SET_DIR...
    /usr/bin/python3 -m reports.lab.gate ab-calibrate BASELINE.json --aa SET_DIR... [--injected SET_DIR...]
    /usr/bin/python3 -m reports.lab.gate order SET_DIR...

What is tracked: the log of the main ratio (the first comparison of the
run: per-extent over per-inode keys) of guest CPU time per MiB, per
phase. A set (bench/run-boots.sh) is several boots; each boot is a whole
run with its own preparation and REPS paired reps. A boot's value is the
mean of its per-rep log-ratios; a nightly's value is the mean of its
boots' values. So what differs between boots (the prepared layout, the
boot itself) is in a nightly's value, and what differs between nightlies
(the host, the day) is in the spread of the A/A nightlies the baseline is
made of: the baseline's threshold comes from that spread, not from the
reps of one run (fsperf's rule: mean and spread of many runs).

Exit status: 0 pass, 1 a regression (check, ab), 2 bad input or a set
that cannot be compared with the baseline (another accel, QEMU, CPU
count, prep mode, arm set or kernel base), 3 nothing comparable.
"""

import argparse
import dataclasses
import json
import math
import os
import sys
from typing import Dict, List, Optional

import numpy as np
from scipy import stats as _sps

from reports.lab import runmodel as M

METRIC = "cpu_per_mib"
BASELINE_FORMAT = "gate-1"
# What two sets must share to be compared (pyperf's checked metadata):
# refused when they differ. The host CPU model and the root image are
# recorded and warned about, not refused: the metric is guest
# instructions under icount, which neither changes.
CHECKED = ("accel", "qemu_version", "cpus", "prep", "arms", "reps",
           "kernel_base", "workload", "window")
WARNED = ("host_cpu_model", "root_image_sha256", "order_rule")


class GateError(Exception):
    """Bad input: exit 2."""


# ----------------------------------------------------------------- model

@dataclasses.dataclass
class PhaseValue:
    """One boot's value of one phase: the per-rep log-ratios, and per rep
    which arm of the ratio ran first ("a" or "b"; "" when unknown).

    If the arm that runs first in a rep cost more, the per-rep ratios
    would alternate with the order: a fixed effect of the design, not
    noise (with the same order rule and reps every boot carries the same
    share of it). So the rep-to-rep spread is taken around the mean of
    each order (resid_ss, resid_df), not around the boot's mean; it costs
    a degree of freedom per boot. (On 2026-12-07, ten A/A boots showed no
    such effect beyond noise: reports/results/2026-12-07-regression-gate.md.)"""
    logs: List[float]
    orders: List[str] = dataclasses.field(default_factory=list)

    @property
    def n(self):
        return len(self.logs)

    @property
    def mean(self):
        return float(np.mean(self.logs)) if self.logs else math.nan

    @property
    def sd(self):
        return float(np.std(self.logs, ddof=1)) if self.n >= 2 else math.nan

    def resid(self):
        """(sum of squares around each order's mean, its degrees of
        freedom)."""
        groups = {}
        for i, x in enumerate(self.logs):
            o = self.orders[i] if i < len(self.orders) else ""
            groups.setdefault(o, []).append(x)
        ss = sum(float(np.sum((np.asarray(g) - np.mean(g)) ** 2))
                 for g in groups.values())
        return ss, self.n - len(groups)


@dataclasses.dataclass
class Boot:
    """One boot of a set: a whole run."""
    index: int
    label: str
    run: str
    ratio: str
    phases: Dict[str, PhaseValue]
    identity: Dict[str, str]
    injected_ns: int
    elapsed_s: float
    other_vms: float
    load1: float
    date: str


@dataclasses.dataclass
class Set:
    """A set of boots (bench/run-boots.sh): a nightly, or an A/B pair."""
    name: str
    kind: str
    workload: str
    boots: List[Boot]
    elapsed_s: float

    def labels(self):
        return sorted({b.label for b in self.boots})

    def phases(self):
        return list(self.boots[0].phases) if self.boots else []

    def boots_of(self, label):
        return [b for b in self.boots if b.label == label]

    def value(self, phase, label=None):
        """The mean over the boots (of LABEL) of their mean log-ratio."""
        vals = [b.phases[phase].mean for b in self.boots
                if (label is None or b.label == label)
                and phase in b.phases]
        return float(np.mean(vals)) if vals else math.nan

    def identity(self):
        return self.boots[0].identity if self.boots else {}

    def injected_ns(self, label=None):
        return max((b.injected_ns for b in self.boots
                    if label is None or b.label == label), default=0)

    def beside(self):
        """How many other VMs ran beside the set, on average."""
        return float(np.mean([b.other_vms for b in self.boots])) \
            if self.boots else 0.0


def identity_of(run):
    """The checked and warned facts of a loaded run."""
    info = run.run_info
    return {
        "accel": str(info.get("accel", "?")),
        "qemu_version": str(info.get("qemu_version", "not recorded")),
        "cpus": str(info.get("cpus", "?")),
        "prep": str(run.prep or "?"),
        "arms": " ".join(sorted(run.measured)),
        "reps": str(run.reps or "?"),
        "kernel_base": str(run.kernel.base or "?"),
        "workload": str(run.workload),
        "window": str(run.cpu.window if run.cpu and run.cpu.window
                      else "?"),
        "host_cpu_model": str(info.get("host_cpu_model", "not recorded")),
        "root_image_sha256": str(info.get("root_image_sha256",
                                          "not recorded")),
        "order_rule": run.order_rule,
        "series_hash": str(run.kernel.series_hash or "?"),
    }


def load_boot(run_dir, index=0, label="bench"):
    run = M.load_run(run_dir)
    if not run.has_cpu:
        raise GateError(f"{run_dir} recorded no CPU time")
    ratios = M.tracked_ratios(run, METRIC)
    if not ratios:
        raise GateError(f"{run_dir} has no comparison of two arms")
    name, phases = next(iter(ratios.items()))
    a, b = name.split("/")
    first = {}
    for arm, rep in run.order:
        if arm in (a, b):
            first.setdefault(rep, "a" if arm == a else "b")
    out = {}
    for phase, v in phases.items():
        if isinstance(v, str):
            raise GateError(f"{run_dir}: {name} {phase}: {v}")
        pairs = [(math.log(x), first.get(int(r), "")) for r, x
                 in zip(v[0], v[1]) if math.isfinite(x) and x > 0]
        out[phase] = PhaseValue([x for x, _ in pairs], [o for _, o in pairs])
    info = run.run_info
    return Boot(index=index, label=label, run=os.path.basename(run_dir),
                ratio=name, phases=out, identity=identity_of(run),
                injected_ns=run.injected_delay_ns,
                elapsed_s=float(info.get("elapsed_s") or 0),
                other_vms=float(info.get("host_other_vms_mean") or 0),
                load1=float(info.get("host_load1_mean") or 0),
                date=str(run.date or ""))


def load_set(set_dir):
    path = os.path.join(set_dir, "set.json")
    try:
        with open(path, encoding="utf-8") as f:
            s = json.load(f)
    except (OSError, ValueError) as e:
        raise GateError(f"{set_dir}: no readable set.json ({e})") from e
    boots = [load_boot(os.path.join(set_dir, b["run"]), b["index"],
                       b["label"]) for b in s.get("boots", [])]
    if not boots:
        raise GateError(f"{set_dir}: the set has no boots")
    ids = {json.dumps({k: b.identity[k] for k in CHECKED}, sort_keys=True)
           for b in boots}
    if len(ids) > 1:
        raise GateError(f"{set_dir}: its boots differ in "
                        + ", ".join(k for k in CHECKED
                                    if len({b.identity[k] for b in boots})
                                    > 1))
    ratios = {b.ratio for b in boots}
    if len(ratios) > 1:
        raise GateError(f"{set_dir}: its boots track different ratios "
                        f"{sorted(ratios)}")
    return Set(name=os.path.basename(os.path.realpath(set_dir)),
               kind=s.get("kind", "?"), workload=s.get("workload", "?"),
               boots=boots, elapsed_s=float(s.get("elapsed_s") or 0))


def pct(log_value):
    return 100.0 * math.expm1(log_value)


# ------------------------------------------------------- summarize a set

def summarize(set_dir):
    """summary.json and summary.md of a set: per label and phase, the
    ratio with an interval over its boots."""
    st = load_set(set_dir)
    rows = []
    for label in st.labels():
        boots = st.boots_of(label)
        for phase in st.phases():
            means = [b.phases[phase].mean for b in boots]
            row = {"label": label, "phase": phase, "boots": len(means),
                   "ratio": math.exp(float(np.mean(means))),
                   "boot_ratios": [math.exp(x) for x in means],
                   "rep_sd_log": float(np.mean([b.phases[phase].sd
                                                for b in boots]))}
            if len(means) >= 2:
                lo, hi = _t_ci(means)
                row["ci"] = [math.exp(lo), math.exp(hi)]
            rows.append(row)
    out = {"set": st.name, "kind": st.kind, "workload": st.workload,
           "ratio": st.boots[0].ratio, "metric": METRIC,
           "identity": st.identity(), "elapsed_s": st.elapsed_s,
           "boots": [{"index": b.index, "label": b.label, "run": b.run,
                      "injected_ns": b.injected_ns,
                      "other_vms": b.other_vms, "load1": b.load1,
                      "ratio": {p: math.exp(v.mean)
                                for p, v in b.phases.items()}}
                     for b in st.boots],
           "rows": rows}
    with open(os.path.join(set_dir, "summary.json"), "w",
              encoding="utf-8") as f:
        json.dump(out, f, indent=1, sort_keys=True)
    lines = [f"# Set {st.name} ({st.kind}, {st.workload})", "",
             f"Ratio {st.boots[0].ratio} of guest CPU time per MiB, "
             f"{len(st.boots)} boot(s), {st.elapsed_s / 60:.1f} min. "
             "A boot's ratio is the geometric mean of its paired reps; "
             "the interval is Student's t over the boots' ratios (it "
             "holds what varies between boots, not between days).", "",
             "| label | phase | boots | ratio | 95% CI over boots | "
             "per boot |", "|---|---|---|---|---|---|"]
    for r in rows:
        ci = (f"{r['ci'][0]:.4f}-{r['ci'][1]:.4f}" if "ci" in r
              else "(one boot)")
        lines.append(f"| {r['label']} | {r['phase']} | {r['boots']} | "
                     f"{r['ratio']:.4f} | {ci} | "
                     + " ".join(f"{x:.4f}" for x in r["boot_ratios"])
                     + " |")
    with open(os.path.join(set_dir, "summary.md"), "w",
              encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return out


def _t_ci(x, alpha=0.05):
    x = np.asarray(x, dtype=float)
    half = float(_sps.t.ppf(1 - alpha / 2, x.size - 1)) * \
        float(np.std(x, ddof=1)) / math.sqrt(x.size)
    return float(np.mean(x)) - half, float(np.mean(x)) + half


# --------------------------------------------------- variance components

def components(sets, phase):
    """Variance components of one phase's log-ratio from A/A sets of one
    design: within a boot (rep to rep, around each arm order's mean: see
    PhaseValue), between boots of a set, between sets (nightlies). Method
    of moments on the nested design, each clipped at 0. Returns SDs, the
    design (boots, reps) and the dfs."""
    within, boot_means_dev, set_means = [], [], []
    df_w = df_b = 0
    reps = []
    for st in sets:
        means = []
        for b in st.boots:
            v = b.phases[phase]
            ss, df = v.resid()
            if df >= 1:
                within.append(ss)
                df_w += df
            reps.append(v.n)
            means.append(v.mean)
        if len(means) >= 2:
            boot_means_dev.append(float(np.var(means, ddof=1))
                                  * (len(means) - 1))
            df_b += len(means) - 1
        set_means.append(float(np.mean(means)))
    r = float(np.mean(reps)) if reps else 1.0
    nb = float(np.mean([len(st.boots) for st in sets])) if sets else 1.0
    s2_w = sum(within) / df_w if df_w else 0.0
    ms_b = sum(boot_means_dev) / df_b if df_b else math.nan
    s2_b = max(0.0, ms_b - s2_w / r) if df_b else math.nan
    ms_s = float(np.var(set_means, ddof=1)) if len(set_means) >= 2 \
        else math.nan
    base = (s2_b if not math.isnan(s2_b) else 0.0) + s2_w / r
    s2_s = max(0.0, ms_s - base / nb) if not math.isnan(ms_s) else math.nan
    return {"within_sd": math.sqrt(s2_w), "df_within": df_w,
            "between_boot_sd": math.sqrt(s2_b) if not math.isnan(s2_b)
            else None, "df_boot": df_b,
            "between_set_sd": math.sqrt(s2_s) if not math.isnan(s2_s)
            else None, "df_set": len(set_means) - 1,
            "set_sd": math.sqrt(ms_s) if not math.isnan(ms_s) else None,
            "boots": nb, "reps": r}


def design_sd(comp, boots, reps):
    """Predicted SD of a nightly's value with BOOTS boots of REPS reps."""
    s_s = comp["between_set_sd"] or 0.0
    s_b = comp["between_boot_sd"] or 0.0
    return math.sqrt(s_s ** 2 + s_b ** 2 / boots
                     + comp["within_sd"] ** 2 / (boots * reps))


# ------------------------------------------------------------- baseline

def threshold_factor(n_sets, phases, fa):
    """k of the alert rule x - mean > k * sd: the one-sided t quantile of
    a prediction interval for one new nightly from N A/A nightlies, at a
    per-phase rate of FA / phases (Bonferroni over the phases: the rate
    per nightly, all phases together, is at most FA)."""
    a = fa / max(1, phases)
    return float(_sps.t.ppf(1 - a, n_sets - 1)) * math.sqrt(1 + 1 / n_sets)


def make_baseline(sets, fa=0.02, floor_pct=0.5):
    if len(sets) < 3:
        raise GateError(f"a baseline needs A/A sets, at least 3 (8 or more "
                        f"for the nightly's): got {len(sets)}")
    for st in sets:
        if st.kind != "nightly":
            raise GateError(f"{st.name} is a {st.kind} set, not a nightly")
        if st.injected_ns():
            raise GateError(f"{st.name} ran with an injected slowdown")
    ident = sets[0].identity()
    for st in sets[1:]:
        diff = [k for k in CHECKED if st.identity().get(k) != ident.get(k)]
        if diff:
            raise GateError(f"{st.name} differs from {sets[0].name} in "
                            + ", ".join(diff))
    phases = sets[0].phases()
    k = threshold_factor(len(sets), len(phases), fa)
    out_phases = {}
    for p in phases:
        r = phase_spread(sets, p)
        out_phases[p] = {"mean_log": r["mean"],
                         "mean_ratio": math.exp(r["mean"]),
                         "sd_log": r["sd_obs"], "sd_pred_log": r["sd_pred"],
                         "sd_used_log": r["sd"], "threshold_log": k * r["sd"],
                         "components": r["components"]}
    base = {"format": BASELINE_FORMAT, "metric": METRIC,
            "phase_order": phases,
            "ratio": sets[0].boots[0].ratio, "workload": sets[0].workload,
            "identity": {k2: ident.get(k2) for k2 in CHECKED + WARNED},
            "boots": len(sets[0].boots), "fa": fa, "floor_pct": floor_pct,
            "k": k, "phases": out_phases,
            "sets": [{"set": st.name, "date": st.boots[0].date,
                      "beside": st.beside(),
                      "series_hash": st.identity().get("series_hash"),
                      "elapsed_s": st.elapsed_s,
                      "values": {p: st.value(p) for p in phases},
                      "boots": [{p: {"mean": b.phases[p].mean,
                                     "sd": b.phases[p].sd,
                                     "n": b.phases[p].n} for p in phases}
                                for b in st.boots]} for st in sets]}
    base["loo"] = leave_one_out(sets, fa, floor_pct)
    base["loo_observed_sd_only"] = leave_one_out(sets, fa, floor_pct,
                                                 observed_only=True)
    return base


def phase_spread(sets, p, observed_only=False):
    """The mean and spread of PHASE's nightly values over A/A SETS: the
    observed SD of the values, the SD the variance components predict
    for one nightly of this design (from every rep of every boot: many
    more degrees of freedom than the values' own), and the SD the alert
    bound uses: the larger of the two. An SD from 8 values is itself
    uncertain (a random-read set of 2026-12-07 came out 2.7% above 7
    others whose SD was 0.7%, where the components predicted 1.1%), so
    the bound does not rest on it alone."""
    vals = [st.value(p) for st in sets]
    sd_obs = float(np.std(vals, ddof=1))
    comp = components(sets, p)
    sd_pred = design_sd(comp, comp["boots"], comp["reps"])
    sd = sd_obs if observed_only else max(sd_obs, sd_pred)
    return {"mean": float(np.mean(vals)), "sd_obs": sd_obs,
            "sd_pred": sd_pred, "sd": sd, "components": comp}


def leave_one_out(sets, fa, floor_pct, observed_only=False):
    """How many of the A/A nightlies SETS would have alerted against a
    baseline of the others (the false alarms one can count)."""
    n = len(sets)
    if n < 4:
        return {"tries": 0, "alerts": 0, "alerted": []}
    alerted = []
    floor = math.log1p(floor_pct / 100)
    for i, st in enumerate(sets):
        others = [x for j, x in enumerate(sets) if j != i]
        k = threshold_factor(n - 1, len(st.phases()), fa)
        for p in st.phases():
            r = phase_spread(others, p, observed_only)
            if st.value(p) - r["mean"] > max(k * r["sd"], floor):
                alerted.append(st.name)
                break
    return {"tries": n, "alerts": len(alerted), "alerted": alerted}


def phase_names(base):
    """The baseline's phases in the run's order."""
    return base.get("phase_order") or list(base["phases"])


def read_baseline(path):
    try:
        with open(path, encoding="utf-8") as f:
            base = json.load(f)
    except (OSError, ValueError) as e:
        raise GateError(f"cannot read the baseline {path}: {e}") from e
    if base.get("format") != BASELINE_FORMAT:
        raise GateError(f"{path} is not a gate baseline (format "
                        f"{base.get('format')!r}, want {BASELINE_FORMAT}); "
                        "make one: reports.lab.gate baseline OUT SET_DIR...")
    return base


def refuse_mismatch(st, base):
    """GateError (exit 2) naming what differs; warnings for the rest."""
    ident = st.identity()
    diff = [f"{k}: set {ident.get(k)!r}, baseline "
            f"{base['identity'].get(k)!r}" for k in CHECKED
            if ident.get(k) != base["identity"].get(k)]
    if len(st.boots) != base["boots"]:
        diff.append(f"boots: set {len(st.boots)}, baseline "
                    f"{base['boots']}")
    if diff:
        raise GateError("the set cannot be compared with the baseline: "
                        + "; ".join(diff))
    return [f"{k} differs: set {ident.get(k)!r}, baseline "
            f"{base['identity'].get(k)!r}" for k in WARNED
            if ident.get(k) != base["identity"].get(k)]


# ---------------------------------------------------------------- check

@dataclasses.dataclass
class PhaseCall:
    """The gate's call on one phase."""
    phase: str
    status: str        # "pass", "regression", "faster"
    change_pct: float
    limit_pct: float
    text: str
    ci: Optional[List[float]] = None


def check(st, base):
    """The gate's calls on nightly set ST against BASE, and warnings."""
    if st.kind != "nightly":
        raise GateError(f"{st.name} is a {st.kind} set; check takes a "
                        "nightly (ab sets: reports.lab.gate ab)")
    warnings = refuse_mismatch(st, base)
    floor = math.log1p(base["floor_pct"] / 100)
    calls = []
    for p in phase_names(base):
        b = base["phases"][p]
        if p not in st.phases():
            raise GateError(f"{st.name} has no phase {p}")
        d = st.value(p) - b["mean_log"]
        limit = max(b["threshold_log"], floor)
        status = ("regression" if d > limit else
                  "faster" if d < -limit else "pass")
        calls.append(PhaseCall(
            p, status, pct(d), pct(limit),
            f"{p}: ratio {math.exp(st.value(p)):.4f} against the "
            f"baseline's {b['mean_ratio']:.4f}: {pct(d):+.2f}% "
            f"(alert above +{pct(limit):.2f}%)"))
    return calls, warnings


def fa_text(base):
    loo = base.get("loo") or {}
    return (f"false-alarm rate per nightly at most {100 * base['fa']:g}% "
            f"by construction (t prediction bound from "
            f"{len(base['sets'])} A/A nightlies, Bonferroni over "
            f"{len(base['phases'])} phases, on the larger of the observed "
            f"and the predicted spread); {loo.get('alerts', 0)} of "
            f"{loo.get('tries', 0)} A/A nightlies would have alerted "
            "against a baseline of the others")


# ------------------------------------------------------------------- ab

def ab(st, base=None, alpha=0.05, floor_pct=None):
    """NEW/OLD change of the per-extent premium per phase of ab set ST,
    with an interval over the boots (pooled SD of the two labels' boot
    values; pooled too with the baseline's spread of one boot's value,
    with its degrees of freedom, when a baseline is given), decided on
    intervals widened for the number of phases (Bonferroni)."""
    if st.kind != "ab":
        raise GateError(f"{st.name} is a {st.kind} set, not an ab set")
    warnings = []
    if base is not None:
        try:
            refuse_mismatch_ab(st, base)
        except GateError as e:
            warnings.append(f"baseline not used: {e}")
            base = None
    if floor_pct is None:
        floor_pct = base["floor_pct"] if base else 0.5
    floor = math.log1p(floor_pct / 100)
    phases = st.phases()
    a_fam = alpha / len(phases)
    calls = []
    for p in phases:
        old = [b.phases[p].mean for b in st.boots_of("old")]
        new = [b.phases[p].mean for b in st.boots_of("new")]
        d = float(np.mean(new) - np.mean(old))
        ss = (float(np.var(old, ddof=1)) * (len(old) - 1) if len(old) > 1
              else 0.0) + (float(np.var(new, ddof=1)) * (len(new) - 1)
                           if len(new) > 1 else 0.0)
        df = len(old) + len(new) - 2
        if base is not None and p in base["phases"]:
            c = base["phases"][p]["components"]
            # the baseline's spread of one boot's value, with its dfs
            v_boot = (c["between_boot_sd"] or 0.0) ** 2 + \
                c["within_sd"] ** 2 / max(1.0, c["reps"])
            ss += v_boot * c["df_boot"]
            df += c["df_boot"]
        if df < 1:
            raise GateError(f"{st.name}: too few boots for an interval")
        s = math.sqrt(ss / df)
        se = s * math.sqrt(1 / len(old) + 1 / len(new))
        t95 = float(_sps.t.ppf(1 - alpha / 2, df))
        tf = float(_sps.t.ppf(1 - a_fam / 2, df))
        lo, hi = d - tf * se, d + tf * se
        status = ("regression" if lo > floor else
                  "faster" if hi < -floor else "pass")
        calls.append(PhaseCall(
            p, status, pct(d), floor_pct,
            f"{p}: premium NEW/OLD {pct(d):+.2f}% (95% CI "
            f"{pct(d - t95 * se):+.2f}% to {pct(d + t95 * se):+.2f}%; "
            f"{100 * (1 - a_fam):.1f}% CI {pct(lo):+.2f}% to "
            f"{pct(hi):+.2f}%, {df} df)",
            ci=[pct(d - t95 * se), pct(d + t95 * se)]))
    return calls, warnings


def refuse_mismatch_ab(st, base):
    ident = st.identity()
    diff = [f"{k}: set {ident.get(k)!r}, baseline "
            f"{base['identity'].get(k)!r}" for k in CHECKED
            if ident.get(k) != base["identity"].get(k)]
    if diff:
        raise GateError("the baseline's spread does not apply to this "
                        "set: " + "; ".join(diff))
    return []


# ---------------------------------------------------------------- power

def power_table(base, designs=((1, 5), (2, 5), (2, 8), (3, 5), (4, 5)),
                minutes=None):
    """Per design (boots, reps): the predicted SD of a nightly's value,
    its alert threshold and the smallest slowdown caught with 95% power,
    per phase (from the baseline's variance components)."""
    z = float(_sps.norm.ppf(0.95))
    k = base["k"]
    floor = math.log1p(base["floor_pct"] / 100)
    out = []
    for boots, reps in designs:
        row = {"boots": boots, "reps": reps, "phases": {}}
        if minutes:
            row["minutes"] = minutes(boots, reps)
        for p in phase_names(base):
            b = base["phases"][p]
            sd = design_sd(b["components"], boots, reps)
            limit = max(k * sd, floor)
            row["phases"][p] = {"sd_pct": 100 * sd,
                                "limit_pct": pct(limit),
                                "mdc95_pct": pct(limit + z * sd)}
        out.append(row)
    return out


def power_of(base, phase, shift_log, boots=None, reps=None):
    """Predicted probability that a nightly alerts on PHASE when its
    premium grows by SHIFT_LOG."""
    b = base["phases"][phase]
    c = b["components"]
    sd = design_sd(c, boots or base["boots"], reps or c["reps"])
    limit = max(base["k"] * sd, math.log1p(base["floor_pct"] / 100))
    return float(1 - _sps.norm.cdf((limit - shift_log) / sd))


# ----------------------------------------------------------- experiment

def experiment(base, sets):
    """The detection experiment: each injected nightly set against the
    baseline (alerted or not), with its measured shift per phase and the
    power the baseline's variance components predict for that shift.
    Returns rows, one per set."""
    rows = []
    for st in sets:
        calls, _ = check(st, base)
        shift = {c.phase: c.change_pct for c in calls}
        rows.append({
            "set": st.name, "date": st.boots[0].date,
            "injected_ns": st.injected_ns(), "beside": st.beside(),
            "load1": float(np.mean([b.load1 for b in st.boots])),
            "elapsed_s": st.elapsed_s,
            "shift_pct": shift,
            "alerted": [c.phase for c in calls if c.status == "regression"],
            "predicted": {p: power_of(base, p, math.log1p(shift[p] / 100))
                          for p in shift}})
    return rows


def pseudo_ab(old_boots, new_boots, name):
    """An ab set made of boots of nightly sets (old, new, old, new, ...):
    bench-ab's decision tried on boots that ran as nightlies."""
    boots = []
    for i, (o, n) in enumerate(zip(old_boots, new_boots)):
        boots.append(dataclasses.replace(o, label="old", index=2 * i + 1))
        boots.append(dataclasses.replace(n, label="new", index=2 * i + 2))
    return Set(name=name, kind="ab", workload=old_boots[0].identity.get(
        "workload", "?"), boots=boots, elapsed_s=0.0)


def ab_calibration(base, aa_sets, injected_sets):
    """bench-ab (BOOTS=4) tried on nightly boots: A/A pairs made of two
    A/A nightlies (their first boots as OLD, their second as NEW): the
    false alarms; and an A/A nightly against an injected one (OLD its
    boots, NEW the injected set's): the catches. Returns (A/A tries,
    A/A flags, [(injected set, injected ns, flagged phases)])."""
    tries = flags = 0
    for i in range(0, len(aa_sets) - 1, 2):
        a, b = aa_sets[i], aa_sets[i + 1]
        st = pseudo_ab([a.boots[0], b.boots[0]], [a.boots[1], b.boots[1]],
                       f"{a.name}+{b.name}")
        calls, _ = ab(st, base)
        tries += 1
        flags += any(c.status == "regression" for c in calls)
    caught = []
    for j, inj in enumerate(injected_sets):
        aa = aa_sets[j % len(aa_sets)]
        st = pseudo_ab(aa.boots[:2], inj.boots[:2], f"{aa.name}/{inj.name}")
        calls, _ = ab(st, base)
        caught.append((inj.name, inj.injected_ns(),
                       [c.phase for c in calls if c.status == "regression"],
                       {c.phase: c.change_pct for c in calls}))
    return tries, flags, caught


def order_md(sets):
    """The premium per arm order over all boots of SETS (reps with the
    ratio's first arm first, "a", against those with its second first,
    "b"), with the difference's 95% interval (Welch, normal quantile):
    the check of the arm order's carry-over, Markdown."""
    out = ["| phase | reps a first | ratio, a first | reps b first | "
           "ratio, b first | difference (95% CI) |",
           "|---|---|---|---|---|---|"]
    for p in sets[0].phases():
        a = [x for st in sets for b in st.boots
             for x, o in zip(b.phases[p].logs, b.phases[p].orders) if o == "a"]
        b_ = [x for st in sets for b in st.boots
              for x, o in zip(b.phases[p].logs, b.phases[p].orders)
              if o == "b"]
        if len(a) < 2 or len(b_) < 2:
            continue
        d = float(np.mean(a) - np.mean(b_))
        se = math.sqrt(float(np.var(a, ddof=1)) / len(a)
                       + float(np.var(b_, ddof=1)) / len(b_))
        out.append(f"| {p} | {len(a)} | {math.exp(np.mean(a)):.4f} | "
                   f"{len(b_)} | {math.exp(np.mean(b_)):.4f} | "
                   f"{pct(d):+.2f}% ({pct(d - 1.96 * se):+.2f}% to "
                   f"{pct(d + 1.96 * se):+.2f}%) |")
    return "\n".join(out)


def experiment_md(base, rows):
    """The experiment's table, Markdown."""
    phases = phase_names(base)
    out = ["| set | date | injected ns | beside (other VMs) | "
           + " | ".join(f"{p} shift" for p in phases)
           + " | predicted power (any phase) | alerted |",
           "|---|---|---|---|" + "---|" * len(phases) + "---|---|"]
    for r in rows:
        miss = 1.0
        for p in phases:
            miss *= 1 - r["predicted"][p]
        out.append(f"| {r['set']} | {r['date'][:16]} | {r['injected_ns']} "
                   f"| {r['beside']:.2f} | "
                   + " | ".join(f"{r['shift_pct'][p]:+.2f}%" for p in phases)
                   + f" | {100 * (1 - miss):.1f}% | "
                   + (", ".join(r["alerted"]) or "no") + " |")
    return "\n".join(out)


def power_md(base, designs, boot_s, prep_s, run_s, arms=2):
    """The power table as Markdown, with each design's minutes from a
    cost model of one boot: boot_s + arms x prep_s + arms x reps x
    run_s seconds."""
    def minutes(b, r):
        return b * (boot_s + arms * prep_s + arms * r * run_s) / 60
    table = power_table(base, designs, minutes)
    phases = phase_names(base)
    out = ["| boots x reps | minutes | "
           + " | ".join(f"{p}: SD / alert above / caught at 95%"
                        for p in phases) + " |",
           "|---|---|" + "---|" * len(phases)]
    for r in table:
        out.append(f"| {r['boots']} x {r['reps']} | {r['minutes']:.1f} | "
                   + " | ".join(
                       f"{r['phases'][p]['sd_pct']:.2f}% / "
                       f"+{r['phases'][p]['limit_pct']:.2f}% / "
                       f"+{r['phases'][p]['mdc95_pct']:.2f}%"
                       for p in phases) + " |")
    return "\n".join(out)


def components_md(base):
    """The variance components per phase, Markdown (SDs of the
    log-ratio, in %)."""
    out = ["| phase | A/A nightlies | ratio | SD rep to rep | SD boot to "
           "boot | SD nightly to nightly | SD of a nightly's value |",
           "|---|---|---|---|---|---|---|"]
    for p in phase_names(base):
        b = base["phases"][p]
        c = b["components"]

        def f(x):
            return "-" if x is None else f"{100 * x:.3f}%"
        out.append(f"| {p} | {len(base['sets'])} | {b['mean_ratio']:.4f} | "
                   f"{f(c['within_sd'])} | {f(c['between_boot_sd'])} | "
                   f"{f(c['between_set_sd'])} | {f(b['sd_log'])} |")
    return "\n".join(out)


# ---------------------------------------------------------------- junit

def junit(path, suite, calls, skipped_reason=None):
    """JUnit XML: a testcase per phase; a regression fails, the rest
    pass (skipped with a reason when nothing was compared)."""
    from xml.sax.saxutils import escape, quoteattr
    fails = sum(c.status == "regression" for c in calls)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f'<testsuite name={quoteattr(suite)} tests="{len(calls)}" '
             f'failures="{fails}" errors="0" skipped="0">']
    for c in calls:
        lines.append(f'  <testcase classname={quoteattr(suite)} '
                     f'name={quoteattr(c.phase)}>')
        if c.status == "regression":
            lines.append(f'    <failure message={quoteattr(c.text)}/>')
        lines.append(f"    <system-out>{escape(c.text)}</system-out>")
        lines.append("  </testcase>")
    lines.append("</testsuite>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


# ----------------------------------------------------------------- main

def _warn(warnings):
    for w in warnings:
        print(f"gate: warning: {w}", file=sys.stderr)


def _conclude(calls, junit_path, suite, bad_text, good_text):
    """JUnit if asked, the last line, and the exit status (1 on a
    regression) of check and ab."""
    if junit_path:
        junit(junit_path, suite, calls)
    bad = [c.phase for c in calls if c.status == "regression"]
    print("gate: " + (f"{bad_text} {', '.join(bad)}" if bad else good_text))
    return 1 if bad else 0


def _print_calls(calls):
    for c in calls:
        mark = {"regression": "REGRESSION", "faster": "faster",
                "pass": "ok"}[c.status]
        print(f"gate: {mark:10s} {c.text}")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="reports.lab.gate")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("summarize")
    p.add_argument("set_dir")
    p = sub.add_parser("baseline")
    p.add_argument("out")
    p.add_argument("sets", nargs="+")
    p.add_argument("--fa", type=float, default=0.02)
    p.add_argument("--floor-pct", type=float, default=0.5)
    p = sub.add_parser("check")
    p.add_argument("set_dir")
    p.add_argument("baseline")
    p.add_argument("--junit")
    p = sub.add_parser("ab")
    p.add_argument("set_dir")
    p.add_argument("--baseline")
    p.add_argument("--floor-pct", type=float)
    p.add_argument("--junit")
    p = sub.add_parser("power")
    p.add_argument("baseline")
    p.add_argument("--md", action="store_true",
                   help="Markdown tables: components, and designs with "
                   "their minutes")
    p.add_argument("--boot-s", type=float, default=36.0)
    p.add_argument("--prep-s", type=float, default=85.0)
    p.add_argument("--run-s", type=float, default=14.5)
    p = sub.add_parser("experiment")
    p.add_argument("baseline")
    p.add_argument("sets", nargs="+")
    p = sub.add_parser("order")
    p.add_argument("sets", nargs="+")
    p = sub.add_parser("ab-calibrate")
    p.add_argument("baseline")
    p.add_argument("--aa", nargs="+", required=True)
    p.add_argument("--injected", nargs="*", default=[])
    args = ap.parse_args(argv)
    try:
        if args.cmd == "summarize":
            summarize(args.set_dir)
            return 0
        if args.cmd == "baseline":
            base = make_baseline([load_set(d) for d in args.sets],
                                 args.fa, args.floor_pct)
            with open(args.out, "w", encoding="utf-8") as f:
                json.dump(base, f, indent=1, sort_keys=True)
            print(f"gate: baseline of {len(base['sets'])} A/A nightlies "
                  f"written to {args.out}; {fa_text(base)}")
            for ph in phase_names(base):
                b = base["phases"][ph]
                print(f"gate:   {ph}: ratio {b['mean_ratio']:.4f}, SD "
                      f"between nightlies {100 * b['sd_log']:.3f}%, alert "
                      f"above +{pct(max(b['threshold_log'], math.log1p(base['floor_pct'] / 100))):.2f}%")
            return 0
        if args.cmd == "check":
            base = read_baseline(args.baseline)
            st = load_set(args.set_dir)
            calls, warnings = check(st, base)
            _warn(warnings)
            print(f"gate: nightly {st.name} against {args.baseline} "
                  f"({base['ratio']}, guest CPU per MiB)")
            _print_calls(calls)
            print(f"gate: {fa_text(base)}")
            return _conclude(calls, args.junit, f"bench-check.{st.workload}",
                             "REGRESSION in", "pass")
        if args.cmd == "ab":
            base = read_baseline(args.baseline) if args.baseline else None
            st = load_set(args.set_dir)
            calls, warnings = ab(st, base, floor_pct=args.floor_pct)
            _warn(warnings)
            if warnings:
                base = None
            print(f"gate: bench-ab {st.name}: {len(st.boots_of('old'))} "
                  f"old and {len(st.boots_of('new'))} new boot(s), "
                  f"premium = {st.boots[0].ratio} of guest CPU per MiB")
            _print_calls(calls)
            fam = 100 * 0.05 / 2
            print(f"gate: a phase is flagged when its "
                  f"{100 * (1 - 0.05 / len(calls)):.1f}% interval lies "
                  f"wholly above +{calls[0].limit_pct:g}%: at most "
                  f"{fam:g}% false alarms per comparison, all phases "
                  "together" + (f"; the nightly's: {fa_text(base)}"
                                if base else ""))
            return _conclude(calls, args.junit, f"bench-ab.{st.workload}",
                             "NEW is slower in",
                             "no slowdown of NEW beyond the floor")
        if args.cmd == "power":
            base = read_baseline(args.baseline)
            if args.md:
                print(components_md(base))
                print()
                print(power_md(base, ((1, 5), (2, 5), (1, 10), (2, 8),
                                      (2, 10), (3, 5), (4, 5)),
                               args.boot_s, args.prep_s, args.run_s))
            else:
                print(json.dumps(power_table(base), indent=1))
            return 0
        if args.cmd == "order":
            print(order_md([load_set(d) for d in args.sets]))
            return 0
        if args.cmd == "ab-calibrate":
            base = read_baseline(args.baseline)
            tries, flags, caught = ab_calibration(
                base, [load_set(d) for d in args.aa],
                [load_set(d) for d in args.injected])
            print(f"bench-ab on pairs of A/A nightlies: {flags} of {tries} "
                  "flagged a slowdown")
            for name, ns, ph, ch in caught:
                print(f"bench-ab, A/A nightly against {name} ({ns} ns): "
                      + ", ".join(f"{p} {v:+.2f}%" for p, v in ch.items())
                      + f": flagged {', '.join(ph) or 'nothing'}")
            return 0
        if args.cmd == "experiment":
            base = read_baseline(args.baseline)
            rows = experiment(base, [load_set(d) for d in args.sets])
            print(experiment_md(base, rows))
            return 0
    except GateError as e:
        print(f"gate: error: {e}", file=sys.stderr)
        return 2
    except M.RunError as e:
        print(f"gate: error: {e}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
