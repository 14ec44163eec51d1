"""Statistics of the benchmark lab: small, pure, deterministic functions.

No plotting and no I/O here: generate.py and gate.py feed numbers in and
format what comes out. Every random draw goes through
numpy.random.default_rng(seed) with a fixed default seed, so two calls with
the same arguments give the same answer.

Conventions:
  - "samples" are per-rep values of one arm and phase (e.g. bw_bytes of
    rep1..rep5), in any order.
  - latency histograms ("bins") are fio json+ clat_ns["bins"] dicts:
    latency in ns (str or int key) -> number of I/Os in that bin.
  - percentiles q are in percent (50, 99, 99.9).
"""

import math
from fractions import Fraction

import numpy as np
from scipy import stats as _sps

# Fixed seed of every bootstrap, so reports are reproducible bit for bit.
SEED = 20261203

# Significance level of every test in the lab.
ALPHA = 0.05


def summary(samples):
    """Describe a sample: n, median, mean, stddev, cov, min, max.

    stddev is the sample standard deviation (ddof=1), 0.0 when n < 2.
    cov is the coefficient of variation stddev/mean (nan when mean is 0).
    With n == 0 every statistic but n is nan.
    """
    x = np.asarray(list(samples), dtype=float)
    n = int(x.size)
    if n == 0:
        nan = float("nan")
        return {"n": 0, "median": nan, "mean": nan, "stddev": nan,
                "cov": nan, "min": nan, "max": nan}
    mean = float(np.mean(x))
    sd = float(np.std(x, ddof=1)) if n >= 2 else 0.0
    return {
        "n": n,
        "median": float(np.median(x)),
        "mean": mean,
        "stddev": sd,
        "cov": sd / mean if mean != 0 else float("nan"),
        "min": float(np.min(x)),
        "max": float(np.max(x)),
    }


def ratio(a_by_rep, b_by_rep, n_boot=10000, alpha=ALPHA, seed=SEED):
    """THE ratio of arm A over arm B in one run, with its CI: the one
    definition used by the report, the baseline, the check and the history
    (for every per-rep metric: throughput, CPU cost per MiB, ...).

    a_by_rep, b_by_rep: {rep number: value} of one metric and phase.

    Definition (per-rep pairing): rep N of A is paired with rep N of B,
    and r_N = A[N] / B[N] is the rep's ratio (reps present in both, with
    B != 0). The ratio is the geometric mean of the r_N, exp(mean(log r)),
    and its (1 - alpha) CI is Student's t-interval of the mean log-ratio,
    exp(mean +- t(1 - alpha/2, n - 1) * s / sqrt(n)) (t_interval). Returns
    ratio_of_samples() of the r_N plus "reps" (the paired rep numbers,
    sorted) and "samples" (their r_N).

    Why a t-interval and not the percentile bootstrap the lab used until
    2026-12-07: with 5 pairs a percentile bootstrap of the mean covers the
    true ratio about 84% of the time, not 95% (80% with 4), because it
    uses the plug-in spread and normal-like quantiles where t(0.975, 4) =
    2.776 belongs; the t-interval covers 95% on log-normal per-rep ratios
    (reports/lab/test_labstats.py Coverage simulates both). The interval is
    conditional on the run: one boot and, with PREP=once, one prepared
    layout. What varies between boots and runs is not in it; the
    regression checks (reports/lab/gate.py) take it from sets of boots.

    Why pairing and not the ratio of medians with a bootstrap that
    resamples each arm on its own (what the report used until run format
    3): the runner interleaves the arms (A B C A B C ...), so rep N of A
    and rep N of B run back to back on the same boot, the same host load
    and the same state of the host's caches. What drifts during a run (other
    VMs on the 2 cores, a host under a kernel build) moves both values of a
    pair together and cancels in A[N] / B[N]; a ratio of medians drops that
    pairing, and its independent bootstrap counts the drift as noise of
    each arm, twice. Per-rep ratios are also what the regression check
    tests (Mann-Whitney between a baseline's per-rep ratios and a run's)
    and what a baseline stores, so one definition on the same samples
    serves the report, the baseline, the check and the history, and their
    numbers agree (before, the report's ratio of medians and the check's
    median of per-rep ratios were two numbers for one comparison).

    Why the geometric mean and not the median of the r_N: with the lab's
    5 reps, a bootstrap resample's median is the smallest r_N with
    probability median_at_extreme(5) = 0.058, above alpha / 2 = 0.025, so
    the CI's lower bound would just be the worst rep (the median of pairs
    needs 6 reps for a 95% CI; an exact sign-test interval too, 2 / 2^5 =
    0.0625). A resample's mean is the smallest r_N only when every draw
    picks it, n^-n: 0.037 for 3, 0.0039 for 4, so the same 4 reps as
    before carry a CI (paired_ci_supported). The geometric mean is the
    mean of log-ratios, so A/B and B/A are exact reciprocals and a rep
    twice as fast weighs as much as one half as fast. It gives a single
    outlying rep its weight instead of ignoring it, which widens the CI
    rather than hiding the rep.

    Not covered here: latency percentiles are pooled over the reps' bins
    (bootstrap_percentile_ratio_ci), a statistic of all I/Os, not of reps.
    """
    reps, samples = paired_ratios(a_by_rep, b_by_rep)
    out = ratio_of_samples(samples, n_boot=n_boot, alpha=alpha, seed=seed)
    out["reps"] = [r for r, x in zip(reps, samples)
                   if math.isfinite(x) and x > 0]
    return out


