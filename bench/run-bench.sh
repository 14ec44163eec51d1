#!/bin/bash
# Entry point of `make bench WORKLOAD=NAME [REPS=5] [ARMS="a b" or a,b] [PROFILE=1] [SCRATCH_IN_RAM=1]`.
#
# SCRATCH_IN_RAM=1 (the default): the guest's scratch disk images (one per
# arm, and the save disk of PREP=once) are files in host memory, a
# directory under SCRATCH_DIR (default /dev/shm, a tmpfs), so the guest's
# I/O latency does not depend on the host's disk and on what else uses it
# (the other VM of `make test`, a kernel build): p99 latency ratios can then
# be decided. They are removed when the run ends. Room: every arm's disk
# ends up fully allocated (2 GiB each: restoring a prepared device zeroes
# it with BLKZEROOUT, which QEMU does on a tmpfs file by allocating the
# range), the save disk holds about SCRATCH_SAVE_MIB (512) per arm; that,
# plus the guest's memory and 2 GiB to spare, must fit in MemAvailable and
# in the free space of SCRATCH_DIR, or the disks go to build/ as before,
# with a note (the run records where its disks were: run.info scratch=).
# SCRATCH_IN_RAM=0: always in build/ (run-vm.sh's default, $run/vm/disks).
# KEEP_DISKS=1 (keep the disks for a look afterwards) implies
# SCRATCH_IN_RAM=0.
#
# The host's load average is sampled every 30 s during the VM's run
# (run.info: host_load1_start, host_load1_mean, host_load1_max,
# host_load_samples; $run/vm/host-load.tsv), so a run says what else ran.
#
# Boots the perf kernel once and runs the workload's arms interleaved
# (A B C A B C ...), REPS timed repetitions each, plus one profiled
# repetition per arm; then turns the guest's output into a raw run
# directory (build/bench/<stamp>-<workload>/) and writes the report
# (reports/generated/<date>-<workload>/). Arms the kernel cannot run are listed as
# skipped, with the reason the guest found.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/arms.sh"
workload=${1:-}
REPS=${REPS:-5}
# Without ARMS: the workload's own arms (WORKLOAD_ARMS in its
# workload.conf, e.g. compressible's compressed arms), else DEFAULT_ARMS.
workload_arms() { # workload
	# shellcheck source=/dev/null # tests/host/bench-workloads.sh loads each one
	(. "$top/bench/workloads/$1/workload.conf" 2>/dev/null && echo "${WORKLOAD_ARMS:-}")
}
# workload_var WORKLOAD VAR: VAR as the workload's workload.conf sets it
workload_var() {
	# shellcheck source=/dev/null
	(. "$top/bench/workloads/$1/workload.conf" 2>/dev/null && echo "${!2:-}")
}
wl_arms=""
[ -f "$top/bench/workloads/$workload/workload.conf" ] && wl_arms=$(workload_arms "$workload")
ARMS=${ARMS:-${wl_arms:-$DEFAULT_ARMS}}
ARMS=${ARMS//,/ }	# "a,b" and "a b" both work
PROFILE=${PROFILE:-1}
# once: prepare each arm's files once and restore the prepared filesystem
# before every rep; each: a fresh mkfs and preparation for every rep.
PREP=${PREP:-once}
SCRATCH_IN_RAM=${SCRATCH_IN_RAM:-1}
SCRATCH_DIR=${SCRATCH_DIR:-/dev/shm}
SCRATCH_SAVE_MIB=${SCRATCH_SAVE_MIB:-512}
KERNEL=${KERNEL:-$top/build/bzImage-6.12-perf}
# ACCEL=auto (the default) is KVM where it works, else icount: under
# plain TCG the guest's clock is the host's, so a guest task's CPU time
# grows when the host deschedules the vCPU thread, and host load enters
# the cost metric; under icount the guest clock counts instructions while
# the vCPU runs (vm-images/run-vm.sh), so the CPU time of a phase repeats
# on a busy machine. ACCEL=tcg still runs plain TCG (2 vCPUs).
export ACCEL_NO_KVM=${ACCEL_NO_KVM:-icount}
# Tests of the regression checks only: slow every per-extent lookup down
# by this many nanoseconds (fscrypto.extent_lookup_delay_ns, the lab
# series' test-only lookup delay knob).
INJECT_LOOKUP_DELAY_NS=${INJECT_LOOKUP_DELAY_NS:-0}
# The arms' order in each rep (bench/guest/lib.sh bench_arm_order):
# rotate (A B, B A, ...: the default), random (ORDER_SEED, recorded; a
# seed from the clock without it) or fixed (A B in every rep).
ORDER=${ORDER:-rotate}
# How many times the profiled rep runs its phase under perf record (their
# samples put together): one profiled seqread of the fragmented workload
# gives about 900 busy samples (the perf kernel has no high-resolution
# timers, so sampling stops at its 250 Hz tick), too few to attribute a
# premium of a few percent; each pass adds as many.
PROFILE_PASSES=${PROFILE_PASSES:-1}
ORDER_SEED=${ORDER_SEED:-}
# REPORT=0: only the raw run (for bench/run-boots.sh, which reports on
# its set of boots); RUN_DIR: where the raw run goes (default
# build/bench/<stamp>-<workload>).
REPORT=${REPORT:-1}
die() { echo "bench: error: $*" >&2; exit 2; }
[ -z "${INJECT_LOOKUP_DELAY_US:-}" ] ||
	die "INJECT_LOOKUP_DELAY_US is gone: the knob is in nanoseconds now (INJECT_LOOKUP_DELAY_NS=$(( ${INJECT_LOOKUP_DELAY_US//[!0-9]/} * 1000 )))"

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
	echo "usage: make bench WORKLOAD=<name> [REPS=$REPS] [ARMS=\"$DEFAULT_ARMS\"] [PROFILE=0|1] [PROFILE_PASSES=1] [PREP=once|each] [SCRATCH_IN_RAM=1|0] [ACCEL=auto|kvm|tcg|icount] [MIN_EXTENTS=N] [ORDER=rotate|random|fixed] [ORDER_SEED=N] [INJECT_LOOKUP_DELAY_NS=N (tests of the regression checks only)] [workload variables: its PARAMS]" >&2
	if [ "$workload" = list ]; then
		echo "bench: arms: $ALL_ARMS" >&2
		echo "bench: without ARMS: $DEFAULT_ARMS, except in the workloads that name their own:" >&2
		for w in $(available); do
			a=$(workload_arms "$w")
			[ -z "$a" ] || echo "bench:   $w: $a" >&2
		done
		echo "bench: the workloads' own variables (their PARAMS):" >&2
		for w in $(available); do
			a=$(workload_var "$w" PARAMS)
			[ -z "$a" ] || echo "bench:   $w: $a" >&2
		done
		exit 0
	fi
	exit 2
fi
for a in $ARMS; do
	valid_arm "$a" || die "unknown arm '$a' in ARMS (arms: $ALL_ARMS; without ARMS: ${wl_arms:-$DEFAULT_ARMS})"
done
case $REPS in '' | *[!0-9]* | 0) die "REPS must be a positive number, not '$REPS'" ;; esac
case $PREP in once | each) ;; *) die "PREP must be once or each, not '$PREP'" ;; esac
case $SCRATCH_IN_RAM in 0 | 1) ;; *) die "SCRATCH_IN_RAM must be 0 or 1, not '$SCRATCH_IN_RAM'" ;; esac
case $SCRATCH_SAVE_MIB in '' | *[!0-9]*) die "SCRATCH_SAVE_MIB must be a number of MiB, not '$SCRATCH_SAVE_MIB'" ;; esac
case ${GROUP_SIZES:-1} in *[!0-9\ ]*) die "GROUP_SIZES must be numbers of extents per key (0: no bound), not '$GROUP_SIZES'" ;; esac
case ${REKEY_NAMES:-1} in *[!0-9\ ]*) die "REKEY_NAMES must be numbers of names, not '$REKEY_NAMES'" ;; esac
case $INJECT_LOOKUP_DELAY_NS in '' | *[!0-9]*) die "INJECT_LOOKUP_DELAY_NS must be a number of nanoseconds, not '$INJECT_LOOKUP_DELAY_NS'" ;; esac
case $ORDER in rotate | fixed) ;; random) ORDER_SEED=${ORDER_SEED:-$(( $(date +%s) % 1000000 ))} ;;
*) die "ORDER must be rotate, random or fixed, not '$ORDER'" ;; esac
case $PROFILE_PASSES in '' | *[!0-9]* | 0) die "PROFILE_PASSES must be a whole number of passes above 0, not '$PROFILE_PASSES'" ;; esac
case ${ORDER_SEED:-0} in *[!0-9]*) die "ORDER_SEED must be a number, not '$ORDER_SEED'" ;; esac
case $REPORT in 0 | 1) ;; *) die "REPORT must be 0 or 1, not '$REPORT'" ;; esac
# Variables given to make on its command line (make puts them in
# MAKEFLAGS after " -- "): each must be the lab's or one the workload
# declares in PARAMS, so that a mistyped or undeclared one
# (make bench WORKLOAD=fragmented CT_GENS=8) is an error, not silently
# ignored.
LAB_VARS="WORKLOAD REPS ARMS PROFILE PREP SCRATCH_IN_RAM SCRATCH_DIR SCRATCH_SAVE_MIB
	KEEP_DISKS ACCEL ACCEL_NO_KVM KERNEL TIMEOUT ORDER ORDER_SEED INJECT_LOOKUP_DELAY_NS PROFILE_PASSES
	MIN_EXTENTS MAX_EXTENTS FLAVOR BASE BUILD JOBS OLD NEW BOOTS SET_DIR RESOLVE_ONLY
	REPORT RUN_DIR HISTORY_DIR LAB_HISTORY_DIR BENCH_DRY_RUN ONLY HOST_TESTS GUEST_TESTS V"
