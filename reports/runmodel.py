"""The run model of the benchmark lab: the one owner of what a run is.

A raw run directory (build/bench/<stamp>-<workload>/) is written once by
collect() from what the guest recorded (bench/guest-bench.sh, run format
FORMAT) and read by load_run(); everything else (reports.generate,
reports.check, reports.history) reads runs only through this module:

  - the arms, in display order, with what the guest did for each (mkfs
    command, mount options as /proc/mounts showed them, key mode the
    kernel reported, tuning), or why it was skipped;
  - fio json+ parsing of raw/<arm>/rep<N>/<phase>.json;
  - the comparisons (A / reference B) and per-rep values (throughput,
    latency bins, paired per-rep ratios).

The formats are described in reports/README.md. Host and guest ship
together: a run of another format is refused, not converted.
"""

import json
import os
import re
import shutil

from reports import labstats as L

# The run format this lab writes and reads: the guest's bench/format, and
# meta.json's "format". Bump both sides together when either changes.
FORMAT = 2

# The arms are data: bench/arms/<arm>.conf (KEY=value lines, see
# bench/arms.sh), read here for their order and their comparisons.
ARMS_DIR = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "bench", "arms")


def read_arm_specs(arms_dir=ARMS_DIR):
    """{arm: {KEY: value}} of bench/arms/*.conf, in ORDER."""
    specs = {}
    for name in sorted(os.listdir(arms_dir)):
        if not name.endswith(".conf"):
            continue
        spec = {}
        with open(os.path.join(arms_dir, name), encoding="utf-8") as f:
            for line in f:
                m = re.match(r'([A-Z_]+)=(?:"(.*)"|(.*))$', line.rstrip("\n"))
                if m:
                    spec[m.group(1)] = (m.group(2) if m.group(2) is not None
                                        else m.group(3))
        specs[name[:-5]] = spec
    return dict(sorted(specs.items(),
                       key=lambda kv: (int(kv[1].get("ORDER", 99)), kv[0])))


ARM_SPECS = read_arm_specs()

# Arms in display order; arms with other names are shown after these.
KNOWN_ARMS = list(ARM_SPECS)

# (arm A, reference arm B, what A/B tells), from the arms' REFERENCE and
# COMPARISON, in COMPARISON_ORDER. Each arm is the A side of at most one
# comparison, so that B is "the reference" of A in the tables; the first
# is the main one.
COMPARISONS = [(a, s["REFERENCE"], s.get("COMPARISON", ""))
               for a, s in sorted(ARM_SPECS.items(), key=lambda kv: int(
                   kv[1].get("COMPARISON_ORDER", 99)))
               if s.get("REFERENCE")]
REFERENCE = {a: b for a, b, _ in COMPARISONS}


MAIN_A, MAIN_B = COMPARISONS[0][0], COMPARISONS[0][1]


class RunError(Exception):
    """The run directory cannot be used (message says why)."""


def read_json_file(path):
    """Parse a JSON file, raising RunError with the path on failure."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise RunError(f"cannot read {path}: {e.strerror}") from e
    except ValueError as e:
        raise RunError(f"{path} is not valid JSON: {e}") from e


def read_fio_json(path):
    """fio output, tolerating text before the first '{' and after the end."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        raise RunError(f"cannot read {path}: {e.strerror}") from e
    start = text.find("{")
    if start < 0:
        raise RunError(f"{path}: no JSON object in fio output")
    try:
        obj, _ = json.JSONDecoder().raw_decode(text, start)
    except ValueError as e:
        raise RunError(f"{path}: fio output is not valid JSON: {e}") from e
    return obj


def parse_fio(path, rel):
    """Numbers of one phase of one rep from fio json+ output.

    The direction is the one of jobs[0]["read"] / ["write"] with
    io_bytes > 0 (the larger if both). Returns a dict; raises RunError.
    """
    obj = read_fio_json(path)
    jobs = obj.get("jobs") if isinstance(obj, dict) else None
    if not jobs:
        raise RunError(f"{path}: fio output has no jobs")
    job = jobs[0]
    sides = {d: job.get(d) or {} for d in ("read", "write")}
    moved = {d: s.get("io_bytes", 0) or 0 for d, s in sides.items()}
    if max(moved.values()) <= 0:
        raise RunError(f"{path}: neither read nor write moved any bytes")
    direction = "read" if moved["read"] >= moved["write"] else "write"
    side = sides[direction]
    clat = side.get("clat_ns") or {}
    bins = clat.get("bins")
    return {
        "file": rel,
        "direction": direction,
        "both_directions": min(moved.values()) > 0,
        "jobs": len(jobs),
        "fio_version": obj.get("fio version"),
        "bw_bytes": float(side.get("bw_bytes", 0)),
        "iops": float(side.get("iops", 0)),
        "io_bytes": int(side.get("io_bytes", 0)),
        "runtime_ms": side.get("runtime"),
        "clat_n": clat.get("N"),
        "clat_mean_ns": clat.get("mean"),
        "fio_percentiles_ns": clat.get("percentile") or {},
        "bins": ({int(k): int(v) for k, v in bins.items()}
                 if isinstance(bins, dict) and bins else None),
    }