def ratio_of_samples(samples, n_boot=10000, alpha=ALPHA, seed=SEED):
    """The ratio (see ratio()) of given per-rep ratios, e.g. a baseline's.

    Returns {"value", "ci_lo", "ci_hi", "n", "samples", "dropped",
    "ci_supported", "not_conclusive", "log_mean", "log_sd"}: value =
    geometric mean of the samples; the CI as in ratio(), nan when
    paired_ci_supported(n) is false (too few reps: not_conclusive then
    says "not conclusive (n = N)"); log_mean and log_sd: the mean and SD
    (ddof 1) of the log-ratios. n_boot and seed are unused (the interval
    was a bootstrap before 2026-12-07) and kept for the callers.
    Samples that are not finite and positive (a rep that counted 0 CPU
    ticks) have no logarithm: they are left out and listed in "dropped".
    All nan with no usable sample.
    """
    samples = [float(x) for x in samples]
    good = [x for x in samples if math.isfinite(x) and x > 0]
    dropped = [x for x in samples if not (math.isfinite(x) and x > 0)]
    n = len(good)
    nan = float("nan")
    out = {"value": nan, "ci_lo": nan, "ci_hi": nan, "n": n,
           "samples": good, "dropped": dropped,
           "ci_supported": paired_ci_supported(n, alpha),
           "not_conclusive": paired_conclusive_n(n, alpha)}
    if n == 0:
        return out
    logs = np.log(np.asarray(good))
    out["value"] = float(np.exp(np.mean(logs)))
    out["log_mean"] = float(np.mean(logs))
    out["log_sd"] = float(np.std(logs, ddof=1)) if n >= 2 else nan
    if out["ci_supported"]:
        lo, hi = t_interval(logs, alpha)
        out["ci_lo"], out["ci_hi"] = float(np.exp(lo)), float(np.exp(hi))
    return out


def t_interval(x, alpha=ALPHA):
    """Student's (1 - alpha) interval of the mean of x (n >= 2):
    mean +- t(1 - alpha/2, n - 1) * sd / sqrt(n)."""
    x = np.asarray(x, dtype=float)
    n = x.size
    m = float(np.mean(x))
    half = float(_sps.t.ppf(1 - alpha / 2, n - 1)) * \
        float(np.std(x, ddof=1)) / math.sqrt(n)
    return m - half, m + half


# The fewest paired reps whose ratio the lab calls conclusive. A
# t-interval exists from 2 pairs, but with 1 or 2 degrees of freedom it
# leans wholly on the log-ratios being normal (t(0.975, 2) = 4.3); from 4
# pairs on (3 degrees of freedom) it is robust enough to decide on.
MIN_PAIRED_REPS = 4


def paired_ci_supported(n, alpha=ALPHA):
    """True when n paired reps carry the ratio's t-interval: n >= 2."""
    return n >= 2


def paired_conclusive_n(n, alpha=ALPHA):
    """None when n paired reps are enough to decide on the ratio's
    interval (MIN_PAIRED_REPS); else "not conclusive (n = N)"."""
    if n >= MIN_PAIRED_REPS:
        return None
    return f"not conclusive (n = {n})"


def mann_whitney(a, b):
    """Two-sided Mann-Whitney U p-value of a vs b (scipy, method 'auto').

    scipy computes the exact distribution for small samples without ties.
    Returns 1.0 when either sample has fewer than 2 values, or when scipy
    cannot give a p (all values tied).
    """
    a = list(a)
    b = list(b)
    if len(a) < 2 or len(b) < 2:
        return 1.0
    p = float(_sps.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    return 1.0 if math.isnan(p) else p


def min_mw_p(n_a, n_b):
    """Smallest two-sided exact Mann-Whitney p attainable with n_a vs n_b.

    It is 2 / C(n_a + n_b, n_a) (complete separation): 0.1 for 3 vs 3,
    0.029 for 4 vs 4, 0.0079 for 5 vs 5. If it is not below ALPHA, no
    difference can be significant whatever the data.
    """
    if n_a < 1 or n_b < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a))


