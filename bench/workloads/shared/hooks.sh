# shellcheck shell=bash disable=SC2154 # bench_wl, ARM, SCALE_*: set by bench/guest/lib.sh
# Hooks of the shared workload (sourced by bench/guest/lib.sh, see there).
# Sides: "orig" (bench/orig), "reflink" (bench/reflink, cp --reflink=always
# of orig) and "snapshot" (snap/bench/orig in a read-only snapshot of the
# top-level subvolume taken after both exist).

# Shared extents need FICLONE (reflink) and snapshots: try a reflink in the
# arm's (possibly encrypted) directory; snapshots need btrfs.
wl_probe() { # mnt
	local err
	echo probe >"$1/bench/.probe" || return 1
	if ! err=$(cp --reflink=always "$1/bench/.probe" "$1/bench/.probe-clone" 2>&1); then
		rm -f "$1/bench/.probe" "$1/bench/.probe-clone"
		echo "$(arm_fs "$ARM") cannot share extents: cp --reflink=always: ${err##*: } (no FICLONE/reflink; snapshots are btrfs-only too)"
		return 3
	fi
	rm -f "$1/bench/.probe" "$1/bench/.probe-clone"
	if [ "$(arm_fs "$ARM")" != btrfs ]; then
		echo "$(arm_fs "$ARM") has reflinks but no snapshots (this workload reads a snapshot)"
		return 3
	fi
}

wl_prep() { # mnt phases...
	local mnt=$1
	BENCH_DIR=$mnt/bench TARGET=$mnt/bench/orig fio --output=/tmp/prep.out "$bench_wl/prep.fio" ||
		{ cat /tmp/prep.out; return 1; }
	sync
	cp --reflink=always "$mnt/bench/orig" "$mnt/bench/reflink" || return 1
	btrfs -q subvolume snapshot -r "$mnt" "$mnt/snap" || return 1
	sync
}

# Every side must be as fragmented as promised, and every extent shared.
wl_checks() { # mnt phases...
	local m=$MIN_EXTENTS
	echo "orig $1/bench/orig $m - $m"
	echo "reflink $1/bench/reflink $m - $m"
	echo "snapshot $1/snap/bench/orig $m - $m"
}

wl_target() { # mnt phase
	case ${2#*-} in
	orig) echo "$1/bench/orig" ;;
	reflink) echo "$1/bench/reflink" ;;
	snapshot) echo "$1/snap/bench/orig" ;;
	esac
}