def arm_order(names):
    """Known arms first, in KNOWN_ARMS order, then the others sorted."""
    names = list(names)
    return ([a for a in KNOWN_ARMS if a in names]
            + sorted(a for a in names if a not in KNOWN_ARMS))


def rep_dirs(arm_dir):
    """{rep number: path} of the rep<N> directories of one arm."""
    out = {}
    if os.path.isdir(arm_dir):
        for name in os.listdir(arm_dir):
            m = re.fullmatch(r"rep(\d+)", name)
            if m and os.path.isdir(os.path.join(arm_dir, name)):
                out[int(m.group(1))] = os.path.join(arm_dir, name)
    return dict(sorted(out.items()))


def load_run(run_dir):
    """Read meta.json and every raw fio file of the measured arms.

    Returns a dict: dir, meta, phases, arms (spec per arm, display order),
    measured (arm list), not_measured ({arm: reason}), data
    ({arm: {phase: {rep: parse_fio()}}}), warnings (list of str).
    Missing or broken raw files are warnings, not errors; a missing or
    broken meta.json is a RunError.
    """
    if not os.path.isdir(run_dir):
        raise RunError(f"run directory {run_dir} does not exist")
    meta = read_json_file(os.path.join(run_dir, "meta.json"))
    if not isinstance(meta, dict):
        raise RunError(f"{run_dir}/meta.json: not a JSON object")
    if meta.get("format") != FORMAT:
        raise RunError(f"{run_dir}/meta.json: run format "
                       f"{meta.get('format')!r}, this lab reads format "
                       f"{FORMAT} (host and guest ship together: run the "
                       "benchmark again)")
    phases = meta.get("phases")
    arms_meta = meta.get("arms")
    if not isinstance(phases, list) or not phases:
        raise RunError(f"{run_dir}/meta.json: 'phases' missing or empty")
    if not isinstance(arms_meta, dict) or not arms_meta:
        raise RunError(f"{run_dir}/meta.json: 'arms' missing or empty")
    warnings = []
    arms = {a: arms_meta[a] if isinstance(arms_meta[a], dict) else {}
            for a in arm_order(arms_meta)}
    measured, not_measured, data = [], {}, {}
    raw = os.path.join(run_dir, "raw")
    for arm, spec in arms.items():
        status = spec.get("status", "?")
        if status != "measured":
            reason = spec.get("reason") or "no reason given"
            not_measured[arm] = (reason if status == "skipped"
                                 else f"status '{status}': {reason}")
            continue
        measured.append(arm)
        data[arm] = {p: {} for p in phases}
        reps = rep_dirs(os.path.join(raw, arm))
        if not reps:
            warnings.append(f"{arm}: measured per meta.json, but "
                            f"raw/{arm}/rep<N>/ has no data")
        for rep, rdir in reps.items():
            for phase in phases:
                rel = f"raw/{arm}/rep{rep}/{phase}.json"
                path = os.path.join(rdir, f"{phase}.json")
                if not os.path.exists(path):
                    warnings.append(f"missing {rel}")
                    continue
                try:
                    d = parse_fio(path, rel)
                except RunError as e:
                    warnings.append(str(e).replace(run_dir.rstrip("/") + "/",
                                                   ""))
                    continue
                if d["jobs"] > 1:
                    warnings.append(f"{rel}: {d['jobs']} jobs, only "
                                    "jobs[0] is used")
                if d["both_directions"]:
                    warnings.append(f"{rel}: both reads and writes; only "
                                    f"{d['direction']}s are used")
                if d["bins"] is None:
                    warnings.append(f"{rel}: no clat_ns bins (not json+?): "
                                    "no latency percentiles")
                data[arm][phase][rep] = d
        want = meta.get("reps")
        if reps and isinstance(want, int) and len(reps) != want:
            warnings.append(f"{arm}: {len(reps)} rep directories, "
                            f"meta.json says reps={want}")
    if os.path.isdir(raw):
        for name in sorted(os.listdir(raw)):
            if name not in arms:
                warnings.append(f"raw/{name}/ is not an arm of meta.json; "
                                "ignored")
    return {"dir": run_dir, "meta": meta, "phases": phases, "arms": arms,
            "measured": measured, "not_measured": not_measured,
            "data": data, "warnings": warnings}