wl_params=$(workload_var "$workload" PARAMS)
case " ${MAKEFLAGS:-} " in
*" -- "*)
	for w in ${MAKEFLAGS#* -- }; do
		v=${w%%=*}
		[ "$v" != "$w" ] || continue
		case " $(echo $LAB_VARS) $wl_params " in *" $v "*) ;; *)
			die "make bench: '$v' is neither a lab variable nor one workload $workload declares (its PARAMS: ${wl_params:-none}; bench/README.md lists the lab's)" ;;
		esac
	done ;;
esac
[ -f "$KERNEL" ] || die "no perf kernel at $KERNEL (make kernel FLAVOR=perf)"

t0=$(date +%s)
stamp=$(date -u +%Y%m%d-%H%M%S)
run=${RUN_DIR:-$top/build/bench/$stamp-$workload}
[ -e "$run/meta.json" ] && die "$run already holds a run"
vm=$run/vm
# The job lives with its run, so that runs can overlap (ACCEL=icount runs
# barely disturb each other) and reports.lab.collect reads this run's bench.env.
job=$run/job
mkdir -p "$job/bench" "$run"
cp -r "$top/bench/workloads" "$top/bench/arms.sh" "$top/bench/arms" "$job/bench/"
cp -r "$top/profiles" "$job/profiles"
cp -r "$top/build/bench/tools" "$job/tools"
# the guest driver: its library (bench/guest/lib.sh) and /job/run
mkdir -p "$job/guest"
install -m 0644 "$top/bench/guest/lib.sh" "$job/guest/lib.sh"
install -m 0755 "$top/bench/guest/run" "$job/run"
{
	echo "WORKLOAD=$workload"
	echo "REPS=$REPS"
	echo "ARMS=\"$ARMS\""
	echo "PROFILE=$PROFILE"
	echo "PROFILE_PASSES=$PROFILE_PASSES"
	echo "PREP=$PREP"
	echo "INJECT_LOOKUP_DELAY_NS=$INJECT_LOOKUP_DELAY_NS"
	echo "BENCH_ORDER=$ORDER"
	echo "BENCH_ORDER_SEED=${ORDER_SEED:-0}"
	# one boot of a set (bench/run-boots.sh)
	for v in SET_ID BOOT_LABEL BOOT_INDEX; do
		[ -n "${!v:-}" ] && echo "$v=$(printf %q "${!v}")"
	done
	# The lab's commit and whether tracked files differ from it (the run
	# records them: reports/lab/runmodel.py kernel_of); nothing outside git.
	if lab_commit=$(git -C "$top" rev-parse HEAD 2>/dev/null); then
		echo "LAB_COMMIT=$lab_commit"
		if git -C "$top" diff --quiet HEAD -- 2>/dev/null; then echo "LAB_DIRTY=0"; else echo "LAB_DIRTY=1"; fi
	fi
	# The workload's own variables (PARAMS in its workload.conf) and the
	# generic extent bounds, when set here: the guest's workload.conf
	# resolves the rest from its defaults.
	for v in MIN_EXTENTS MAX_EXTENTS $(workload_var "$workload" PARAMS); do
		[ -n "${!v:-}" ] && echo "$v=$(printf %q "${!v}")"
	done
} >"$job/bench.env"
# BENCH_DRY_RUN=1: stop here, with the job and its bench.env written (the
# lab's tests of what a run forwards)
if [ "${BENCH_DRY_RUN:-0}" = 1 ]; then
	echo "bench: dry run: job in $job"
	exit 0
