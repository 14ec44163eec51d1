# shellcheck shell=bash disable=SC2154 # bench_wl, bench_out, ARM, FILE_SIZE, GROUP_SIZES: set by bench/guest/lib.sh
# Hooks of the groupsweep workload (sourced by bench/guest/lib.sh, see
# there and workload.conf). Point N: the file bench/frag-gN, read by phase
# seqread-gN; on per-extent keys written under fscrypt_extents_per_key=N.
# Every arm writes the same files in the same order (per-inode keys do not
# depend on N), so that both filesystems hold as many extents and tree
# items when a point's file is read: a reference with one file read 4%
# faster (28.56 against 27.34 MiB/s, icount, 2026-12-04) and made every
# ratio look 4% worse.

# The points, as given (each a number, none twice); fails on anything else.
group_sizes() {
	bench_points GROUP_SIZES "a number of extents per key (0: no bound)"
}

wl_phases() {
	local n pts
	pts=$(group_sizes) || return 1
	for n in $pts; do echo -n "seqread-g$n "; done
	echo
}

# The profiled repetition reads the last point's file (by default the
# unbounded groups, what btrfs-extent mounts by default); every point's read
# is counted (tracefs) after it.
wl_profile_phase() { echo "seqread-g$(group_sizes | tail -n 1)"; }
wl_count_phases() { wl_phases; }

# The points the given phases read, each once, in the order given.
phase_points() { # phases...
	local p
	for p in "$@"; do echo "${p##*-g}"; done | awk '!seen[$0]++'
}

# The options /proc/mounts shows for a mount point (PROC_MOUNTS: another
# file, for the host's tests).
mount_options() { # mnt
	awk -v m="$1" '$2 == m { o = $4 } END { print o }' "${PROC_MOUNTS:-/proc/mounts}"
}

# Does this mount give new files per-extent keys (a file per point)?
per_extent_mount() { # mnt
	case ,$(mount_options "$1"), in *,fscrypt_per_extent_keys,*) return 0 ;; *) return 1 ;; esac
}

# Remount with fscrypt_extents_per_key=N and check that /proc/mounts says
# so (N = 0, no bound, shows no option); prints why not and fails otherwise.
remount_extents_per_key() { # mnt n
	local err opts
	err=$(mount -o "remount,fscrypt_extents_per_key=$2" "$1" 2>&1) ||
		{ echo "mount -o remount,fscrypt_extents_per_key=$2 failed: $err"; return 1; }
	opts=,$(mount_options "$1"),
	case $2:$opts in
	0:*,fscrypt_extents_per_key=*) ;;
	0:*,fscrypt_per_extent_keys,*) return 0 ;;
	*:*,fscrypt_per_extent_keys,*fscrypt_extents_per_key="$2",*) return 0 ;;
	esac
	echo "after remounting with fscrypt_extents_per_key=$2, /proc/mounts shows ${opts:1:-1}"
	return 1
}

# Only per-extent keys in key groups (the sweep sets the bound itself) and
# per-inode keys (the reference) on btrfs take part.
wl_probe() { # mnt
	local mode fs err
	mode=$(arm_key_mode "$ARM") fs=$(arm_fs "$ARM")
	case $fs:$mode in
	btrfs:per-extent)
		err=$(remount_extents_per_key "$1" 1) && err=$(remount_extents_per_key "$1" 0) ||
			{ echo "this kernel cannot bound key groups: $err"; return 3; } ;;
	btrfs:per-inode) ;;
	*)
		echo "the key-group sweep sets fscrypt_extents_per_key itself on an arm with per-extent keys in key groups (btrfs, key mode per-extent) and compares it with per-inode keys on btrfs; $ARM is $mode on $fs"
		return 3 ;;
	esac
}

# Each point's file, in the order of the points; on per-extent keys right
# after remounting with its bound (and the mount back to no bound at the
# end). The writing of each file is counted (tracefs: key derivations,
# key-group starts per reason) into profiles/<arm>/counts.tsv as phase
# write-gN.
wl_prep() { # mnt phases...
	local mnt=$1 n counts=$bench_out/profiles/$ARM/counts.tsv per_extent=0
	shift
	per_extent_mount "$mnt" && per_extent=1
	mkdir -p "$bench_out/profiles/$ARM"
	for n in $(phase_points "$@"); do
		if [ "$per_extent" = 1 ]; then
			remount_extents_per_key "$mnt" "$n" || return 1
		fi
		trace_start || { echo "cannot record fscrypt events in $tfs"; return 1; }
		TARGET=$mnt/bench/frag-g$n fio --output=/tmp/prep.out "$bench_wl/prep.fio" || { cat /tmp/prep.out; return 1; }
		sync
		# a PREP=each run writes the files again: keep the last writing's counts
		if [ -f "$counts" ]; then
			awk -v p="write-g$n" '$1 != p' "$counts" >"$counts.new" && mv "$counts.new" "$counts"
		fi
		trace_counts "write-g$n" >>"$counts"
	done
	[ "$per_extent" = 0 ] || remount_extents_per_key "$mnt" 0
}

wl_checks() { # mnt phases...
	local mnt=$1 n
	shift
	for n in $(phase_points "$@"); do echo "g$n $mnt/bench/frag-g$n $MIN_EXTENTS - 0"; done
}

wl_target() { echo "$1/bench/frag-g${2##*-g}"; }
