# shellcheck shell=bash
# The in-guest benchmark driver, as a library: functions only, nothing
# happens when it is sourced. bench/guest/run (the job's /job/run) sources
# it and calls bench_load_workload, bench_init and bench_main; the host's
# tests (tests/host/bench-workloads.sh, bench-devimage.sh,
# reports/lab/test_cpuwindow.py) source it and call single functions.
#
# In-guest benchmark driver; becomes /job/run (see bench/run-bench.sh).
#
# Reads /job/bench.env (WORKLOAD, REPS, ARMS, PROFILE, PREP, and optional
# overrides such as MIN_EXTENTS or SCALE_BUDGET), then for each repetition
# runs every arm in turn (A B C A B C ...), each on its own scratch disk.
# PREP=once (the default): the first time an arm runs, make its filesystem,
#   probe (can this arm run the workload?), prep (unmeasured), sync, FIEMAP
#   check, unmount, and save the device (its non-zero blocks) to a sparse
#   image on the save disk (the disk after the arms' disks); before every
#   repetition, zero the device, write the image back (the device then
#   holds exactly what the preparation left), mount, add the key, FIEMAP
#   check again.
# PREP=each: a fresh mkfs, probe and prep for every repetition.
# Then, either way, for each phase: sync, drop caches, fio
# --output-format=json+
# Results go to $RESULTS/bench/: raw/<arm>/rep<N>/<phase>.json, arms.tsv,
# extents.tsv, order.tsv, phases, fio-version, cpu.tsv (the CPU time of
# every timed phase, from /proc/schedstat or /proc/stat, over fio's I/O:
# see run_phases), cpu-source, cpu-windows.tsv and user-hz, and profiles/<arm>/ from
# one extra, profiled repetition per arm (never mixed with the timed ones).
#
# With PROFILE=1 the profiled repetition also runs the workload's count
# phases (COUNT_PHASES, none by default) once more each, from a cold cache,
# with the fscrypt tracepoints recorded through tracefs:
# profiles/<arm>/counts.tsv has, per phase, how many extent lookups, key
# derivations, key-slot programs and key-group starts it took.
#
# A workload is bench/workloads/<name>/: workload.conf (shell variables:
# description, FILE, FILE_SIZE, MIN_EXTENTS, MAX_EXTENTS, PHASES,
# PROFILE_PHASE, COUNT_PHASES, EST_ARM_RUN_S, EST_PREP_S, PARAMS: the names
# of the workload's own variables that the run records), fio job files (prep.fio and
# one per phase, or per read kind: phase "seqread-orig" uses
# seqread-orig.fio if it exists, else seqread.fio), and optionally hooks.sh,
# which may redefine the wl_* functions below.
#
# The workload hook API (the wl_* functions below are the defaults; a
# workload's hooks.sh redefines those it needs; bench/README.md, "Adding a
# workload"): wl_phases, wl_profile_phase, wl_count_phases,
# wl_command_phases, wl_after_mount MNT, wl_probe MNT, wl_prep MNT
# PHASES..., wl_checks MNT PHASES..., wl_target MNT PHASE, wl_command ARM
# MNT PHASE OUT, wl_after_phase ARM REP PHASE MNT DIR. Hooks may read the
# library's state: bench_wl (the workload's directory), bench_out (the
# results directory $RESULTS/bench), bench_phases. The library's state
# that had short common names (the workload, the results directory, the
# phases, the start time, the expected total, the prepared and skipped
# arms) is named bench_*, so that a hook's own variables do not clobber
# it.
#
# Command phases: a phase named by wl_command_phases (COMMAND_PHASES) runs
# the workload's wl_command instead of fio, for a measurement fio cannot
# make (rekeytime: the time of one ioctl). It is timed like a fio phase
# (sync and dropped caches before it, in the same order among the arms and
# reps), but its result is raw/<arm>/rep<N>/PHASE.tsv, "name<TAB>value"
# lines written by wl_command, to which the driver adds the CPU time of all
# CPUs around the command (cpu_units, cpu_units_per_s, cpu_source); it has
# no line in cpu.tsv. The run lists them in command-phases; the generic
# report (fio's numbers) leaves them to the workload's reports/lab/wl_<kind>.py.

# bench_load_workload DIR: the workload in DIR (workload.conf, its
# defaults, then hooks.sh over the default hooks). Needs the variables of
# bench.env that workload.conf reads (overrides such as MIN_EXTENTS).
bench_load_workload() { # dir
	bench_wl=$1
	# shellcheck disable=SC1091
	. "$bench_wl/workload.conf"
	FILE=${FILE:-frag}
	MIN_EXTENTS=${MIN_EXTENTS:-1}
	MAX_EXTENTS=${MAX_EXTENTS:-}
	PROFILE_PHASE=${PROFILE_PHASE:-randread}
	COUNT_PHASES=${COUNT_PHASES:-}
	COMMAND_PHASES=${COMMAND_PHASES:-}
	EST_ARM_RUN_S=${EST_ARM_RUN_S:-60}
	EST_PREP_S=${EST_PREP_S:-60}
	export PATH=/job/tools:$PATH FILE_SIZE
	# shellcheck disable=SC1091
	if [ -f "$bench_wl/hooks.sh" ]; then . "$bench_wl/hooks.sh"; fi
	return 0
}

# bench_params: the workload's parameters as resolved (PARAMS in its
# workload.conf names its variables), NAME=VALUE lines; the run records
# them (reports/lab/collect.py: workload_params).
bench_params() {
	local p
	for p in ${PARAMS:-}; do echo "$p=${!p:-}"; done
}

# ---- workload hooks (defaults; hooks.sh may redefine any of them) ---------

# wl_phases: the measured phases, in order.
wl_phases() { echo $PHASES; }

# wl_profile_phase: the phase the profiled repetition runs.
wl_profile_phase() { echo "$PROFILE_PHASE"; }

# wl_count_phases: the phases the profiled repetition runs once more each
# with the fscrypt events counted (tracefs), after its profiles.
wl_count_phases() { echo $COUNT_PHASES; }

# wl_command_phases: the phases (of wl_phases) that run wl_command instead
# of fio (see "Command phases" above).
wl_command_phases() { echo $COMMAND_PHASES; }