fi

nr_arms=$(echo $ARMS | wc -w)
# Scratch disks: one of ARM_DISK_GIB per arm and, with PREP=once, the save
# disk of SAVE_DISK_GIB after them (sparse images of the prepared
# filesystems: only their non-zero blocks use space). A workload may ask for
# bigger arm disks (DISK_GIB in its workload.conf, default 2); the save disk
# then holds one arm disk per arm.
# shellcheck source=/dev/null
ARM_DISK_GIB=$(. "$top/bench/workloads/$workload/workload.conf" 2>/dev/null && echo "${DISK_GIB:-2}")
case $ARM_DISK_GIB in
'' | *[!0-9]* | 0) die "workload $workload: DISK_GIB='$ARM_DISK_GIB' in its workload.conf is not a size in GiB (a whole number >= 1)" ;;
esac
SAVE_DISK_GIB=$(( nr_arms * ARM_DISK_GIB > 12 ? nr_arms * ARM_DISK_GIB : 12 ))
# a bigger disk's saved image may be about as big: count that much memory
[ "$ARM_DISK_GIB" -gt 2 ] && [ $(( ARM_DISK_GIB * 1024 )) -gt "$SCRATCH_SAVE_MIB" ] &&
	SCRATCH_SAVE_MIB=$(( ARM_DISK_GIB * 1024 ))
