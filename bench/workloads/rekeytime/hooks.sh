# shellcheck shell=bash disable=SC2154 # bench_wl, ARM, REKEY_*: set by bench/guest/lib.sh and workload.conf
# Hooks of the rekeytime workload (sourced by bench/guest/lib.sh, see there
# and workload.conf). Point N: subvolume MNT/rk-nN, its encrypted directory
# MNT/rk-nN/d (policy under K1, the key of seed 1, which the driver adds),
# holding directories dir-0000, ... of at most REKEY_DIR_NAMES empty files
# each. Its phase rekey-nN is a command phase: the rekey of rk-nN to K2
# (seed 2), timed by fscrypt_setup.
# shellcheck source=bench/workloads/lib/rekey.sh
. "$bench_wl/../lib/rekey.sh"

# The points, as given (each a number of names from 1 on, none twice);
# fails on anything else.
rekey_points() {
	local n pts
	pts=$(bench_points REKEY_NAMES "a number of names") || return 1
	for n in $pts; do
		[ "$n" -ge 1 ] || { echo "bench: REKEY_NAMES: $n names: nothing to rekey" >&2; return 1; }
	done
	echo "$pts"
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

# Per-extent keys on btrfs only, and the kernel must have the rekey ioctl
# (bench/workloads/lib/rekey.sh rekey_probe).
wl_probe() { # mnt
	rekey_probe "$1"
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