# wl_after_mount MNT: after every mount of an arm, fresh or restored (and
# so before wl_probe and wl_prep, or before the FIEMAP check of a restored
# filesystem), with the arm's key added, e.g. to add more keys. Print why
# and return 3 to skip the arm, 1 on errors. Default: nothing.
wl_after_mount() { return 0; }

# wl_probe MNT: can this arm run the workload? Print why not and return 3
# to skip the arm (like an arm the kernel does not support), 1 on errors.
wl_probe() { return 0; }

# wl_prep MNT PHASES...: unmeasured preparation of what PHASES will read.
wl_prep() {
	BENCH_DIR=$1/bench TARGET=$1/bench/$FILE fio --output=/tmp/prep.out "$bench_wl/prep.fio" ||
		{ cat /tmp/prep.out; return 1; }
}

# wl_checks MNT PHASES...: the FIEMAP promises, one line per file:
# "label path min_extents max_extents(or -) min_shared_extents".
wl_checks() { echo "$FILE $1/bench/$FILE $MIN_EXTENTS ${MAX_EXTENTS:--} 0"; }

# wl_target MNT PHASE: the file PHASE reads or writes (fio's ${TARGET}).
wl_target() { echo "$1/bench/$FILE"; }


# wl_command ARM MNT PHASE OUT: the measured command of a command phase;
# writes its result to OUT, "name<TAB>value" lines (numbers where they are
# numbers). A non-zero status fails the run. No default command.
wl_command() { # arm mnt phase out
	echo "workload '$WORKLOAD' names $3 a command phase, but has no wl_command" >&2
	return 1
}

# wl_after_phase ARM REP PHASE MNT DIR: after each timed phase (outside its
# CPU window), e.g. to keep a per-phase file in DIR, the rep's raw directory
# raw/<arm>/rep<N>/, beside PHASE.json (the host collects the whole of raw/
# and reads only the .json files of the phases; reports/lab/wl_<kind>.py may
# read the others). Default: nothing.
wl_after_phase() { return 0; }


# ---- helpers for workloads' hooks ------------------------------------------

# bench_points VAR WHAT: the whole numbers listed in the variable VAR (a
# workload's points), in base 10, each once, in the order given. Prints why
# to stderr and fails on a word that is not one ("'x' is not WHAT"), a
# number given twice, or an empty list.
bench_points() { # var what
	local n seen=" "
	for n in ${!1}; do
		case $n in '' | *[!0-9]*) echo "bench: $1: '$n' is not $2" >&2; return 1 ;; esac
		n=$((10#$n))
		case $seen in *" $n "*) echo "bench: $1: $n twice" >&2; return 1 ;; esac
		seen+="$n "
		echo "$n"
	done
	[ "$seen" != " " ] || { echo "bench: $1 is empty" >&2; return 1; }
}

# Is PHASE a command phase of the workload?
is_command_phase() { # phase
	case " $(wl_command_phases) " in *" $1 "*) return 0 ;; esac
	return 1
}

# One measured phase: its job file is PHASE.fio, else KIND.fio for a phase
# named KIND-SOMETHING. Extra fio options after the json file. A command
# phase runs wl_command instead, its result going beside the json file's
# name: DIR/NAME.json -> DIR/NAME.tsv (no fio options).
run_phase() { # arm mnt phase json [fio options...]
	local arm=$1 mnt=$2 phase=$3 json=$4 job=$bench_wl/$3.fio
	shift 4
	if is_command_phase "$phase"; then
		ARM=$arm wl_command "$arm" "$mnt" "$phase" "${json%.json}.tsv"
		return
	fi
	[ -f "$job" ] || job=$bench_wl/${phase%%-*}.fio
	ARM=$arm BENCH_DIR=$mnt/bench TARGET=$(wl_target "$mnt" "$phase") \
		fio "$@" --output-format=json+ --output="$json" "$job"
}

# ---- bookkeeping ------------------------------------------------------------

# bench_init: the results directory $RESULTS/bench, the run's constant
# files and the state of the run (after bench_load_workload).
bench_init() {
	local p
	bench_out=$RESULTS/bench
	mkdir -p "$bench_out/raw" "$bench_out/profiles"
	: >"$bench_out/arms.tsv"
	: >"$bench_out/extents.tsv"
	: >"$bench_out/order.tsv"
	# The version of the files written here (facts.tsv, arms.tsv, extents.tsv,
	# order.tsv, cpu.tsv, ...); host and guest ship together, the host collects
	# only this format (reports/lab/runmodel.py).
	echo 3 >"$bench_out/format"
	: >"$bench_out/facts.tsv"
	: >"$bench_out/saves.tsv"
	: >"$bench_out/cpu.tsv"
	: >"$bench_out/cpu-windows.tsv"
	# the phases whose CPU window ends after a sync of the filesystem
	# (phase_writes), one per line
	: >"$bench_out/window-sync-phases"
	# The unit of /proc/stat's times (USER_HZ); the host assumes 100 without it.
	getconf CLK_TCK >"$bench_out/user-hz" 2>/dev/null || rm -f "$bench_out/user-hz"
	fio --version >"$bench_out/fio-version"
	echo "$MIN_EXTENTS" >"$bench_out/min-extents"
	bench_params >"$bench_out/params"
	bench_phases=$(wl_phases) && [ -n "$bench_phases" ] || { echo "bench: FAIL: workload '$WORKLOAD' has no phases"; exit 1; }
	profile_phase=$(wl_profile_phase)
	count_phases=$(wl_count_phases)
	command_phases=$(wl_command_phases)
	for p in $count_phases; do
		case " $bench_phases " in *" $p "*) ;; *) echo "bench: FAIL: count phase '$p' is not a phase of workload '$WORKLOAD'"; exit 1 ;; esac
	done
	for p in $command_phases; do
		case " $bench_phases " in *" $p "*) ;; *) echo "bench: FAIL: command phase '$p' is not a phase of workload '$WORKLOAD'"; exit 1 ;; esac
	done
	echo "$bench_phases" >"$bench_out/phases"
	echo "$command_phases" >"$bench_out/command-phases"
	echo "$profile_phase" >"$bench_out/profile-phase"
	bench_start=$(date +%s)
	nr_arms=$(echo $ARMS | wc -w)
	bench_total=$(( REPS * nr_arms + (PROFILE ? nr_arms : 0) ))
	done_runs=0
	done_at=0      # elapsed seconds when the last arm run ended
	preps=0 prep_secs=0	# PREP=once: arms prepared so far, and the time it took
	cur_arm="" cur_rep=""
	save_dev=/dev/vd${disk_letters[$nr_arms]}
	save_dir=/mnt/bench-saved
	PREP=${PREP:-once}
	case $PREP in once | each) ;; *) echo "bench: FAIL: PREP must be once or each, not '$PREP'"; exit 1 ;; esac
	echo "$PREP" >"$bench_out/prep-mode"
	declare -gA bench_prepared=() bench_skipped=()

	cpu_source=stat
	if [ -z "${PROC_STAT:-}" ] && read -r _ v </proc/schedstat 2>/dev/null &&
		case $v in 15 | 16 | 17) true ;; *) false ;; esac; then
		cpu_source=schedstat
	fi
	echo "$cpu_source" >"$bench_out/cpu-source"

	if [ "$cpu_source" = schedstat ]; then
		cpu_mark='cat /proc/schedstat'
		cpu_units_per_s=1000000000
	else
		cpu_mark='read l </proc/stat && echo "$l"'
		cpu_units_per_s=$(getconf CLK_TCK 2>/dev/null || echo 100)
	fi
	cpu_win_dir=/tmp/fio-cpu-window
	# The order of the arms in each repetition (bench_arm_order), recorded
	# so that the report can compare the ratio in each order.
	BENCH_ORDER=${BENCH_ORDER:-rotate}
	BENCH_ORDER_SEED=${BENCH_ORDER_SEED:-0}
	case $BENCH_ORDER in rotate | random | fixed) ;; *) echo "bench: FAIL: ORDER must be rotate, random or fixed, not '$BENCH_ORDER'"; exit 1 ;; esac
	printf '%s %s\n' "$BENCH_ORDER" "$BENCH_ORDER_SEED" >"$bench_out/order-rule"
}