sizes=()
for _ in $ARMS; do sizes+=("$ARM_DISK_GIB"); done
[ "$PREP" = once ] && sizes+=("$SAVE_DISK_GIB")
mem_mb=4096
# Where the scratch disks live (see the top of this file).
scratch_where=build
scratch_dir=""
if [ "$SCRATCH_IN_RAM" = 1 ] && [ "${KEEP_DISKS:-0}" = 1 ]; then
	echo "bench: note: KEEP_DISKS=1: the scratch disks go to build/ (SCRATCH_IN_RAM=0), where they are kept"
elif [ "$SCRATCH_IN_RAM" = 1 ]; then
	# MiB the disks can take in memory: every arm disk whole (BLKZEROOUT
	# allocates it), SCRATCH_SAVE_MIB per arm on the save disk
	need_mib=$(( nr_arms * ARM_DISK_GIB * 1024 ))
	[ "$PREP" = once ] && need_mib=$(( need_mib + nr_arms * SCRATCH_SAVE_MIB ))
	avail_mib=$(awk '$1 == "MemAvailable:" { print int($2 / 1024) }' /proc/meminfo 2>/dev/null)
	free_mib=$(df -Pm "$SCRATCH_DIR" 2>/dev/null | awk 'NR == 2 { print $4 }')
	spare_mib=$(( mem_mb + 2048 ))
	why=""
	if [ ! -d "$SCRATCH_DIR" ] || [ ! -w "$SCRATCH_DIR" ]; then
		why="$SCRATCH_DIR is not a writable directory"
	elif [ -z "$avail_mib" ] || [ -z "$free_mib" ]; then
		why="cannot read MemAvailable or the free space of $SCRATCH_DIR"
	elif [ $(( need_mib + spare_mib )) -gt "$avail_mib" ]; then
		why="the disks may take $need_mib MiB; with the guest's $mem_mb MiB and 2048 MiB to spare that is more than the host's MemAvailable ($avail_mib MiB)"
	elif [ "$need_mib" -gt "$free_mib" ]; then
		why="the disks may take $need_mib MiB, $SCRATCH_DIR has $free_mib MiB free"
	elif ! scratch_dir=$(mktemp -d "$SCRATCH_DIR/fscrypt-lab-$stamp-XXXXXX" 2>/dev/null); then
		why="cannot create a directory in $SCRATCH_DIR"
		scratch_dir=""
	fi
	if [ -n "$why" ]; then
		echo "bench: note: scratch disks in build/, not in memory: $why (SCRATCH_IN_RAM=0 says so without this note)"
	else
		scratch_where=ram
		# removed however the run ends
		trap 'rm -rf "$scratch_dir"' EXIT
		echo "bench: scratch disks in memory: $scratch_dir (up to $need_mib MiB; MemAvailable $avail_mib MiB, $free_mib MiB free there)"
	fi
