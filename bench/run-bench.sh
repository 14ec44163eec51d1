#!/bin/bash
# Entry point of `make bench WORKLOAD=NAME [REPS=5] [ARMS="a b" or a,b] [PROFILE=1]`.
#
# Boots the perf kernel once and runs the workload's arms interleaved
# (A B C A B C ...), REPS timed repetitions each, plus one profiled
# repetition per arm; then turns the guest's output into a raw run
# directory (build/bench/<stamp>-<workload>/) and writes the report
# (reports/<date>-<workload>/). Arms the kernel cannot run are listed as
# skipped, with the reason the guest found.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/arms.sh"
workload=${1:-}
REPS=${REPS:-5}
ARMS=${ARMS:-$ALL_ARMS}
ARMS=${ARMS//,/ }	# "a,b" and "a b" both work
PROFILE=${PROFILE:-1}
# once: prepare each arm's files once and restore the prepared filesystem
# before every rep; each: a fresh mkfs and preparation for every rep.
PREP=${PREP:-once}
KERNEL=${KERNEL:-$top/build/bzImage-perf}
# Test of the regression check only: slow every per-extent lookup down by
# this many microseconds (fscrypto.extent_lookup_delay_us, patch 0020).
INJECT_LOOKUP_DELAY_US=${INJECT_LOOKUP_DELAY_US:-0}
die() { echo "bench: error: $*" >&2; exit 2; }

available() {
	local d
	for d in "$top"/bench/workloads/*/; do
		[ -f "$d/workload.conf" ] && basename "$d"
	done
	return 0
}

if [ -z "$workload" ] || [ ! -f "$top/bench/workloads/$workload/workload.conf" ]; then
	[ -n "$workload" ] && [ "$workload" != list ] &&
		echo "bench: error: unknown workload '$workload'" >&2
	echo "bench: available workloads: $(available | paste -sd' ' -)" >&2
	echo "usage: make bench WORKLOAD=<name> [REPS=$REPS] [ARMS=\"$ALL_ARMS\"] [PROFILE=0|1] [PREP=once|each] [ACCEL=auto|kvm|tcg|icount] [MIN_EXTENTS=N] [SCALE_BUDGET=extents (scaling)] [GROUP_SIZES=\"1 4 ... 0\" (groupsweep)] [INJECT_LOOKUP_DELAY_US=N (tests bench-check only)]" >&2
	[ "$workload" = list ] && exit 0
	exit 2
fi
for a in $ARMS; do
	valid_arm "$a" || die "unknown arm '$a' in ARMS (arms: $ALL_ARMS)"
done
case $REPS in '' | *[!0-9]* | 0) die "REPS must be a positive number, not '$REPS'" ;; esac
case $PREP in once | each) ;; *) die "PREP must be once or each, not '$PREP'" ;; esac
case ${GROUP_SIZES:-1} in *[!0-9\ ]*) die "GROUP_SIZES must be numbers of extents per key (0: no bound), not '$GROUP_SIZES'" ;; esac
case $INJECT_LOOKUP_DELAY_US in '' | *[!0-9]*) die "INJECT_LOOKUP_DELAY_US must be a number of microseconds, not '$INJECT_LOOKUP_DELAY_US'" ;; esac
[ -f "$KERNEL" ] || die "no perf kernel at $KERNEL (make kernel FLAVOR=perf)"

t0=$(date +%s)
stamp=$(date -u +%Y%m%d-%H%M%S)
run=$top/build/bench/$stamp-$workload
vm=$run/vm
# The job lives with its run, so that runs can overlap (ACCEL=icount runs
# barely disturb each other) and reports.collect reads this run's bench.env.
job=$run/job
mkdir -p "$job/bench" "$run"
cp -r "$top/bench/workloads" "$top/bench/arms.sh" "$top/bench/arms" "$job/bench/"
cp -r "$top/profiles" "$job/profiles"
cp -r "$top/build/bench/tools" "$job/tools"
install -m 0755 "$top/bench/guest-bench.sh" "$job/run"
{
	echo "WORKLOAD=$workload"
	echo "REPS=$REPS"
	echo "ARMS=\"$ARMS\""
	echo "PROFILE=$PROFILE"
	echo "PREP=$PREP"
	echo "INJECT_LOOKUP_DELAY_US=$INJECT_LOOKUP_DELAY_US"
	# The lab's commit and whether tracked files differ from it (the run
	# records them: reports/runmodel.py kernel_of); nothing outside git.
	if lab_commit=$(git -C "$top" rev-parse HEAD 2>/dev/null); then
		echo "LAB_COMMIT=$lab_commit"
		if git -C "$top" diff --quiet HEAD -- 2>/dev/null; then echo "LAB_DIRTY=0"; else echo "LAB_DIRTY=1"; fi
	fi
	for v in MIN_EXTENTS MAX_EXTENTS SCALE_MIN SCALE_BUDGET GROUP_SIZES; do
		[ -n "${!v:-}" ] && echo "$v=\"${!v}\""
	done
} >"$job/bench.env"

nr_arms=$(echo $ARMS | wc -w)
scratch=()
for _ in $ARMS; do scratch+=(--scratch 2G); done
# PREP=once: the save disk, after the arms' disks (sparse images of the
# prepared filesystems: only their non-zero blocks use space)
[ "$PREP" = once ] && scratch+=(--scratch 12G)
# Generous: a timed run of one arm takes a few minutes under TCG.
timeout=${TIMEOUT:-$(( (REPS + 1) * nr_arms * 900 + 600 ))}
# shellcheck source=/dev/null # the workload is picked at run time; tests/host/bench-workloads.sh loads each one
read -r est est_prep < <(. "$top/bench/workloads/$workload/workload.conf" 2>/dev/null
	echo "${EST_ARM_RUN_S:-60} ${EST_PREP_S:-60}")
runs=$(( (REPS + (PROFILE == 1 ? 1 : 0)) * nr_arms ))
# PREP=once prepares each arm once; PREP=each before every arm run
preps=$nr_arms
[ "$PREP" = once ] || preps=$runs
echo "bench: workload=$workload arms=($ARMS) reps=$REPS profile=$PROFILE prep=$PREP kernel=$(basename "$KERNEL")"
echo "bench: $runs arm runs and $preps preparations, expected about $(( (runs * est + preps * est_prep + 30) / 60 )) min under TCG ($est s per arm run, $est_prep s per preparation; less for arms found unsupported)"
echo "bench: progress lines: [elapsed of expected total] arm, rep, phase (the expected total follows the arm runs done so far)"
append="slab_nomerge"
if [ "$INJECT_LOOKUP_DELAY_US" != 0 ]; then
	append+=" fscrypto.extent_lookup_delay_us=$INJECT_LOOKUP_DELAY_US"
	echo "bench: WARNING: injected slowdown: every per-extent lookup waits $INJECT_LOOKUP_DELAY_US us (a test of bench-check, not a measurement)"
fi
"$top/vm-images/run-vm.sh" --kernel "$KERNEL" --job "$job" --out "$vm" \
	--timeout "$timeout" --mem 4096 "${scratch[@]}" --append "$append"
rc=$?
if [ $rc != 0 ]; then
	echo "bench: the benchmark VM failed ($(cat "$vm/verdict" 2>/dev/null)); job output: $vm/results/job.log" >&2
	tail -n 20 "$vm/results/job.log" 2>/dev/null >&2
	exit 1
fi

echo "bench: [$(( $(date +%s) - t0 ))s] VM done; collecting the results and writing the report"
# The run model (reports/runmodel.py) reads what the guest recorded; the
# reports package is imported from the top of the clone.
cd "$top" || die "cannot cd to $top"
/usr/bin/python3 -m reports.collect "$vm" "$job" "$run" || die "could not collect the results of $vm"
# reports/<date>-<workload>; a second run of the day gets its time too, and
# a run with an injected slowdown says so in its name.
out=$top/reports/$(date -u +%Y-%m-%d)-$workload
[ "$INJECT_LOOKUP_DELAY_US" = 0 ] || out+=-injected-${INJECT_LOOKUP_DELAY_US}us
[ -e "$out" ] && out+=-${stamp#*-}
/usr/bin/python3 -m reports.generate "$run" "$out" || die "report generation failed for $run"
ln -sfn "$run" "$top/build/bench/latest-$workload"
echo "bench: raw run: $run"
echo "bench: report:  $out/index.html and $out/summary.md"
# Every run goes into the history store (reports/history.py; the store is
# $LAB_HISTORY_DIR, outside build/), and the reports/ index lists it.
/usr/bin/python3 -m reports.history append "$run" "$out" ||
	die "could not record $run in the history store (LAB_HISTORY_DIR=${LAB_HISTORY_DIR:-default})"
/usr/bin/python3 -m reports.index || die "could not write reports/index.html"
echo "bench: done in $(( $(date +%s) - t0 ))s"
