# shellcheck shell=bash disable=SC2154 # wl, ARM, REKEY_*: set by bench/guest/lib.sh and workload.conf
# Hooks of the rekeytime workload (sourced by bench/guest/lib.sh, see there
# and workload.conf). Point N: subvolume MNT/rk-nN, its encrypted directory
# MNT/rk-nN/d (policy under K1, the key of seed 1, which the driver adds),
# holding directories dir-0000, ... of at most REKEY_DIR_NAMES empty files
# each. Its phase rekey-nN is a command phase: the rekey of rk-nN to K2
# (seed 2), timed by fscrypt_setup.

# The points, as given (each a number of names from 1 on, none twice);
# fails on anything else.
rekey_points() {
	local n seen=" "
	for n in $REKEY_NAMES; do
		case $n in '' | *[!0-9]*) echo "bench: REKEY_NAMES: '$n' is not a number of names" >&2; return 1 ;; esac
		n=$((10#$n))
		[ "$n" -ge 1 ] || { echo "bench: REKEY_NAMES: $n names: nothing to rekey" >&2; return 1; }
		case $seen in *" $n "*) echo "bench: REKEY_NAMES: $n twice" >&2; return 1 ;; esac
		seen+="$n "
		echo "$n"
	done
	[ "$seen" != " " ] || { echo "bench: REKEY_NAMES is empty" >&2; return 1; }
}

wl_phases() {
	local n pts
	pts=$(rekey_points) || return 1
	for n in $pts; do echo -n "rekey-n$n "; done
	echo
}

# Every phase is a command phase (fio does not time an ioctl).
wl_command_phases() { wl_phases; }

# The profiled repetition rekeys the last point (by default the largest).
wl_profile_phase() { echo "rekey-n$(rekey_points | tail -n 1)"; }

# The points the given phases need, each once, in the order given.
phase_points() { # phases...
	local p
	for p in "$@"; do echo "${p##*-n}"; done | awk '!seen[$0]++'
}

# Directories of point N, and the last file (N - 1) and its directory.
rt_dirs() { echo $(( ($1 + REKEY_DIR_NAMES - 1) / REKEY_DIR_NAMES )); }
rt_last_file() { # mnt n
	printf '%s/rk-n%s/d/dir-%04d/file-%06d\n' "$1" "$2" $(( ($2 - 1) / REKEY_DIR_NAMES )) $(( $2 - 1 ))
}

# Per-extent keys on btrfs only, and the kernel must have the rekey ioctl:
# a small subvolume is rekeyed from K1 to K2 for real, then deleted.
wl_probe() { # mnt
	local mnt=$1 mode fs err rc sv=$1/.rekey-probe
	mode=$(arm_key_mode "$ARM") fs=$(arm_fs "$ARM")
	case $fs:$mode in
	btrfs:per-extent | btrfs:per-extent-key) ;;
	*:none)
		echo "$ARM is unencrypted: nothing to rekey (BTRFS_IOC_FSCRYPT_REKEY moves an encrypted btrfs subvolume to another master key)"
		return 3 ;;
	btrfs:per-inode)
		echo "$ARM cannot rekey: the kernel refuses a subvolume holding per-inode-key files (EOPNOTSUPP: they cannot write new extents under another key); only per-extent keys can"
		return 3 ;;
	*)
		echo "$fs has neither subvolumes nor a rekey ioctl (BTRFS_IOC_FSCRYPT_REKEY is btrfs's; $ARM is $mode on $fs)"
		return 3 ;;
	esac
	btrfs -q subvolume create "$sv" || return 1
	mkdir "$sv/d" && fscrypt_setup "$mnt" "$sv/d" >/dev/null && echo probe >"$sv/d/f" || return 1
	sync
	err=$(fscrypt_setup rekey "$sv" "$sv/d" 1 2 2>&1)
	rc=$?
	btrfs -q subvolume delete "$sv" >/dev/null 2>&1
	case $rc in
	0) return 0 ;;
	3) echo "this kernel cannot rekey a subvolume: ${err//$'\n'/ }"; return 3 ;;
	*) echo "the probe's rekey failed: ${err//$'\n'/ }"; return 1 ;;
	esac
}

# Point N's subvolume: d under K1, its directories, N empty files (one
# touch per directory, the names made without a fork each).
rt_make() { # mnt n
	local mnt=$1 n=$2 sv=$1/rk-n$2 i dirs dir first last f path paths
	btrfs -q subvolume create "$sv" && mkdir "$sv/d" &&
		fscrypt_setup "$mnt" "$sv/d" >/dev/null || return 1
	dirs=$(rt_dirs "$n")
	for ((i = 0; i < dirs; i++)); do
		printf -v dir '%s/d/dir-%04d' "$sv" "$i"
		mkdir "$dir" || return 1
		first=$((i * REKEY_DIR_NAMES))
		last=$((first + REKEY_DIR_NAMES))
		[ "$last" -le "$n" ] || last=$n
		paths=()
		for ((f = first; f < last; f++)); do
			printf -v path '%s/file-%06d' "$dir" "$f"
			paths+=("$path")
		done
		touch -- "${paths[@]}" || return 1
	done
}

wl_prep() { # mnt phases...
	local mnt=$1 n
	shift
	for n in $(phase_points "$@"); do
		rt_make "$mnt" "$n" || return 1
	done
	sync
}

# Each point's last file exists and is empty (0 extents).
wl_checks() { # mnt phases...
	local mnt=$1 n
	shift
	for n in $(phase_points "$@"); do echo "n$n $(rt_last_file "$mnt" "$n") 0 0 0"; done
}

# The measured command: the rekey of point N's subvolume (K1 to K2 in the
# timed reps, which start from the prepared filesystem; -a: back and forth
# in the profiled rep, which runs it more than once), its result the tool's
# "name<TAB>value" lines (bench/tools/fscrypt_setup.c).
wl_command() { # arm mnt phase out
	local sv=$2/rk-n${3##*-n}
	fscrypt_setup rekey -a "$sv" "$sv/d" 1 2 >"$4"
}
