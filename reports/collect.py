"""Turn a benchmark VM's output into a raw run directory.

    /usr/bin/python3 -m reports.collect VM_DIR JOB_DIR RUN_DIR

VM_DIR is the runner's output (results/bench/... from the guest, run.info),
JOB_DIR the job that was run (bench.env, the arm files and the workload's
files it shipped). RUN_DIR gets meta.json (with the run's own spec: arms,
comparisons, goals, metrics, kernel), raw/, profiles/ and cpu.tsv
(reports.runmodel.collect; the format is described in reports/README.md).
"""
import sys

from reports import runmodel as M


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    vm, job, run = argv
    try:
        meta = M.collect(vm, job, run)
    except (M.RunError, OSError, KeyError, ValueError) as e:
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