fi
scratch=()
i=0
for g in "${sizes[@]}"; do
	if [ "$scratch_where" = ram ]; then
		img=$scratch_dir/scratch$i.img
		truncate -s "${g}G" "$img" || die "cannot create the scratch disk $img"
		scratch+=(--scratch-file "$img")
	else
		scratch+=(--scratch "${g}G")
	fi
	i=$((i + 1))
done
# Generous: a timed run of one arm takes seconds to minutes under icount.
timeout=${TIMEOUT:-$(( (REPS + 1) * nr_arms * 900 + 600 ))}
# shellcheck source=/dev/null # the workload is picked at run time; tests/host/bench-workloads.sh loads each one
read -r est est_prep < <(. "$top/bench/workloads/$workload/workload.conf" 2>/dev/null
	echo "${EST_ARM_RUN_S:-60} ${EST_PREP_S:-60}")
runs=$(( (REPS + (PROFILE == 1 ? 1 : 0)) * nr_arms ))
# PREP=once prepares each arm once; PREP=each before every arm run
preps=$nr_arms
[ "$PREP" = once ] || preps=$runs
echo "bench: workload=$workload arms=($ARMS) reps=$REPS profile=$PROFILE prep=$PREP kernel=$(basename "$KERNEL")"
echo "bench: $runs arm runs and $preps preparations, expected about $(( (runs * est + preps * est_prep + 30) / 60 )) min on an idle host ($est s per arm run, $est_prep s per preparation: the workload's EST_ARM_RUN_S, EST_PREP_S; less for arms found unsupported, more beside other VMs)"
echo "bench: progress lines: [elapsed of expected total] arm, rep, phase (the expected total follows the arm runs done so far)"
append="slab_nomerge"
if [ "$INJECT_LOOKUP_DELAY_NS" != 0 ]; then
	append+=" fscrypto.extent_lookup_delay_ns=$INJECT_LOOKUP_DELAY_NS"
	echo "bench: WARNING: injected slowdown: every per-extent lookup waits $INJECT_LOOKUP_DELAY_NS ns (a test of the regression checks, not a measurement)"