def can_reach_significance(n_a, n_b, alpha=ALPHA):
    """True when n_a vs n_b samples can give a Mann-Whitney p < alpha."""
    return n_a >= 2 and n_b >= 2 and min_mw_p(n_a, n_b) < alpha


def median_at_extreme(n):
    """Probability that the median of a bootstrap resample of n distinct
    values is the sample's smallest value (by symmetry, also its largest).

    np.median of n draws equals the minimum when at least n // 2 + 1 draws
    are the minimum, each draw picking it with probability 1/n:
    1 for n = 1, 0.25 for 2, 0.259 for 3, 0.051 for 4, 0.058 for 5,
    0.0087 for 6.
    """
    if n < 1:
        return 1.0
    need = n // 2 + 1
    return float(sum(math.comb(n, k) * (1 / n) ** k * (1 - 1 / n) ** (n - k)
                     for k in range(need, n + 1)))


def ci_supported(n_a, n_b, alpha=ALPHA):
    """True when n_a vs n_b reps can carry a (1 - alpha) bootstrap CI of a
    statistic that resamples each arm's whole reps on its own (the ratio of
    latency percentiles of bins merged over reps; a ratio of medians). The
    ratio of per-rep metrics pairs reps instead: paired_ci_supported().

    The lower bound of a percentile bootstrap is only an estimate when the
    resampling distribution puts less than alpha/2 on its extreme point;
    otherwise the bound is pinned to the most extreme combination of the
    data (a single rep gives a "CI" of zero width). The extreme ratio is
    smallest-median(a) / largest-median(b); judged by the smaller arm, it
    needs median_at_extreme(n)^2 < alpha / 2, i.e. at least 4 reps per arm
    (3 vs 3: 0.067; 4 vs 4: 0.0026).
    """
    n = min(n_a, n_b)
    return n >= 2 and median_at_extreme(n) ** 2 < alpha / 2


def reps_for_ci(alpha=ALPHA):
    """Fewest reps per arm for which ci_supported() holds (4)."""
    n = 1
    while not ci_supported(n, n, alpha):
        n += 1
    return n


def reps_for_test(alpha=ALPHA):
    """Fewest reps per arm for which a Mann-Whitney p < alpha is
    attainable at all (4: 4 vs 4 reaches 0.029)."""
    n = 1
    while not can_reach_significance(n, n, alpha):
        n += 1
    return n


def conclusive_n(n_a, n_b, alpha=ALPHA):
    """None when n_a vs n_b reps support both a CI and a significance test;
    else the text "not conclusive (n = N)" (N the smaller count, or
    "N vs M" when they differ)."""
    if ci_supported(n_a, n_b, alpha) and \
            can_reach_significance(n_a, n_b, alpha):
        return None
    n = f"{n_a}" if n_a == n_b else f"{n_a} vs {n_b}"
    return f"not conclusive (n = {n})"


def reps_needed_text(alpha=ALPHA):
    """What a conclusive verdict needs, for the reports."""
    return (f"a verdict needs at least {MIN_PAIRED_REPS} paired reps (its "
            f"{100 * (1 - alpha):g}% t-interval exists from 2; the latency "
            f"percentiles' bootstrap interval needs {reps_for_ci(alpha)} "
            "reps per arm)")


def ranges_separate(a, b):
    """True when the ranges of a and b do not overlap (touching overlaps).

    max(a) < min(b) or max(b) < min(a); False if either is empty.
    """
    a = list(a)
    b = list(b)
    if not a or not b:
        return False
    return max(a) < min(b) or max(b) < min(a)


def change_pct(a, b):
    """Median-based change of a relative to b, in percent.

    (median(a) - median(b)) / median(b) * 100; nan if b is empty, a is
    empty or median(b) is 0.
    """
    a = list(a)
    b = list(b)
    if not a or not b:
        return float("nan")
    mb = float(np.median(b))
    if mb == 0:
        return float("nan")
    return (float(np.median(a)) - mb) / mb * 100.0


def significant_change(a, b, threshold_pct, alpha=ALPHA, change=None):
    """Decide whether a differs from b (the reference), LKP style.

    significant = MW p < alpha AND ranges separate AND
                  |change_pct| >= threshold_pct.
    change: the change in percent when the caller has it from ratio()
    (100 x (ratio - 1)); else the median-based change_pct(a, b).
    Returns dict(change_pct, p, separated, significant, can_reach) where
    can_reach is False when the sample sizes cannot give p < alpha at all.
    """
    a = list(a)
    b = list(b)
    ch = change_pct(a, b) if change is None else float(change)
    p = mann_whitney(a, b)
    sep = ranges_separate(a, b)
    sig = (p < alpha and sep and not math.isnan(ch)
           and abs(ch) >= threshold_pct)
    return {"change_pct": ch, "p": p, "separated": sep,
            "significant": bool(sig),
            "can_reach": can_reach_significance(len(a), len(b), alpha)}


