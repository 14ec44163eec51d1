"""Number formatting shared by the report's tables, plots and texts.

Pure functions: a number in, a short string out ("n/a" for a missing
value or NaN).
"""

import math


def isnum(x):
    return isinstance(x, (int, float)) and not (isinstance(x, float)
                                                and math.isnan(x))


MIB = 1024.0 * 1024.0


def _g3(v):
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def _sig3(v):
    """About 3 significant digits, small values too: 0.0123, 1.23, 123."""
    return _g3(v) if v >= 1 else f"{v:.3g}"


def fmt_ns(ns):
    """Latency with a unit: 850 ns, 85.5 µs, 2.18 ms, 1.20 s."""
    if not isnum(ns):
        return "n/a"
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if ns >= scale:
            return f"{_g3(ns / scale)} {unit}"
    return f"{ns:.0f} ns"


def fmt_count(x):
    """1500 -> 1.5K, 2097152 -> 2.0M (bpftrace bucket labels)."""
    if not isnum(x):
        return "?"
    for scale, unit in ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if abs(x) >= scale:
            return f"{x / scale:.4g}{unit}"
    return f"{x:g}"


def fmt_mib(b):
    return "n/a" if not isnum(b) else f"{b / MIB:.2f}"


def fmt_cpu_ms_per_mib(x):
    """CPU seconds per MiB as CPU milliseconds per MiB."""
    return "n/a" if not isnum(x) else _sig3(x * 1e3)


def fmt_cpu_us_per_op(x):
    """CPU seconds per I/O as CPU microseconds per I/O."""
    return "n/a" if not isnum(x) else _sig3(x * 1e6)


def fmt_pct(x, sign=True):
    return "n/a" if not isnum(x) else (f"{x:+.2f}%" if sign else f"{x:.2f}%")


def fmt_p(p):
    return "n/a" if not isnum(p) else f"{p:.4f}"


def fmt_ratio(r):
    return "n/a" if not isnum(r) else f"{r:.3f}"


def fmt_ci(lo, hi):
    return "n/a" if not (isnum(lo) and isnum(hi)) else f"{lo:.3f}-{hi:.3f}"


def fmt_ci_of(r):
    """The CI of a ratio dict, or why there is none (one rep); with too
    few reps to decide on, the interval says so."""
    if r.get("ci_supported") is False:
        return f"none: {r['not_conclusive']}"
    if r.get("not_conclusive"):
        return f"{fmt_ci(r['ci_lo'], r['ci_hi'])} ({r['not_conclusive']})"
    return fmt_ci(r["ci_lo"], r["ci_hi"])


def rep_span(reps):
    """[1,2,3,5] -> '1..3,5'."""
    reps = sorted(reps)
    out, i = [], 0
    while i < len(reps):
        j = i
        while j + 1 < len(reps) and reps[j + 1] == reps[j] + 1:
            j += 1
        out.append(str(reps[i]) if i == j else f"{reps[i]}..{reps[j]}")
        i = j + 1
    return ",".join(out)