fi
# The host's load average during the run, every 30 s (epoch, /proc/loadavg,
# QEMU processes running: this run's and any other VM beside it).
mkdir -p "$vm"
(while :; do echo "$(date +%s) $(cat /proc/loadavg) $(pgrep -c -f "^qemu-system-x86_64 ")"; sleep 30; done) >"$vm/host-load.tsv" 2>/dev/null &
sampler=$!
"$top/vm-images/run-vm.sh" --kernel "$KERNEL" --job "$job" --out "$vm" \
	--timeout "$timeout" --mem "$mem_mb" "${scratch[@]}" --append "$append"
rc=$?
kill "$sampler" 2>/dev/null
wait "$sampler" 2>/dev/null
# What run-vm.sh cannot know, in its run.info (reports.lab.runmodel keeps every
# key of it in meta.json run_info): where the scratch disks were, and the
# host's 1-minute load average at the start, mean and max over the samples.
if [ -f "$vm/run.info" ]; then
	{
		if [ "$scratch_where" = ram ]; then
			echo "scratch=ram ($SCRATCH_DIR, tmpfs)"
		else
			echo "scratch=disk (build/)"
		fi
		awk 'NR == 1 { s = $2 } { t += $2; if ($2 > m) m = $2; n++
				o = $7 - 1; if (o < 0) o = 0; to += o; if (o > mo) mo = o }
			END { if (n) printf "host_load1_start=%s\nhost_load1_mean=%.2f\nhost_load1_max=%s\nhost_load_samples=%d\nhost_other_vms_mean=%.2f\nhost_other_vms_max=%d\n", s, t / n, m, n, to / n, mo }' \
			"$vm/host-load.tsv"
	} >>"$vm/run.info"
fi
if [ $rc != 0 ]; then
	echo "bench: the benchmark VM failed ($(cat "$vm/verdict" 2>/dev/null)); job output: $vm/results/job.log" >&2
	tail -n 20 "$vm/results/job.log" 2>/dev/null >&2
	exit 1
fi

echo "bench: [$(( $(date +%s) - t0 ))s] VM done; collecting the results and writing the report"
# reports/lab/collect.py reads what the guest recorded into a run; the
# reports package is imported from the top of the clone.
cd "$top" || die "cannot cd to $top"
/usr/bin/python3 -m reports.lab.collect "$vm" "$job" "$run" || die "could not collect the results of $vm"
if [ "$REPORT" = 0 ]; then
	echo "bench: raw run: $run (REPORT=0: no report)"
	echo "bench: done in $(( $(date +%s) - t0 ))s"
	exit 0
fi
# reports/generated/<date>-<workload>; a second run of the day gets its time too, and
# a run with an injected slowdown says so in its name.
out=$top/reports/generated/$(date -u +%Y-%m-%d)-$workload
[ "$INJECT_LOOKUP_DELAY_NS" = 0 ] || out+=-injected-${INJECT_LOOKUP_DELAY_NS}ns
[ -e "$out" ] && out+=-${stamp#*-}
/usr/bin/python3 -m reports.lab.generate "$run" "$out" || die "report generation failed for $run"
ln -sfn "$run" "$top/build/bench/latest-$workload"
echo "bench: raw run: $run"
echo "bench: report:  $out/index.html and $out/summary.md"
# Every run goes into the history store (reports/lab/history.py; the store is
# $LAB_HISTORY_DIR, outside build/), and the reports/ index lists it.
/usr/bin/python3 -m reports.lab.history append "$run" "$out" ||
	die "could not record $run in the history store (LAB_HISTORY_DIR=${LAB_HISTORY_DIR:-default})"
/usr/bin/python3 -m reports.lab.index || die "could not write reports/generated/index.html"
echo "bench: done in $(( $(date +%s) - t0 ))s"