# bench_arm_order REP: the arms of repetition REP, in the order they run.
# rotate (the default): rep 1 runs A B C, rep 2 B C A, rep 3 C A B, ...;
# with two arms the order alternates (A B, B A, ...), so that each arm
# comes first in half of the pairs and what one arm leaves behind (slab
# state, dirty pages of the save disk) does not always fall on the same
# one. random: a shuffle of the arms per rep, from BENCH_ORDER_SEED and
# the rep (the run records the seed, so the order can be rerun). fixed:
# A B C in every rep, as before.
bench_arm_order() { # rep
	local rep=$1
	# shellcheck disable=SC2086 # one arm per word
	case $BENCH_ORDER in
	fixed) echo $ARMS ;;
	rotate)
		echo $ARMS | awk -v r="$rep" '{ n = NF; s = (r - 1) % n
			for (i = 0; i < n; i++) printf "%s%s", $((s + i) % n + 1), (i < n - 1 ? " " : "\n") }' ;;
	random)
		echo $ARMS | awk -v seed="$BENCH_ORDER_SEED" -v r="$rep" '{
			srand(seed * 1000 + r); n = NF
			for (i = 1; i <= n; i++) a[i] = $i
			for (i = n; i > 1; i--) { j = int(rand() * i) + 1; t = a[i]; a[i] = a[j]; a[j] = t }
			for (i = 1; i <= n; i++) printf "%s%s", a[i], (i < n ? " " : "\n") }' ;;
	esac
}

# phase_writes JOBFILE: does the fio job write (rw= a write, trim or mixed
# kind)? The CPU window of such a phase ends after a sync of the
# filesystem, so that the work btrfs leaves to the transaction commit
# (the subvolume and extent trees, delayed references: the per-extent
# context items among them) is counted, not only fio's end_fsync.
phase_writes() { # jobfile
	grep -Eqi '^[[:space:]]*(rw|readwrite)[[:space:]]*=[[:space:]]*(write|randwrite|rw|readwrite|randrw|trim|randtrim|trimwrite)[[:space:]]*$' "$1"
}


# One line per phase: arm, repetition, phase, elapsed against the expected
# total. The expected total is the time of the finished arm runs plus the
# remaining ones at their average so far, and with PREP=once the arms not
# prepared yet at the average preparation so far (before the first ends:
# the workload's own estimates, EST_ARM_RUN_S and EST_PREP_S).
progress() { # phase text
	local el=$(( $(date +%s) - bench_start )) avg expect prep_avg=0 left_preps=0
	if [ "$PREP" = once ]; then
		left_preps=$(( nr_arms - preps - ${#bench_skipped[@]} ))
		if [ "$preps" -gt 0 ]; then prep_avg=$(( prep_secs / preps )); else prep_avg=$EST_PREP_S; fi
	fi
	if [ "$done_runs" -gt 0 ]; then
		avg=$(( (done_at - prep_secs) / done_runs ))
	elif [ "$PREP" = once ]; then
		avg=$EST_ARM_RUN_S
	else
		avg=$(( EST_ARM_RUN_S + EST_PREP_S ))
	fi
	expect=$(( done_at + (bench_total - done_runs) * avg + left_preps * prep_avg ))
	[ "$expect" -lt "$el" ] && expect=$el
	echo "LAB-PROGRESS [${el}s of ~${expect}s expected] arm $cur_arm, rep $cur_rep," \
		"phase $1 (arm run $(( done_runs < bench_total ? done_runs + 1 : bench_total ))/$bench_total)" >/dev/console
}

run_done() {
	done_runs=$((done_runs + 1))
	done_at=$(( $(date +%s) - bench_start ))
}

# The scratch disk of an arm: one per arm, in the order of ARMS, from vdd on;
# the save disk (PREP=once) is the one after them.
disk_letters=(d e f g h i j k l)
arm_dev() {
	local i=0 a
	for a in $ARMS; do
		[ "$a" = "$1" ] && { echo "/dev/vd${disk_letters[$i]}"; return; }
		i=$((i + 1))
	done
}

# The key mode the kernel gives new files of a mounted arm: btrfs says it
# in /proc/mounts (fscrypt_per_extent_keys or fscrypt_per_inode_keys, the
# series' key-mode mount options; with per-extent keys,
# fscrypt_extents_per_key=N when the extents of a key group are bounded,
# the key-group bound: N = 1 is one key per extent, mode
# per-extent-key; another N is mode per-extent-max-N; none shown is key
# groups without a bound, mode per-extent); otherwise the policy the kernel
# reports back decides (fscrypt's per-file keys are the per-inode mode).
# Prints "mode<TAB>evidence".
kernel_key_mode() { # mount-options policy-line
	local opts=",$1," policy=$2 n
	# no policy, no keys (btrfs shows its key-mode option on every mount)
	[ -n "$policy" ] || { printf 'none\tno encryption policy\n'; return; }
	case $opts in
	*,fscrypt_per_extent_keys,*)
		n=${opts#*,fscrypt_extents_per_key=}
		[ "$n" = "$opts" ] && { printf 'per-extent\t/proc/mounts: fscrypt_per_extent_keys\n'; return; }
		n=${n%%,*}
		if [ "$n" = 1 ]; then
			printf 'per-extent-key\t/proc/mounts: fscrypt_per_extent_keys,fscrypt_extents_per_key=1\n'
		else
			printf 'per-extent-max-%s\t/proc/mounts: fscrypt_per_extent_keys,fscrypt_extents_per_key=%s\n' "$n" "$n"
		fi
		return ;;
	*,fscrypt_per_inode_keys,*) printf 'per-inode\t/proc/mounts: fscrypt_per_inode_keys\n'; return ;;
	esac
	case $policy in
	*keys=per-file*) printf 'per-inode\tpolicy read back: %s\n' "$policy" ;;
	*) printf '%s\tpolicy read back: %s\n' "${policy##*keys=}" "$policy" ;;
	esac
}