def paired_ratios(a_by_rep, b_by_rep):
    """Per-rep ratios a[rep] / b[rep] for the reps present in both dicts.

    Returns (reps, ratios), reps sorted; reps with b == 0 are left out.
    """
    reps = sorted(set(a_by_rep) & set(b_by_rep))
    reps = [r for r in reps if b_by_rep[r] != 0]
    return reps, [a_by_rep[r] / b_by_rep[r] for r in reps]


def merge_bins(bins_list):
    """Add up latency histograms: {latency_ns: count}, keys made int.

    Keys may be str (as in fio JSON) or int. The result is sorted by key.
    """
    out = {}
    for bins in bins_list:
        for k, c in bins.items():
            k = int(k)
            out[k] = out.get(k, 0) + int(c)
    return dict(sorted(out.items()))


def _rank(total, q):
    """Nearest rank (1-based) of percentile q among total values.

    ceil(q/100 * total), at least 1, computed exactly (no float rounding:
    99.9% of 1000 is rank 999, not 1000).
    """
    f = Fraction(str(q)) / 100
    return max(1, math.ceil(f * total))


def percentile_from_bins(bins, q):
    """Latency (ns) at percentile q of a histogram, nearest rank.

    The smallest bin value whose cumulative count reaches ceil(q/100 * N),
    where N is the total count (this is also how fio derives its own
    percentiles from the same bins). nan for an empty histogram.
    """
    items = sorted((int(k), int(c)) for k, c in bins.items() if int(c) > 0)
    total = sum(c for _, c in items)
    if total == 0:
        return float("nan")
    rank = _rank(total, q)
    cum = 0
    for value, count in items:
        cum += count
        if cum >= rank:
            return float(value)
    return float(items[-1][0])


def _bins_matrix(reps, keys):
    """Counts of each rep's histogram over the common sorted keys."""
    index = {k: i for i, k in enumerate(keys)}
    m = np.zeros((len(reps), len(keys)), dtype=np.int64)
    for r, bins in enumerate(reps):
        for k, c in bins.items():
            m[r, index[int(k)]] += int(c)
    return m


def _boot_percentiles(reps, q, n_boot, rng, chunk=500):
    """Percentile q of the merged histogram of n_boot resamples of reps."""
    keys = np.array(sorted({int(k) for b in reps for k in b}), dtype=float)
    m = _bins_matrix(reps, [int(k) for k in keys])
    n = len(reps)
    f = Fraction(str(q)) / 100
    idx = rng.integers(0, n, size=(n_boot, n))
    out = np.empty(n_boot)
    for start in range(0, n_boot, chunk):
        sel = idx[start:start + chunk]
        w = np.zeros((sel.shape[0], n), dtype=np.int64)
        np.add.at(w, (np.arange(sel.shape[0])[:, None], sel), 1)
        cum = np.cumsum(w @ m, axis=1)
        total = cum[:, -1]
        # exact integer ceil(f * total), at least 1
        rank = np.maximum(1, -((-f.numerator * total) // f.denominator))
        pos = np.argmax(cum >= rank[:, None], axis=1)
        vals = keys[pos]
        vals[total == 0] = np.nan
        out[start:start + chunk] = vals
    return out


def bootstrap_percentile_ratio_ci(reps_a, reps_b, q, n_boot=10000,
                                  alpha=ALPHA, seed=SEED):
    """Ratio of latency percentile q, merged bins of a over merged bins of b.

    reps_a / reps_b are lists of per-rep histograms. The point estimate is
    percentile_from_bins(merge_bins(reps_a), q) / same for b. The CI
    resamples whole reps with replacement (reps are the independent units,
    not single I/Os), merges the drawn reps and takes the percentile;
    percentile-bootstrap (1-alpha) interval of the ratio. Returns
    (ratio, lo, hi); nan when a side has no data.
    """
    nan = float("nan")
    if not reps_a or not reps_b:
        return nan, nan, nan
    pa = percentile_from_bins(merge_bins(reps_a), q)
    pb = percentile_from_bins(merge_bins(reps_b), q)
    if math.isnan(pa) or math.isnan(pb) or pb == 0:
        return nan, nan, nan
    rng = np.random.default_rng(seed)
    ba = _boot_percentiles(reps_a, q, n_boot, rng)
    bb = _boot_percentiles(reps_b, q, n_boot, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = ba / bb
    boot = boot[np.isfinite(boot)]
    if boot.size == 0:
        return pa / pb, nan, nan
    lo, hi = np.percentile(boot, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return pa / pb, float(lo), float(hi)
