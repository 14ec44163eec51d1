"""Turn a benchmark VM's output into a raw run directory: the writer of
runs, as reports.lab.runmodel is their reader.

    /usr/bin/python3 -m reports.lab.collect VM_DIR JOB_DIR RUN_DIR

VM_DIR is the runner's output (results/bench/... from the guest, run.info),
JOB_DIR the job that was run (bench.env, the arm files and the workload's
files it shipped). RUN_DIR gets meta.json (with the run's own spec: arms,
comparisons, goals, metrics, kernel), raw/, profiles/ and cpu.tsv
(collect(); the format is described in reports/README.md).
"""
import base64
import json
import os
import re
import shutil
import subprocess
import sys

from reports.lab.runmodel import (FORMAT, RunError, build_spec, kernel_of,
                              read_arm_specs, read_tsv)


def shell_vars(path, before=None):
    """{name: value} of the variables the shell file PATH sets, resolved
    by bash the way the guest reads it (quotes, ${X:-default}, $((...)),
    comments), after sourcing BEFORE when given (bench.env before a
    workload.conf: the run's overrides). The variables of BEFORE are left
    out unless PATH sets them again."""
    script = ('set -a; [ -z "$2" ] || . "$2" >/dev/null 2>&1; '
              'before=$(env -0 | base64 -w0); . "$1" >/dev/null || exit 3; '
              'printf "%s\\0" "$before"; env -0')
    if not os.path.exists(path):
        return {}
    out = subprocess.run(
        ["env", "-i", "PATH=/usr/bin:/bin", "bash", "-c", script, "vars",
         path, before or ""], capture_output=True, check=False)
    if out.returncode != 0:
        raise RunError(f"bash could not source {path}: "
                       f"{out.stderr.decode(errors='replace').strip()}")
    first, _, rest = out.stdout.partition(b"\0")
    old = _env_pairs(base64.b64decode(first))
    new = _env_pairs(rest)
    skip = {"PATH", "PWD", "SHLVL", "_", "OLDPWD", "before"}
    with open(path, encoding="utf-8", errors="replace") as f:
        assigned = set(re.findall(
            r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=", f.read(), re.M))
    return {k: v for k, v in new.items()
            if k not in skip and (k in assigned or k not in old)}


def _env_pairs(raw):
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.decode(errors="replace").partition("=")
        if sep and key:
            out[key] = value
    return out


def read_kv(path, strip_quotes=False):
    out = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.rstrip("\n").partition("=")
                if sep:
                    out[key] = value.strip('"') if strip_quotes else value
    return out


def _read_text(path):
    """A small file's text, stripped; "" if it is not there."""
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().strip()


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


# The guest's record of the window each timed phase's CPU time covers:
# arm, rep, phase, io|process, CPU time around the whole fio process.
CPU_WINDOWS = "cpu-windows.tsv"


def _guest_lines(bench, name):
    path = os.path.join(bench, name)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def _order_rule(bench):
    """{"rule": rotate|random|fixed, "seed": N}; runs before the guest
    recorded it ran every rep in the fixed order."""
    words = " ".join(_guest_lines(bench, "order-rule")).split()
    if not words:
        return {"rule": "fixed", "seed": 0,
                "source": "not recorded: the guest ran A B C in every rep"}
    return {"rule": words[0], "seed": int(words[1]) if len(words) > 1
            and words[1].isdigit() else 0}


def cpu_window(bench):
    """{"window": io|process|mixed, "window_counts": {kind: phases}} from
    the guest's cpu-windows.tsv. io: fio's exec_prerun to exec_postrun
    (its I/O only); process: around the whole fio run (start and exit
    included). A guest without the file measured around the process."""
    path = os.path.join(bench, CPU_WINDOWS)
    if not os.path.exists(path):
        return {"window": "process", "window_counts": {},
                "window_source": "no cpu-windows.tsv: the guest measured "
                                 "around the whole fio process"}
    counts = {}
    for row in read_tsv(path):
        if len(row) >= 4 and row[3] in ("io", "process"):
            counts[row[3]] = counts.get(row[3], 0) + 1
    kinds = sorted(counts)
    window = kinds[0] if len(kinds) == 1 else ("mixed" if kinds
                                               else "process")
    return {"window": window, "window_counts": counts,
            "window_source": CPU_WINDOWS}


def collect(vm, job, run):
    """Turn a benchmark VM's output into a raw run directory (format 3).

    vm: the runner's output (results/bench/ from the guest, run.info,
    console.log); job: the job that ran (bench.env, the arm files and the
    workload's files it shipped); run: the run directory to write
    (meta.json, raw/, profiles/, cpu.tsv, console.log). Only reads what the
    guest recorded and what the job shipped: nothing about an arm is
    computed on the host, and the run's spec (arms, comparisons, goals,
    metrics: build_spec) comes from the job's copy of bench/arms and of
    the workload, not from the working tree. Returns meta.
    """
    bench = os.path.join(vm, "results", "bench")
    fmt = _guest_text(bench, "format")
    if fmt != str(FORMAT):
        raise RunError(f"the guest wrote run format {fmt!r}, this host "
                       f"reads {FORMAT}: bench/ and reports/ disagree")
    env = shell_vars(os.path.join(job, "bench.env"))
    workload = env["WORKLOAD"]
    wl_dir = os.path.join(job, "bench", "workloads", workload)
    # as the guest reads it: sourced by bash after bench.env
    conf = shell_vars(os.path.join(wl_dir, "workload.conf"),
                      os.path.join(job, "bench.env"))
    job_arms = os.path.join(job, "bench", "arms")
    if not os.path.isdir(job_arms):
        raise RunError(f"the job has no arm files ({job_arms})")
    arm_specs = read_arm_specs(job_arms)
    facts, problems = arm_facts(read_tsv(os.path.join(bench, "facts.tsv")))

    arms = {}
    for row in read_tsv(os.path.join(bench, "arms.tsv")):
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
    for row in read_tsv(os.path.join(bench, "extents.tsv")):
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

    run_info = read_kv(os.path.join(vm, "run.info"))
    jobfiles = {}
    for name in sorted(os.listdir(wl_dir)):
        with open(os.path.join(wl_dir, name), encoding="utf-8") as f:
            jobfiles[name] = f.read()
    saves = [{"arm": a, "what": w, "kib": int(k), "seconds": int(t)}
             for a, w, k, t in read_tsv(os.path.join(bench, "saves.tsv"))]
    phases = _guest_text(bench, "phases").split()
    # the phases that ran a command of the workload, not fio (a guest
    # before command phases wrote no such file)
    command_phases = _read_text(os.path.join(bench,
                                             "command-phases")).split()
    # CPU time per timed phase (cpu.tsv: arm, rep, phase, ns or ticks);
    # a guest that could not read /proc/stat wrote none
    cpu_tsv = os.path.join(bench, "cpu.tsv")
    cpu = None
    if os.path.exists(cpu_tsv) and os.path.getsize(cpu_tsv) > 0:
        hz = _read_text(os.path.join(bench, "user-hz"))
        source = _read_text(os.path.join(bench, "cpu-source")) or "stat"
        # USER_HZ, the unit of /proc/stat, is 100 on x86 whatever HZ is
        cpu = {"file": "cpu.tsv",
               "source": source,
               "units_per_s": (10 ** 9 if source == "schedstat" else
                               int(hz) if hz.isdigit() and int(hz) > 0
                               else 100),
               "user_hz": int(hz) if hz.isdigit() and int(hz) > 0 else 100,
               "user_hz_source": ("getconf CLK_TCK in the guest"
                                  if hz.isdigit() and int(hz) > 0 else
                                  "not recorded: 100, USER_HZ of x86"),
               "lines": len(read_tsv(cpu_tsv)),
               **cpu_window(bench)}
    meta = {
        "format": FORMAT,
        # what the run needs to be read later, from the job that ran
        "spec": build_spec(arm_specs, workload, conf,
                           [p for p in phases if p not in command_phases],
                           "job/bench/arms (the arm files the guest ran)"),
        "kernel": kernel_of(run_info, env),
        "cpu": cpu,
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
        "phases": phases,
        # those of them that ran the workload's command, not fio: their
        # results are raw/<arm>/rep<N>/<phase>.tsv (read_command_result)
        "command_phases": command_phases,
        "profile_phase": _guest_text(bench, "profile-phase"),
        # the passes of the profiled rep's phase under perf record
        # (PROFILE_PASSES; 1 before they could be set)
        "profile_passes": int(env.get("PROFILE_PASSES", "1") or 1),
        "arms": arms,
        "arm_fact_problems": problems,
        "order": [[arm, int(rep)] for arm, rep in
                  read_tsv(os.path.join(bench, "order.tsv"))],
        "run_info": run_info,
        "fio_version": _guest_text(bench, "fio-version"),
        "jobfiles": jobfiles,
        "extent_counts": extents,
        "extent_checks": checks,
        "profiled_extent_counts": profiled,
        # what the run set of the generic extent bounds and of the
        # workload's own variables (PARAMS), as bench/run-bench.sh
        # forwarded them
        "overrides": {k: env[k] for k in ["MIN_EXTENTS", "MAX_EXTENTS"]
                      + conf.get("PARAMS", "").split() if k in env},
        "min_extents": int(_guest_text(bench, "min-extents")),
        # The workload's own parameters as the guest resolved them (PARAMS
        # in its workload.conf); {} for runs from before they were kept.
        "workload_params": read_kv(os.path.join(bench, "params")),
        # A deliberate slowdown (fscrypto.extent_lookup_delay_ns), used to
        # show that the regression checks catch regressions and to measure
        # the smallest one they catch; 0 in real runs. Runs before
        # 2026-12-07 10:00 UTC recorded injected_lookup_delay_us instead
        # (injected_delay_ns reads both).
        "injected_lookup_delay_ns": int(env.get("INJECT_LOOKUP_DELAY_NS",
                                                "0") or 0),
        # The order of the arms in each rep: "rotate", "random" (with its
        # seed) or "fixed" (every run before 2026-12-07); the order that
        # ran is "order".
        "order_rule": _order_rule(bench),
        # The phases whose CPU window ends after a sync of the filesystem
        # (those that write: the transaction commit is in their window).
        "window_sync_phases": _guest_lines(bench, "window-sync-phases"),
        # A run that is one boot of a set (bench/run-boots.sh: a nightly of
        # several boots, or make bench-ab): the set, its label (the kernel's
        # role: old, new, or the nightly's one label) and the boot's number.
        "boot": {k.lower(): env[k] for k in ("SET_ID", "BOOT_LABEL",
                                             "BOOT_INDEX") if k in env},
    }
    os.makedirs(run, exist_ok=True)
    for sub in ("raw", "profiles"):
        src = os.path.join(bench, sub)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(run, sub), dirs_exist_ok=True)
    shutil.copy(os.path.join(vm, "console.log"),
                os.path.join(run, "console.log"))
    if cpu:
        shutil.copy(cpu_tsv, os.path.join(run, "cpu.tsv"))
        if os.path.exists(os.path.join(bench, CPU_WINDOWS)):
            shutil.copy(os.path.join(bench, CPU_WINDOWS),
                        os.path.join(run, CPU_WINDOWS))
    with open(os.path.join(run, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    return meta


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    vm, job, run = argv
    try:
        meta = collect(vm, job, run)
    except (RunError, OSError, KeyError, ValueError) as e:
        print(f"collect: error: {e}", file=sys.stderr)
        return 2
    for p in meta["arm_fact_problems"]:
        print(f"collect: warning: {p}", file=sys.stderr)
    arms = meta["arms"].values()
    print("bench: collected %d measured and %d skipped arm(s) into %s" % (
        sum(a["status"] == "measured" for a in arms),
        sum(a["status"] == "skipped" for a in arms), run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