# Make, mount and (for encrypted arms) set up encryption, then ask the
# workload whether the arm can run it. Prints a reason and returns 3 if the
# arm cannot run (kernel or filesystem lacks a feature), 1 on other errors.
# On success, appends what was done to $bench_out/facts.tsv (the host only reads
# it): the mkfs and mount commands, the mount options as /proc/mounts shows
# them, the tuning, the policy and the key mode the kernel reports.
# With restore=1 (PREP=once, after the arm was prepared): no mkfs, no
# probe; the device gets the saved image back and the key is added again.
setup_fs() { # arm rep dev mnt [restore]
	local arm=$1 rep=$2 dev=$3 mnt=$4 restore=${5:-0} opts err tune rc mkfs fs mounted policy="" km kopt=()
	arm_unsupported "$arm" && return 3
	opts=$(arm_mount_opts "$arm")
	fs=$(arm_fs "$arm")
	mkfs="$(arm_mkfs "$arm") $dev"
	umount -q "$mnt" 2>/dev/null
	if [ "$restore" = 1 ]; then
		restore_dev "$arm" "$dev" || return 1
	else
		$mkfs >/tmp/mkfs.log 2>&1 || { cat /tmp/mkfs.log; return 1; }
	fi
	if ! err=$(mount -t "$fs" ${opts:+-o "$opts"} "$dev" "$mnt" 2>&1); then
		echo "mount -o '$opts' failed: $err"
		[ -n "$opts" ] && return 3
		return 1
	fi
	mounted=$(awk -v m="$mnt" '$2 == m { o = $4 } END { print o }' /proc/mounts)
	tune=$(arm_tuning "$arm" "$(basename "$dev")")
	[ -z "$tune" ] || sh -c "$tune" || { echo "tuning failed: $tune"; return 1; }
	mkdir -p "$mnt/bench"
	if arm_encrypted "$arm"; then
		[ "$restore" = 1 ] && kopt=(-k)
		err=$(fscrypt_setup "${kopt[@]}" "$mnt" "$mnt/bench" 2>&1)
		case $? in
		0) policy=$err ;;
		3) echo "$fs on this kernel does not support fscrypt ($err)"; return 3 ;;
		*) echo "$err"; return 1 ;;
		esac
	fi
	km=$(kernel_key_mode "$mounted" "$policy")
	# An arm measured under another key mode than its name says would be
	# a fake result: fail loudly.
	if [ "${km%%$'\t'*}" != "$(arm_key_mode "$arm")" ]; then
		echo "bench: FAIL: $arm expects $(arm_key_mode "$arm") keys, the kernel gives ${km//$'\t'/ (}) (mount options $mounted)" >/dev/console
		echo "$arm expects $(arm_key_mode "$arm") keys, the kernel gives ${km%%$'\t'*}"
		return 1
	fi
	err=$(ARM=$arm wl_after_mount "$mnt" 2>&1)
	rc=$?
	[ $rc = 0 ] || { echo "$err"; return $rc; }
	if [ "$restore" = 0 ]; then
		err=$(ARM=$arm wl_probe "$mnt" 2>&1)
		rc=$?
		[ $rc = 0 ] || { echo "$err"; return $rc; }
	fi
	{
		printf '%s\t%s\t%s\t%s\n' "$arm" "$rep" fs "$fs" "$arm" "$rep" mkfs "$mkfs" \
			"$arm" "$rep" mount_cmd "mount -t $fs${opts:+ -o $opts} $dev $mnt" \
			"$arm" "$rep" mount_options "$mounted" "$arm" "$rep" tuning "$tune" \
			"$arm" "$rep" policy "$policy" "$arm" "$rep" key_mode "${km%%$'\t'*}" \
			"$arm" "$rep" key_mode_source "${km#*$'\t'}"
	} >>"$bench_out/facts.tsv"
	return 0
}

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# Prep and check every FIEMAP promise. Exits the whole run if one is broken.
prep() { # arm rep mnt phases...
	local arm=$1 rep=$2 mnt=$3
	shift 3
	progress "prep (unmeasured)"
	ARM=$arm wl_prep "$mnt" "$@" || { echo "bench: FAIL: prep failed for $arm rep $rep"; exit 1; }
	sync
	fiemap_check "$arm" "$rep" "$mnt" "$@"
}

