#!/bin/bash
# In-guest benchmark driver; becomes /job/run (see bench/run-bench.sh).
#
# Reads /job/bench.env (WORKLOAD, REPS, ARMS, PROFILE, MIN_EXTENTS), then for
# each repetition runs every arm in turn (A B C A B C ...), each on a freshly
# made filesystem on its own scratch disk:
#   prep (unmeasured) -> sync, count extents (FIEMAP) -> for each phase:
#   sync, drop caches, fio --output-format=json+
# Results go to $RESULTS/bench/: raw/<arm>/rep<N>/<phase>.json, arms.tsv,
# extents.tsv, order.tsv, fio-version, and profiles/<arm>/ from one extra,
# profiled repetition per arm (never mixed with the timed ones).
set -u
. /job/bench.env
. /job/bench/arms.sh
wl=/job/bench/workloads/$WORKLOAD
. "$wl/workload.conf"
export PATH=/job/tools:$PATH FILE_SIZE
out=$RESULTS/bench
mkdir -p "$out/raw" "$out/profiles"
: >"$out/arms.tsv"
: >"$out/extents.tsv"
: >"$out/order.tsv"
fio --version >"$out/fio-version"
echo "$MIN_EXTENTS" >"$out/min-extents"
start=$(date +%s)
nr_arms=$(echo $ARMS | wc -w)
total=$(( REPS * nr_arms + (PROFILE ? nr_arms : 0) ))
done_runs=0

progress() { # message
	local el=$(( $(date +%s) - start )) eta=""
	[ "$done_runs" -gt 0 ] && eta=", about $(( el * (total - done_runs) / done_runs ))s left"
	echo "LAB-PROGRESS [${el}s, run $((done_runs + 1))/$total$eta] $*" >/dev/console
}

# The scratch disk of an arm: one per arm, in the order of ARMS, from vdd on.
arm_dev() {
	local letters=(d e f g h i j) i=0 a
	for a in $ARMS; do
		[ "$a" = "$1" ] && { echo "/dev/vd${letters[$i]}"; return; }
		i=$((i + 1))
	done
}

declare -A skipped

# Make, mount and (for encrypted arms) set up encryption. Prints a reason and
# returns 3 if the kernel cannot run this arm, 1 on other errors.
setup_fs() { # arm dev mnt
	local arm=$1 dev=$2 mnt=$3 opts err tune
	arm_unsupported "$arm" && return 3
	opts=$(arm_mount_opts "$arm")
	umount -q "$mnt" 2>/dev/null
	$(arm_mkfs "$arm") "$dev" >/tmp/mkfs.log 2>&1 || { cat /tmp/mkfs.log; return 1; }
	if ! err=$(mount -t "$(arm_fs "$arm")" ${opts:+-o "$opts"} "$dev" "$mnt" 2>&1); then
		echo "mount -o '$opts' failed: $err"
		[ -n "$opts" ] && return 3
		return 1
	fi
	tune=$(arm_tuning "$arm" "$(basename "$dev")")
	[ -z "$tune" ] || sh -c "$tune" || { echo "tuning failed: $tune"; return 1; }
	mkdir -p "$mnt/bench"
	if arm_encrypted "$arm"; then
		err=$(fscrypt_setup "$mnt" "$mnt/bench" 2>&1)
		case $? in
		0) ;;
		3) echo "$(arm_fs "$arm") on this kernel does not support fscrypt ($err)"; return 3 ;;
		*) echo "$err"; return 1 ;;
		esac
	fi
	return 0
}

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# Prep and check the fragmentation promise. Exits the whole run if broken.
prep() { # arm rep mnt
	local arm=$1 rep=$2 mnt=$3 n
	progress "$arm rep $rep: prep (unmeasured)"
	BENCH_DIR=$mnt/bench fio --output=/tmp/prep.out "$wl/prep.fio" ||
		{ echo "bench: fio prep failed for $arm rep $rep:"; cat /tmp/prep.out; exit 1; }
	sync
	n=$(extent_count "$mnt/bench/frag" | cut -d' ' -f1)
	printf '%s\t%s\t%s\n' "$arm" "$rep" "$n" >>"$out/extents.tsv"
	if [ -z "$n" ] || [ "$n" -lt "$MIN_EXTENTS" ]; then
		echo "bench: FAIL: $arm rep $rep: the file has ${n:-?} extents, but workload '$WORKLOAD' promises at least $MIN_EXTENTS"
		exit 1
	fi
}