def bw_by_rep(run, arm, phase):
    """{rep: bw_bytes} of one arm and phase (empty if not measured)."""
    reps = run["data"].get(arm, {}).get(phase, {})
    return {r: d["bw_bytes"] for r, d in reps.items()}


def bins_of(run, arm, phase):
    """Per-rep latency histograms of one arm and phase (reps with bins)."""
    reps = run["data"].get(arm, {}).get(phase, {})
    return [d["bins"] for _, d in sorted(reps.items()) if d["bins"]]


def phase_direction(run, phase):
    """'read' or 'write' from the data; from the phase name if no data."""
    seen = [d["direction"] for arm in run["measured"]
            for d in run["data"][arm][phase].values()]
    if seen:
        return max(set(seen), key=seen.count)
    return "write" if "write" in phase else "read"


def arm_absent_reason(run, arm):
    """Why arm has no numbers in this run, or None if it has some."""
    if arm not in run["arms"]:
        return f"{arm} is not an arm of this run"
    if arm in run["not_measured"]:
        return f"{arm} skipped: {run['not_measured'][arm]}"
    return None


def tracked_ratios(run):
    """{ "A/B": {phase: (reps, ratios) or reason-str} } for every comparison.

    The per-rep throughput ratios A.bw_bytes[repN] / B.bw_bytes[repN] that
    the regression check and the history track. A str value means the ratio
    cannot be computed from this run: an arm is skipped or absent, or no
    rep has both arms.
    """
    out = {}
    for a, b, _ in COMPARISONS:
        name = f"{a}/{b}"
        out[name] = {}
        reason = arm_absent_reason(run, a) or arm_absent_reason(run, b)
        for phase in run["phases"]:
            if reason:
                out[name][phase] = reason
                continue
            reps, ratios = L.paired_ratios(bw_by_rep(run, a, phase),
                                           bw_by_rep(run, b, phase))
            out[name][phase] = ((reps, ratios) if ratios else
                                f"no rep has data for both {a} and {b}")
    return out


# ------------------------------------------------ collecting a guest run