# Every FIEMAP promise of the workload, one line each in extents.tsv.
fiemap_check() { # arm rep mnt phases...
	local arm=$1 rep=$2 mnt=$3 label path min max smin n shared line bad
	shift 3
	progress "FIEMAP check"
	# (no process substitution: the guest has no /dev/fd)
	wl_checks "$mnt" "$@" >/tmp/checks || { echo "bench: FAIL: $arm rep $rep: wl_checks failed"; exit 1; }
	[ -s /tmp/checks ] || { echo "bench: FAIL: $arm rep $rep: workload '$WORKLOAD' promises nothing to check"; exit 1; }
	while read -r label path min max smin; do
		line=$(extent_count -s "$path") || { echo "bench: FAIL: $arm rep $rep: FIEMAP of $path failed"; exit 1; }
		n=${line%% *}; shared=${line#* }; shared=${shared%% *}
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$arm" "$rep" "$label" "$n" "$shared" \
			"$min" "$max" "$smin" "$path" >>"$bench_out/extents.tsv"
		bad=""
		[ "$n" -lt "$min" ] && bad="$n extents, but workload '$WORKLOAD' promises at least $min"
		[ "$max" != - ] && [ "$n" -gt "$max" ] && bad="$n extents, but workload '$WORKLOAD' promises at most $max"
		[ "$shared" -lt "$smin" ] && bad="$shared shared extents (FIEMAP_EXTENT_SHARED), but workload '$WORKLOAD' promises at least $smin"
		if [ -n "$bad" ]; then
			echo "bench: FAIL: $arm rep $rep: $label ($path) has $bad"
			exit 1
		fi
	done </tmp/checks
}

# PREP=once: the save disk gets an ext4 with one sparse image per arm.
save_init() {
	mkdir -p "$save_dir"
	mkfs.ext4 -q -F "$save_dev" >/tmp/mkfs-save.log 2>&1 && mount -t ext4 "$save_dev" "$save_dir" ||
		{ cat /tmp/mkfs-save.log; echo "bench: FAIL: cannot make the save disk $save_dev"; exit 1; }
}

# Byte ranges ("START LENGTH") of the blocks an unmounted ext4 has in use:
# all of its blocks but the free ones dumpe2fs lists per group (the block
# bitmaps: superblock backups, descriptors, inode tables, journal, data).
ext4_used_ranges() { # dev
	dumpe2fs "$1" 2>/dev/null | awk '
		/^Block count:/ { count = $3 }
		/^Block size:/ { bs = $3 }
		/^  Free blocks: [0-9]/ {
			sub(/^  Free blocks: /, "")
			n = split($0, r, /, */)
			for (i = 1; i <= n; i++) {
				split(r[i], ab, "-")
				a = ab[1]; b = (2 in ab) ? ab[2] : ab[1]
				free[++nf] = a; freeend[nf] = b
			}
		}
		END {
			if (!count || !bs) exit 1
			pos = 0	# the first block not yet listed
			for (i = 1; i <= nf; i++) {
				if (free[i] > pos) printf "%d %d\n", pos * bs, (free[i] - pos) * bs
				pos = freeend[i] + 1
			}
			if (pos < count) printf "%d %d\n", pos * bs, (count - pos) * bs
		}'
}

# Save the unmounted device of an arm in a sparse image of the device's
# size, reading only what the filesystem can have written (reading all of
# a 2 GiB scratch disk took 170 s under TCG): ext4: its blocks in use
# (ext4_used_ranges); btrfs: the stripes of its chunks, the
# first MiB and the superblock mirror (devimage btrfs-ranges, on a
# read-only mount, so the list is that of the unmounted filesystem);
# blocks of zeros stay holes. The device was all zeros before the mkfs.
save_dev_image() { # arm dev mnt
	local arm=$1 dev=$2 mnt=$3 img=$save_dir/$1.img t0=$SECONDS opts
	# the arm's own mount options too: a lab prototype's format may need
	# them to be read at all (btrfs-extent-ctxitem)
	opts=$(arm_mount_opts "$arm")
	case $(arm_fs "$arm") in
	ext4)
		{ ext4_used_ranges "$dev" >/tmp/ranges && devimage save "$dev" "$img" /tmp/ranges; } \
			>/tmp/devimage.log 2>&1 ;;
	btrfs)
		{ mount -t btrfs -o "ro${opts:+,$opts}" "$dev" "$mnt" && devimage btrfs-ranges "$mnt" >/tmp/ranges &&
			umount "$mnt" && devimage save "$dev" "$img" /tmp/ranges; } >/tmp/devimage.log 2>&1 ;;
	*)
		devimage save "$dev" "$img" >/tmp/devimage.log 2>&1 ;;
	esac || { cat /tmp/devimage.log; echo "bench: FAIL: cannot save $dev to $img"; exit 1; }
	printf '%s\t%s\t%s\t%s\n' "$1" saved "$(du -k "$img" | cut -f1)" "$(( SECONDS - t0 ))" >>"$bench_out/saves.tsv"
}

# The device of an arm back to the saved image, exactly (devimage restore:
# zero the device, write the image's data blocks, O_DIRECT, so nothing of
# it stays in the page cache).
restore_dev() { # arm dev
	local img=$save_dir/$1.img t0=$SECONDS
	[ -f "$img" ] || { echo "no saved image $img"; return 1; }
	devimage restore "$img" "$2" >/tmp/devimage.log 2>&1 || { cat /tmp/devimage.log; return 1; }
	printf '%s\t%s\t%s\t%s\n' "$1" restored "$(du -k "$img" | cut -f1)" "$(( SECONDS - t0 ))" >>"$bench_out/saves.tsv"
}

# PREP=once, the first run of an arm: make, probe, prep every phase's
# files, check them, save the device. Returns 1 if the arm is skipped.
prepare_arm() { # arm
	local arm=$1 dev mnt=/mnt/bench-$1 t0
	t0=$(date +%s)
	dev=$(arm_dev "$arm")
	mkdir -p "$mnt"
	try_setup "$arm" prepare "$dev" "$mnt" || return 1
	# shellcheck disable=SC2086 # one phase name per word
	prep "$arm" prepare "$mnt" $bench_phases $profile_phase
	umount "$mnt" || { echo "bench: FAIL: cannot unmount $mnt after prep"; exit 1; }
	progress "save the prepared filesystem"
	save_dev_image "$arm" "$dev" "$mnt"
	bench_prepared[$arm]=1
	preps=$((preps + 1))
	prep_secs=$(( prep_secs + $(date +%s) - t0 ))
}

