# shellcheck shell=bash disable=SC2154 # bench_wl, ARM, SCALE_*: set by bench/guest/lib.sh
# Hooks of the scaling workload (sourced by bench/guest/lib.sh, see there).

# The extent counts: SCALE_FROM multiplied by SCALE_STEP while the running
# sum fits the budget (defaults: 4096, 16384, ..., 1048576).
scale_points() {
	local n=$SCALE_FROM sum=0
	while [ $((sum + n)) -le "$SCALE_BUDGET" ]; do
		echo "$n"
		sum=$((sum + n))
		n=$((n * SCALE_STEP))
	done
}

wl_phases() {
	local n pts
	pts=$(scale_points)
	[ -n "$pts" ] || { echo "bench: SCALE_BUDGET=$SCALE_BUDGET is below SCALE_FROM=$SCALE_FROM" >&2; return 1; }
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

# The file of point N is N blocks of 4 KiB, each its own extent, made in two
# passes (prep.fio): every even block, then (after end_fsync wrote them) every
# odd block. Neither pass leaves two writes adjacent in one delalloc range,
# and a block's neighbours were written in the other pass, to other disk
# blocks, so FIEMAP does not merge them either: N extents from 2 sequential
# passes, no per-write fsync (1048576 extents in minutes, not hours).
wl_prep() { # mnt phases...
	local mnt=$1 n
	shift
	for n in $(phase_points "$@"); do
		# The file exists at its full size first (a hole), else fio lays it
		# out (writes it whole) before the first pass; IOS = N/2 writes per
		# pass, else fio wraps around and writes the skipped blocks too
		# (both seen on a loop btrfs: 21 extents instead of 16384).
		truncate -s $((n * 4))k "$mnt/bench/frag-e$n" || return 1
		BENCH_DIR=$mnt/bench TARGET=$mnt/bench/frag-e$n OFFSET=0 SIZE=$((n * 4))k IOS=$((n / 2)) \
			fio --output=/tmp/prep.out "$bench_wl/prep.fio" || { cat /tmp/prep.out; return 1; }
		BENCH_DIR=$mnt/bench TARGET=$mnt/bench/frag-e$n OFFSET=4k SIZE=$((n * 4 - 4))k IOS=$((n / 2)) \
			fio --output=/tmp/prep.out "$bench_wl/prep.fio" || { cat /tmp/prep.out; return 1; }
	done
}

wl_checks() { # mnt phases...
	local mnt=$1 n
	shift
	for n in $(phase_points "$@"); do echo "e$n $mnt/bench/frag-e$n $n - 0"; done
}

wl_target() { echo "$1/bench/frag-e${2##*-e}"; }

# After each timed phase: the memory of the caches that hold per-file and
# per-extent state (fscrypt_info, fscrypt_extent_info, fscrypt_extent_key,
# btrfs_extent_map, btrfs_inode, btrfs_extent_buffer), the /proc/slabinfo
# lines as they are, into DIR/PHASE.slabinfo (reports/lab/wl_scaling.py reads
# them: active objects x object size).
wl_after_phase() { # arm rep phase mnt dir
	grep -E '^(# name|fscrypt_|btrfs_extent_map |btrfs_inode |btrfs_extent_buffer |ext4_inode_cache |ext4_extent_status )' \
		/proc/slabinfo >"$5/$3.slabinfo" 2>/dev/null || true
}