def _read_tsv(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def _read_kv(path, strip_quotes=False):
    out = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.rstrip("\n").partition("=")
                if sep:
                    out[key] = value.strip('"') if strip_quotes else value
    return out


def _guest_text(bench, name):
    path = os.path.join(bench, name)
    if not os.path.exists(path):
        raise RunError(f"the guest did not write {name} ({path})")
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().strip()


# What the guest records per arm in facts.tsv (arm, rep, key, value).
FACT_KEYS = ("fs", "mkfs", "mount_cmd", "mount_options", "tuning", "policy",
             "key_mode", "key_mode_source")


def arm_facts(rows):
    """{arm: {key: value}} from facts.tsv rows, the first rep's facts of
    each arm, and a list of disagreements between that arm's reps (an arm
    must be set up the same way every time)."""
    by_arm, problems = {}, []
    for row in rows:
        if len(row) != 4 or row[2] not in FACT_KEYS:
            raise RunError(f"facts.tsv: bad line {row!r}")
        arm, rep, key, value = row
        reps = by_arm.setdefault(arm, {})
        reps.setdefault(rep, {})[key] = value
    facts = {}
    for arm, reps in by_arm.items():
        first_rep, first = next(iter(reps.items()))
        for rep, f in reps.items():
            for key in ("mount_options", "key_mode", "policy", "tuning"):
                a, b = first.get(key, ""), f.get(key, "")
                if a != b:
                    problems.append(f"{arm}: {key} of rep {rep} ({b!r}) "
                                    f"differs from rep {first_rep} ({a!r})")
        facts[arm] = first
    return facts, problems


def collect(vm, job, run):
    """Turn a benchmark VM's output into a raw run directory (format 2).

    vm: the runner's output (results/bench/ from the guest, run.info,
    console.log); job: the job that ran (bench.env, the workload's files);
    run: the run directory to write (meta.json, raw/, profiles/,
    console.log). Only reads what the guest recorded: nothing about an arm
    is computed on the host. Returns meta.
    """
    bench = os.path.join(vm, "results", "bench")
    fmt = _guest_text(bench, "format")
    if fmt != str(FORMAT):
        raise RunError(f"the guest wrote run format {fmt!r}, this host "
                       f"reads {FORMAT}: bench/ and reports/ disagree")
    env = _read_kv(os.path.join(job, "bench.env"), strip_quotes=True)
    workload = env["WORKLOAD"]
    wl_dir = os.path.join(job, "bench", "workloads", workload)
    conf = _read_kv(os.path.join(wl_dir, "workload.conf"), strip_quotes=True)
    facts, problems = arm_facts(_read_tsv(os.path.join(bench, "facts.tsv")))

    arms = {}
    for row in _read_tsv(os.path.join(bench, "arms.tsv")):
        if len(row) != 3 or row[1] not in ("measured", "skipped"):
            raise RunError(f"arms.tsv: bad line {row!r}")
        arm, status, reason = row
        if status == "skipped":
            arms[arm] = {"status": "skipped", "reason": reason}
            continue
        if arm not in facts:
            raise RunError(f"{arm} was measured, but the guest recorded "
                           "no facts for it (facts.tsv)")
        f = facts[arm]
        arms[arm] = {"status": "measured",
                     **{k: f.get(k, "") for k in FACT_KEYS},
                     "encrypted": bool(f.get("policy"))}

    # extents.tsv: arm, rep, label, extents, shared, min, max, min_shared,
    # path: one line per file the workload promised something about.
    # extent_counts keeps, per arm, the first file's count of each timed
    # rep; extent_checks has every line.
    extents, checks, profiled = {}, [], {}
    for row in _read_tsv(os.path.join(bench, "extents.tsv")):
        if len(row) != 9:
            raise RunError(f"extents.tsv: bad line {row!r}")
        arm, rep, label, count, shared, lo, hi, slo, path = row
        check = {"arm": arm,
                 "rep": rep if rep in ("profiled", "prepare") else int(rep),
                 "label": label, "extents": int(count),
                 "shared": int(shared or 0),
                 "min": int(lo) if lo.isdigit() else None,
                 "max": int(hi) if hi.isdigit() else None,
                 "min_shared": int(slo) if slo.isdigit() else 0,
                 "path": path}
        checks.append(check)
        if rep == "profiled":
            profiled.setdefault(arm, {})[label] = int(count)
        elif rep == "prepare":
            pass  # the preparation's own check; the reps check again
        elif not any(c["arm"] == arm and c["rep"] == check["rep"]
                     for c in checks[:-1]):
            extents.setdefault(arm, []).append(int(count))

    run_info = _read_kv(os.path.join(vm, "run.info"))
    jobfiles = {}
    for name in sorted(os.listdir(wl_dir)):
        with open(os.path.join(wl_dir, name), encoding="utf-8") as f:
            jobfiles[name] = f.read()
    saves = [{"arm": a, "what": w, "kib": int(k), "seconds": int(t)}
             for a, w, k, t in _read_tsv(os.path.join(bench, "saves.tsv"))]
    meta = {
        "format": FORMAT,
        # how reps were made: "once" (each arm prepared once, its
        # filesystem restored before every rep) or "each" (fresh mkfs and
        # preparation per rep); saves: what was saved and restored
        "prep": _guest_text(bench, "prep-mode"),
        "saves": saves,
        "workload": workload,
        "date": run_info.get("date", ""),
        "reps": int(env["REPS"]),
        "description": conf.get("description", ""),
        # the guest writes the phases it ran (a workload may compute them)
        "phases": _guest_text(bench, "phases").split(),
        "profile_phase": _guest_text(bench, "profile-phase"),
        "arms": arms,
        "arm_fact_problems": problems,
        "order": [[arm, int(rep)] for arm, rep in
                  _read_tsv(os.path.join(bench, "order.tsv"))],
        "run_info": run_info,
        "fio_version": _guest_text(bench, "fio-version"),
        "jobfiles": jobfiles,
        "extent_counts": extents,
        "extent_checks": checks,
        "profiled_extent_counts": profiled,
        "overrides": {k: env[k] for k in ("MIN_EXTENTS", "MAX_EXTENTS",
                                          "SCALE_MIN", "SCALE_BUDGET",
                                          "GROUP_SIZES")
                      if k in env},
        "min_extents": int(_guest_text(bench, "min-extents")),
        # A deliberate slowdown (fscrypto.extent_lookup_delay_us), used to
        # show that bench-check catches regressions; 0 in real runs.
        "injected_lookup_delay_us": int(env.get("INJECT_LOOKUP_DELAY_US",
                                                "0") or 0),
    }
    os.makedirs(run, exist_ok=True)
    for sub in ("raw", "profiles"):
        src = os.path.join(bench, sub)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(run, sub), dirs_exist_ok=True)
    shutil.copy(os.path.join(vm, "console.log"),
                os.path.join(run, "console.log"))
    with open(os.path.join(run, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    return meta