# Make the arm's filesystem ready for one repetition (timed or profiled):
# PREP=each: fresh mkfs and prep of PHASES; PREP=once: prepare the arm the
# first time, then restore and check. Returns 1 if the arm is skipped.
ready_fs() { # arm rep dev mnt phases...
	local arm=$1 rep=$2 dev=$3 mnt=$4
	shift 4
	if [ "$PREP" = each ]; then
		try_setup "$arm" "$rep" "$dev" "$mnt" || return 1
		prep "$arm" "$rep" "$mnt" "$@"
		return 0
	fi
	if [ -z "${bench_prepared[$arm]:-}" ]; then
		prepare_arm "$arm" || return 1
	fi
	progress "restore the prepared filesystem"
	try_setup "$arm" "$rep" "$dev" "$mnt" 1 || return 1
	fiemap_check "$arm" "$rep" "$mnt" "$@"
}

# Where the CPU time of a phase comes from (cpu_source, recorded in
# cpu-source): "schedstat" when the kernel has /proc/schedstat with the
# per-CPU line this driver knows (versions 15 to 17: the 7th number after
# "cpuN" is rq_cpu_time, the nanoseconds every task but idle ran on that
# CPU, kworkers included), else "stat": /proc/stat's ticks, which sample
# one task per tick and so carry +-1 tick of noise per tick-length of run
# time switching tasks. cpu.tsv is in nanoseconds or in USER_HZ ticks.

# The CPU time all CPUs spent so far into cpu_ticks, in cpu_source's unit.
# No fork, so that the reading costs next to nothing inside the window.
# cpu_ticks is empty when the file is not there or not as expected: the
# phase then records nothing. (PROC_STAT, PROC_SCHEDSTAT: other files, for
# the host's tests.)
cpu_now() {
	if [ "$cpu_source" = schedstat ]; then
		cpu_schedstat "${PROC_SCHEDSTAT:-/proc/schedstat}"
	else
		cpu_stat "${PROC_STAT:-/proc/stat}"
	fi
}

# /proc/stat: user + nice + system + irq + softirq of the cpu line (idle,
# iowait and steal do not count), in USER_HZ ticks.
cpu_stat() { # file
	local label user nice system irq softirq v
	cpu_ticks=
	[ -r "$1" ] || return 0
	read -r label user nice system _ _ irq softirq _ <"$1" 2>/dev/null || return 0
	[ "$label" = cpu ] || return 0
	for v in "$user" "$nice" "$system" "$irq" "$softirq"; do
		case $v in '' | *[!0-9]*) return 0 ;; esac
	done
	cpu_ticks=$((user + nice + system + irq + softirq))
}

# /proc/schedstat: rq_cpu_time summed over the cpuN lines, in ns. A task's
# time is added when it leaves the CPU; the reader is the running task,
# and the phase's fio thread sleeps while its prerun/postrun runs.
cpu_schedstat() { # file
	local label t sum=0 n=0
	cpu_ticks=
	[ -r "$1" ] || return 0
	while read -r label _ _ _ _ _ _ t _; do
		case $label in cpu[0-9]*) ;; *) continue ;; esac
		case $t in '' | *[!0-9]*) return 0 ;; esac
		sum=$((sum + t)) n=$((n + 1))
	done <"$1"
	[ "$n" -gt 0 ] && cpu_ticks=$sum
	return 0
}

# The CPU window of a timed phase is fio's I/O: fio runs cpu_mark as the
# job's exec_prerun (after its start-up: exec, job parsing, file setup,
# right before the first I/O) and as its exec_postrun (after the last I/O
# and end_fsync, before its exit), each copying the counters' file to
# JOB.prerun.txt / JOB.postrun.txt in fio's working directory. fio's
# start-up and exit are the same work for every arm, and under TCG or
# icount they took about as long as a random-read phase's I/O (0.5-0.8 s
# of 1 s): around the whole fio process they diluted every ratio toward 1.
# A job file of several jobs (no single prerun and postrun) falls back to
# the window around the fio process; cpu-windows.tsv says which window
# each phase got (arm, rep, phase, io|process, CPU time around the process).

# the CPU time of a saved counters' file into cpu_ticks, empty if bad
cpu_of_file() { # file
	if [ "$cpu_source" = schedstat ]; then
		cpu_schedstat "$1"
	else
		cpu_stat "$1"
	fi
}

# A timed command phase: wl_command after sync and dropped caches, its
# result DIR/PHASE.tsv, to which the CPU time of all CPUs around the whole
# command is added (cpu_units in cpu_source's unit, cpu_units_per_s); no
# line in cpu.tsv, which has fio's I/O windows only.
run_command_phase() { # arm rep mnt dir phase
	local arm=$1 rep=$2 mnt=$3 dir=$4 phase=$5 c0 c1
	drop_caches
	cpu_now
	c0=$cpu_ticks
	run_phase "$arm" "$mnt" "$phase" "$dir/$phase.json" >/tmp/command.out 2>&1 ||
		{ echo "bench: command phase $phase failed for $arm rep $rep"; cat /tmp/command.out; exit 1; }
	cpu_now
	c1=$cpu_ticks
	[ -s "$dir/$phase.tsv" ] || { echo "bench: FAIL: command phase $phase of $arm rep $rep wrote no $dir/$phase.tsv"; cat /tmp/command.out; exit 1; }
	if [ -n "$c0" ] && [ -n "$c1" ]; then
		printf 'cpu_units\t%s\ncpu_units_per_s\t%s\ncpu_source\t%s\n' "$((c1 - c0))" \
			"$cpu_units_per_s" "$cpu_source" >>"$dir/$phase.tsv"
	fi
}

