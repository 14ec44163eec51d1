# shellcheck shell=bash disable=SC2154 # wl, ARM, SCALE_*: set by guest-bench.sh
# Hooks of the scaling workload (sourced by bench/guest-bench.sh, see there).

# The extent counts: SCALE_MIN doubled while the running sum fits the budget.
scale_points() {
	local n=$SCALE_MIN sum=0
	while [ $((sum + n)) -le "$SCALE_BUDGET" ]; do
		echo "$n"
		sum=$((sum + n))
		n=$((n * 2))
	done
}

wl_phases() {
	local n pts
	pts=$(scale_points)
	[ -n "$pts" ] || { echo "bench: SCALE_BUDGET=$SCALE_BUDGET is below SCALE_MIN=$SCALE_MIN" >&2; return 1; }
	for n in $pts; do echo -n "seqread-e$n "; done
	for n in $pts; do echo -n "randread-e$n "; done
	echo
}

# The profiled repetition reads the largest file sequentially.
wl_profile_phase() { echo "seqread-e$(scale_points | tail -n 1)"; }

# The points the given phases read, each once.
phase_points() { # phases...
	local p
	for p in "$@"; do echo "${p##*-e}"; done | sort -n -u
}

# "FILE_SIZE BS" of the file of point N: every file has the size of the
# largest point's (NMAX x 17/16 blocks of 4 KiB) and is written in chunks of
# NMAX/N blocks, so only the extent count changes from point to point, not
# the amount read.
point_layout() { # n
	local nmax
	nmax=$(scale_points | tail -n 1)
	echo "$((nmax * 17 / 4))k $((nmax / $1 * 4))k"
}

wl_prep() { # mnt phases...
	local mnt=$1 n size bs
	shift
	for n in $(phase_points "$@"); do
		size=$(point_layout "$n")    # (no process substitution: no /dev/fd in the guest)
		bs=${size#* } size=${size% *}
		BENCH_DIR=$mnt/bench TARGET=$mnt/bench/frag-e$n FILE_SIZE=$size BS=$bs \
			fio --output=/tmp/prep.out "$wl/prep.fio" || { cat /tmp/prep.out; return 1; }
	done
}

wl_checks() { # mnt phases...
	local mnt=$1 n
	shift
	for n in $(phase_points "$@"); do echo "e$n $mnt/bench/frag-e$n $n - 0"; done
}

wl_target() { echo "$1/bench/frag-e${2##*-e}"; }