run_phases() { # arm rep mnt dir
	local arm=$1 rep=$2 mnt=$3 dir=$4 phase
	mkdir -p "$dir"
	for phase in $PHASES; do
		progress "$arm rep $rep: $phase"
		drop_caches
		BENCH_DIR=$mnt/bench fio --output-format=json+ --output="$dir/$phase.json" \
			"$wl/$phase.fio" ||
			{ echo "bench: fio $phase failed for $arm rep $rep"; cat "$dir/$phase.json"; exit 1; }
	done
}

# One timed repetition of one arm.
timed_run() { # arm rep
	local arm=$1 rep=$2 dev mnt=/mnt/bench-$1 why
	dev=$(arm_dev "$arm")
	mkdir -p "$mnt"
	if [ -n "${skipped[$arm]:-}" ]; then
		return
	fi
	why=$(setup_fs "$arm" "$dev" "$mnt")
	case $? in
	0) ;;
	3) skipped[$arm]=$why; printf '%s\tskipped\t%s\n' "$arm" "$why" >>"$out/arms.tsv"
	   total=$(( total - (REPS - rep + 1) - (PROFILE ? 1 : 0) ))
	   progress "$arm: skipped: $why"; return ;;
	*) echo "bench: cannot set up $arm on $dev: $why"; exit 1 ;;
	esac
	prep "$arm" "$rep" "$mnt"
	run_phases "$arm" "$rep" "$mnt" "$out/raw/$arm/rep$rep"
	printf '%s\t%s\n' "$arm" "$rep" >>"$out/order.tsv"
	umount "$mnt"
	done_runs=$((done_runs + 1))
}

# One profiled repetition: bpftrace and perf stat around the read phases,
# slab usage after them. Its numbers are not used for the timed tables.
profiled_run() { # arm
	local arm=$1 dev mnt=/mnt/bench-$1 pdir=$out/profiles/$1 bt
	[ -n "${skipped[$arm]:-}" ] && return
	dev=$(arm_dev "$arm")
	mkdir -p "$pdir"
	setup_fs "$arm" "$dev" "$mnt" >/dev/null || return
	prep "$arm" profiled "$mnt"
	progress "$arm: profiled run (bpftrace, perf stat)"
	bpftrace -f json -o "$pdir/bpftrace.json" /job/profiles/bench.bt >"$pdir/bpftrace.err" 2>&1 &
	bt=$!
	# bpftrace reports its probes before all are live; wait for it.
	for _ in $(seq 120); do grep -q attached_probes "$pdir/bpftrace.json" 2>/dev/null && break; sleep 1; done
	sleep 10
	drop_caches
	perf stat -o "$pdir/perf-stat.txt" -e task-clock,context-switches,cpu-migrations,page-faults \
		-a -- env BENCH_DIR="$mnt/bench" fio --output-format=json+ \
		--output="$pdir/randread.json" "$wl/randread.fio" >/dev/null 2>&1
	grep -E '^(fscrypt|btrfs|ext4|kmalloc-128|slabinfo|# name)' /proc/slabinfo >"$pdir/slab.txt"
	kill -INT "$bt"; wait "$bt"
	umount "$mnt"
	done_runs=$((done_runs + 1))
}

for rep in $(seq 1 "$REPS"); do
	for arm in $ARMS; do
		timed_run "$arm" "$rep"
	done
done
if [ "${PROFILE:-0}" = 1 ]; then
	for arm in $ARMS; do
		profiled_run "$arm"
	done
fi
for arm in $ARMS; do
	[ -n "${skipped[$arm]:-}" ] || printf '%s\tmeasured\t\n' "$arm" >>"$out/arms.tsv"
done
progress "done"
exit 0