run_phases() { # arm rep mnt dir
	local arm=$1 rep=$2 mnt=$3 dir=$4 phase c0 c1 p0 p1 win pre post post_mark jobf
	mkdir -p "$dir"
	for phase in $bench_phases; do
		progress "$phase"
		if is_command_phase "$phase"; then
			run_command_phase "$arm" "$rep" "$mnt" "$dir" "$phase"
			wl_after_phase "$arm" "$rep" "$phase" "$mnt" "$dir" ||
				{ echo "bench: FAIL: wl_after_phase $phase failed for $arm rep $rep"; exit 1; }
			continue
		fi
		rm -rf "$cpu_win_dir" && mkdir -p "$cpu_win_dir" ||
			{ echo "bench: FAIL: cannot make $cpu_win_dir"; exit 1; }
		post_mark=$cpu_mark
		jobf=$bench_wl/$phase.fio
		[ -f "$jobf" ] || jobf=$bench_wl/${phase%%-*}.fio
		if phase_writes "$jobf"; then
			post_mark="sync -f $mnt && $cpu_mark"
			grep -qx "$phase" "$bench_out/window-sync-phases" 2>/dev/null ||
				echo "$phase" >>"$bench_out/window-sync-phases"
		fi
		drop_caches
		cpu_now
		c0=$cpu_ticks
		(cd "$cpu_win_dir" && run_phase "$arm" "$mnt" "$phase" "$dir/$phase.json" \
			--exec_prerun="$cpu_mark" --exec_postrun="$post_mark") ||
			{ echo "bench: fio $phase failed for $arm rep $rep"; cat "$dir/$phase.json"; exit 1; }
		cpu_now
		c1=$cpu_ticks
		# the I/O window, when the job file had exactly one job
		p0="" p1=""
		pre=$(ls "$cpu_win_dir"/*.prerun.txt 2>/dev/null)
		post=$(ls "$cpu_win_dir"/*.postrun.txt 2>/dev/null)
		if [ "$(echo "$pre" | grep -c .)" = 1 ] && [ "$(echo "$post" | grep -c .)" = 1 ]; then
			cpu_of_file "$pre"; p0=$cpu_ticks
			cpu_of_file "$post"; p1=$cpu_ticks
		fi
		# arm, rep, phase, CPU ticks of the phase (nothing if unreadable)
		if [ -n "$p0" ] && [ -n "$p1" ]; then
			win=io
			printf '%s\t%s\t%s\t%s\n' "$arm" "$rep" "$phase" "$((p1 - p0))" >>"$bench_out/cpu.tsv"
		elif [ -n "$c0" ] && [ -n "$c1" ]; then
			win=process
			printf '%s\t%s\t%s\t%s\n' "$arm" "$rep" "$phase" "$((c1 - c0))" >>"$bench_out/cpu.tsv"
		else
			win=""
		fi
		if [ -n "$win" ]; then
			printf '%s\t%s\t%s\t%s\t%s\n' "$arm" "$rep" "$phase" "$win" \
				"$([ -n "$c0" ] && [ -n "$c1" ] && echo $((c1 - c0)))" >>"$bench_out/cpu-windows.tsv"
		fi
	wl_after_phase "$arm" "$rep" "$phase" "$mnt" "$dir" ||
			{ echo "bench: FAIL: wl_after_phase $phase failed for $arm rep $rep"; exit 1; }
	done
}

# Try the arm; on "cannot run" mark it skipped for the rest of the run.
try_setup() { # arm rep dev mnt [restore]
	local arm=$1 rep=$2 why rc
	why=$(setup_fs "$arm" "$rep" "$3" "$4" "${5:-0}")
	rc=$?
	why=${why//$'\n'/ }    # one line: it goes into arms.tsv and the report
	case $rc in
	0) return 0 ;;
	3) bench_skipped[$arm]=$why
	   printf '%s\tskipped\t%s\n' "$arm" "$why" >>"$bench_out/arms.tsv"
	   if [ "$rep" = prepare ]; then
		[ "$cur_rep" = profiled ] && bench_total=$(( bench_total - 1 )) ||
			bench_total=$(( bench_total - (REPS - ${cur_rep%%/*} + 1) - (PROFILE ? 1 : 0) ))
	   elif [ "$rep" = profiled ]; then
		bench_total=$(( bench_total - 1 ))
	   else
		bench_total=$(( bench_total - (REPS - rep + 1) - (PROFILE ? 1 : 0) ))
	   fi
	   progress "skipped: $why"; return 1 ;;
	*) echo "bench: cannot set up $arm on $3: $why"; exit 1 ;;
	esac
}

# One timed repetition of one arm.
timed_run() { # arm rep
	local arm=$1 rep=$2 dev mnt=/mnt/bench-$1
	cur_arm=$arm cur_rep="$rep/$REPS"
	dev=$(arm_dev "$arm")
	mkdir -p "$mnt"
	[ -n "${bench_skipped[$arm]:-}" ] && return
	# shellcheck disable=SC2086 # one phase name per word
	ready_fs "$arm" "$rep" "$dev" "$mnt" $bench_phases || return
	run_phases "$arm" "$rep" "$mnt" "$bench_out/raw/$arm/rep$rep"
	printf '%s\t%s\n' "$arm" "$rep" >>"$bench_out/order.tsv"
	umount "$mnt"
	run_done
}

# A slabinfo snapshot of the caches the report looks at.
slab_snapshot() { # file
	grep -E '^(fscrypt|btrfs|ext4|kmalloc-128|slabinfo|# name)' /proc/slabinfo >"$1"
}

# ---- counting fscrypt events through tracefs (the count passes) ----------

tfs=/sys/kernel/tracing
# The events counted; those this kernel lacks are left out (and so count 0).
count_events="fscrypt_extent_lookup fscrypt_extent_key_setup fscrypt_derive_key
	fscrypt_key_slot_program fscrypt_key_slot_evict fscrypt_extent_group_start"

# Record the fscrypt events into an empty trace buffer of 16 MiB per CPU
# (a fragmented read of 17408 extents writes about 3 MiB of events).
trace_start() {
	local e
	echo 0 >"$tfs/tracing_on" && echo >"$tfs/trace" || return 1
	[ "$(cat "$tfs/buffer_size_kb")" -ge 16384 ] 2>/dev/null || echo 16384 >"$tfs/buffer_size_kb" || return 1
	for e in $count_events; do
		[ -e "$tfs/events/fscrypt/$e/enable" ] && { echo 1 >"$tfs/events/fscrypt/$e/enable" || return 1; }
	done
	echo 1 >"$tfs/tracing_on"
}

# Stop recording and print "phase<TAB>counter<TAB>value" lines: lookups
# (and those that derived a key), key setups that derived a key or found it
# cached (fscrypt_extent_key_setup), HKDF derivations (all, and per HKDF
# context), key-slot programs and evictions, key-group starts per reason,
# and the events the buffer lost (must be 0 for the counts to be whole).
trace_counts() { # phase
	local e
	echo 0 >"$tfs/tracing_on"
	for e in $count_events; do
		[ -e "$tfs/events/fscrypt/$e/enable" ] && echo 0 >"$tfs/events/fscrypt/$e/enable"
	done
	{
		cat "$tfs/trace"
		cat "$tfs"/per_cpu/cpu*/stats
	} | awk -v phase="$1" '
		function field(name) {	# value of " name=" on this line, or ""
			if (!match($0, " " name "=[^ ]*")) return ""
			return substr($0, RSTART + length(name) + 2, RLENGTH - length(name) - 2)
		}
		/^overrun: / || /^dropped events: / { n["lost_events"] += $NF; next }
		/^#/ || !match($0, / fscrypt_[a-z_]+: /) { next }
		{ ev = substr($0, RSTART + 1, RLENGTH - 3) }
		ev == "fscrypt_extent_lookup" { n["lookups"]++; if (field("derived") == "1") n["lookups_derived"]++ }
		ev == "fscrypt_extent_key_setup" && field("ret") == "0" {
			n[field("cached") == "1" ? "key_setups_cached" : "key_setups_derived"]++
		}
		ev == "fscrypt_derive_key" { n["derivations"]++; n["derivations_context_" field("context")]++ }
		ev == "fscrypt_key_slot_program" { n["slot_programs"]++ }
		ev == "fscrypt_key_slot_evict" { n["slot_evicts"]++ }
		ev == "fscrypt_extent_group_start" { n["group_starts"]++; n["group_starts_" field("reason")]++ }
		END {
			split("lookups lookups_derived key_setups_derived key_setups_cached derivations slot_programs slot_evicts group_starts lost_events", always, " ")
			for (i in always) n[always[i]] += 0
			for (k in n) printf "%s\t%s\t%d\n", phase, k, n[k]
		}' | LC_ALL=C sort
}

