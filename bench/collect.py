#!/usr/bin/python3
"""Turn a benchmark VM run into a raw run directory for reports/generate.py.

    collect.py VM_DIR JOB_DIR RUN_DIR

VM_DIR is the runner's output (results/bench/... from the guest, run.info),
JOB_DIR the job that was run (workload files, bench.env). RUN_DIR gets
meta.json, raw/ and profiles/ (the format is described in reports/README.md).
"""
import json
import os
import shutil
import sys


def read_tsv(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def read_kv(path):
    out = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                key, sep, value = line.rstrip("\n").partition("=")
                if sep:
                    out[key] = value
    return out


def read_env(path):
    env = read_kv(path)
    return {k: v.strip('"') for k, v in env.items()}


def arm_config(arms_sh, arm):
    """mkfs and mount options of an arm, as bench/arms.sh defines them."""
    import subprocess

    def ask(fn):
        cmd = ". %s; %s %s" % (arms_sh, fn, arm)
        return subprocess.run(["bash", "-c", cmd], capture_output=True,
                              text=True).stdout.strip()
    return {
        "fs": ask("arm_fs"),
        "mkfs": ask("arm_mkfs"),
        "mount": ask("arm_mount_opts"),
        "tuning": ask("arm_tuning"),
        "encrypted": not arm.endswith("-plain"),
    }


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    vm, job, run = sys.argv[1:]
    bench = os.path.join(vm, "results", "bench")
    env = read_env(os.path.join(job, "bench.env"))
    workload = env["WORKLOAD"]
    wl_dir = os.path.join(job, "bench", "workloads", workload)
    conf = read_env(os.path.join(wl_dir, "workload.conf"))

    arms = {}
    last = None
    for row in read_tsv(os.path.join(bench, "arms.tsv")):
        if len(row) < 2 or row[1] not in ("measured", "skipped"):
            # a reason that spanned lines (older guests did not join them)
            if last is not None and arms[last].get("status") == "skipped":
                arms[last]["reason"] += " " + " ".join(row).strip()
            continue
        arm, status = row[0], row[1]
        last = arm
        reason = row[2] if len(row) > 2 else ""
        entry = {"status": status}
        if status == "skipped":
            entry["reason"] = reason
        else:
            entry.update(arm_config(os.path.join(job, "bench", "arms.sh"), arm))
        arms[arm] = entry

    # extents.tsv: arm, rep, label, extents, shared, min, max, min_shared,
    # path (one line per file the workload promised something about; older
    # runs had only arm, rep, extents). extent_counts keeps, per arm, the
    # first file's count of each timed rep; extent_checks has every line.
    extents, checks, profiled = {}, [], {}
    for row in read_tsv(os.path.join(bench, "extents.tsv")):
        if len(row) == 3:
            row = [row[0], row[1], "file", row[2], "0", "", "-", "0", ""]
        arm, rep, label, count, shared, lo, hi, slo, path = \
            (row + [""] * 9)[:9]
        check = {"arm": arm, "rep": rep if rep == "profiled" else int(rep),
                 "label": label, "extents": int(count),
                 "shared": int(shared or 0),
                 "min": int(lo) if lo.isdigit() else None,
                 "max": int(hi) if hi.isdigit() else None,
                 "min_shared": int(slo) if slo.isdigit() else 0,
                 "path": path}
        checks.append(check)
        if rep == "profiled":
            profiled.setdefault(arm, {})[label] = int(count)
        elif not any(c["arm"] == arm and c["rep"] == check["rep"]
                     for c in checks[:-1]):
            extents.setdefault(arm, []).append(int(count))

    run_info = read_kv(os.path.join(vm, "run.info"))
    jobfiles = {}
    for name in sorted(os.listdir(wl_dir)):
        with open(os.path.join(wl_dir, name)) as f:
            jobfiles[name] = f.read()
    with open(os.path.join(bench, "fio-version")) as f:
        fio_version = f.read().strip()

    def guest_file(name, default):
        path = os.path.join(bench, name)
        if not os.path.exists(path):
            return default
        with open(path) as f:
            return f.read().strip()

    # The guest writes the phases it ran (a workload may compute them).
    phases = guest_file("phases", conf.get("PHASES", "")).split()

    meta = {
        "workload": workload,
        "date": run_info.get("date", ""),
        "reps": int(env["REPS"]),
        "description": conf.get("description", ""),
        "phases": phases,
        "profile_phase": guest_file("profile-phase", ""),
        "arms": arms,
        "order": [[arm, int(rep)] for arm, rep in
                  read_tsv(os.path.join(bench, "order.tsv"))],
        "run_info": run_info,
        "fio_version": fio_version,
        "jobfiles": jobfiles,
        "extent_counts": extents,
        "extent_checks": checks,
        "profiled_extent_counts": profiled,
        "overrides": {k: env[k] for k in ("MIN_EXTENTS", "MAX_EXTENTS",
                                          "SCALE_MIN", "SCALE_BUDGET")
                      if k in env},
        "min_extents": int(open(os.path.join(bench, "min-extents")).read()),
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
    shutil.copy(os.path.join(vm, "console.log"), os.path.join(run, "console.log"))
    with open(os.path.join(run, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    print("bench: collected %d measured and %d skipped arm(s) into %s" % (
        sum(a["status"] == "measured" for a in arms.values()),
        sum(a["status"] == "skipped" for a in arms.values()), run))


if __name__ == "__main__":
    main()