# One profiled repetition: the profile phase twice, from a cold cache
# each time: (1) under bpftrace and perf stat, with slab snapshots before and
# after it (memory after the read phase); (2) under perf record -g, for the
# flame graphs (a separate pass, so that sampling does not disturb the
# bpftrace latencies), PROFILE_PASSES times, each from a cold cache, their
# samples put together; then (3) each count phase of the workload once, with
# the fscrypt events counted through tracefs (profiles/<arm>/counts.tsv).
# Its numbers are not used for the timed tables.
profiled_run() { # arm
	local arm=$1 dev mnt=/mnt/bench-$1 pdir=$bench_out/profiles/$1 bt ph=$profile_phase cph need
	cur_arm=$arm cur_rep=profiled
	[ -n "${bench_skipped[$arm]:-}" ] && return
	dev=$(arm_dev "$arm")
	mkdir -p "$pdir" "$mnt"
	# the profile phase and the count phases, each once
	need=$(for cph in $ph $count_phases; do echo "$cph"; done | awk '!seen[$0]++' | xargs)
	# shellcheck disable=SC2086 # one phase name per word
	ready_fs "$arm" profiled "$dev" "$mnt" $need || return
	progress "profile: $ph under bpftrace and perf stat"
	bpftrace -f json -o "$pdir/bpftrace.json" /job/profiles/bench.bt >"$pdir/bpftrace.err" 2>&1 &
	bt=$!
	# bpftrace reports its probes before all are live; wait for it.
	for _ in $(seq 120); do grep -q attached_probes "$pdir/bpftrace.json" 2>/dev/null && break; sleep 1; done
	sleep 10
	drop_caches
	slab_snapshot "$pdir/slab-before.txt"
	perf stat -o "$pdir/perf-stat.txt" -e task-clock,context-switches,cpu-migrations,page-faults \
		-a -- /job/run --phase "$arm" "$mnt" "$ph" "$pdir/$ph.json" >/dev/null 2>&1
	slab_snapshot "$pdir/slab.txt"
	kill -INT "$bt"; wait "$bt"
	: >"$pdir/perf-record.err"
	rm -f "$pdir/perf-script.txt.gz"
	for pass in $(seq "${PROFILE_PASSES:-1}"); do
		progress "profile: $ph under perf record -g (pass $pass of ${PROFILE_PASSES:-1})"
		drop_caches
		perf record -e cpu-clock -F 499 -g -a -o /tmp/perf.data -- \
			/job/run --phase "$arm" "$mnt" "$ph" "$pdir/$ph-perf-record.json" >>"$pdir/perf-record.err" 2>&1
		# gzip members appended one after the other read back as one stream
		perf script -i /tmp/perf.data 2>>"$pdir/perf-record.err" | gzip >>"$pdir/perf-script.txt.gz"
		rm -f /tmp/perf.data
	done
	for cph in $count_phases; do
		progress "count: $cph with the fscrypt events traced (tracefs)"
		drop_caches
		trace_start || { echo "bench: FAIL: cannot record fscrypt events in $tfs"; exit 1; }
		run_phase "$arm" "$mnt" "$cph" "$pdir/count-$cph.json" ||
			{ echo "bench: fio $cph failed for $arm (count pass)"; cat "$pdir/count-$cph.json"; exit 1; }
		trace_counts "$cph" >>"$pdir/counts.tsv"
	done
	umount "$mnt"
	run_done
}

# bench_main: every timed repetition of every arm, interleaved, then the
# profiled ones (after bench_init).
bench_main() {
	local rep arm n
	if [ "$PREP" = once ]; then save_init; fi
	for rep in $(seq 1 "$REPS"); do
		for arm in $(bench_arm_order "$rep"); do
			timed_run "$arm" "$rep"
		done
	done
	if [ "${PROFILE:-0}" = 1 ]; then
		for arm in $ARMS; do
			profiled_run "$arm"
		done
	fi
	# An arm that is neither skipped nor measured in every rep means that this
	# script went wrong (e.g. a function aborted by an expansion error, which
	# does not stop the script): fail the run rather than report it half done.
	for arm in $ARMS; do
		[ -n "${bench_skipped[$arm]:-}" ] && continue
		n=$(awk -F'\t' -v a="$arm" '$1 == a' "$bench_out/order.tsv" 2>/dev/null | wc -l)
		if [ "$n" != "$REPS" ]; then
			echo "bench: FAIL: $arm was not skipped, but measured in $n of $REPS reps"
			exit 1
		fi
		printf '%s\tmeasured\t\n' "$arm" >>"$bench_out/arms.tsv"
	done
	cur_arm=- cur_rep=-
	progress "done"
}
