#!/bin/bash
# Host side of `make reliability` (issue #14): the reliability figures of the
# series on the debug kernel (KASAN, lockdep), from repeated randomized
# trials, in one table.
#
# Parts, each its own driver with its own report directory:
#
#   fuzz      tests/run-fuzz.sh      FUZZ_IMAGES mutated encrypted images
#   powercut  tests/run-powercut.sh  POWERCUT_CUTS SIGKILLs of QEMU during
#                                    fsynced encrypted writes
#   powercut-rekey                   POWERCUT_CUTS SIGKILLs of QEMU during
#             tests/run-powercut.sh  rekeys of a subvolume between two
#                                    master keys and fsynced writes under
#                                    the new key (POWERCUT_BIN: the guest
#                                    program btrfs_fscrypt_rekey_powercut)
#   keyload   tests/run-keyload.sh   key removal and re-adding under load for
#                                    KEYLOAD_SECONDS per key mode
#   stress    tests/run-stress.sh    random operations beside balance, scrub
#                                    and drop_caches for STRESS_SECONDS, then
#                                    scrub, btrfs check and the raw-device
#                                    scan for plaintext
#   rekey-adversary                  rekeys of a subvolume in a loop for
#             tests/run-rekey-adversary.sh  REKEY_ADVERSARY_SECONDS beside
#                                    tasks (some unprivileged) that hold
#                                    inodes, set policies, rename, unlink,
#                                    write, reflink, remove keys and
#                                    snapshot; then every name on the
#                                    device against the OpenSSL model
#   logwrites tests/run-logwrites.sh an encrypted workload (two master
#                                    keys, compression, a rekey) recorded
#                                    with dm-log-writes and replayed to
#                                    every flush, FUA and mark: fsynced
#                                    files and names intact, btrfs check
#                                    clean at each (LOGWRITES_POINTS)
#
# Each driver writes <part>/figures.tsv (key TAB value) and exits 0 when the
# part is clean, 1 when it found a problem, 2 on a setup error. This script
# runs the parts one after the other (or RELIABILITY_JOBS at once: each is
# one VM), then writes summary.md and summary.tsv into the run directory and
# prints the table.
#
# Environment:
#   RELIABILITY_PARTS  parts to run (default "fuzz powercut powercut-rekey
#                      keyload stress rekey-adversary logwrites")
#   RELIABILITY_OUT    run directory (default build/reliability/<date>-<time>,
#                      linked from build/reliability/latest)
#   RELIABILITY_JOBS   parts run at once (default 1; each part is one VM
#                      with 2 vCPUs, so more than 1 only pays on a bigger
#                      machine, and stretches every part's duration)
#   RELIABILITY_REPORT=DIR  run nothing: rebuild DIR's table
#   RELIABILITY_FROM_<PART>=DIR  take that part from an earlier run of its
#                      driver instead of running it (DIR is linked, and the
#                      table says so); e.g. RELIABILITY_FROM_FUZZ=build/reliability/fuzz-latest
#                      (<PART> in capitals, '-' as '_': RELIABILITY_FROM_POWERCUT_REKEY)
#   FUZZ_REPLAY, FUZZ_REPORT  handed to tests/run-fuzz.sh alone (a replay)
#   and each driver's own variables (see each script).
#
# Exit status: 0 when every part ran and was clean, 1 otherwise, 2 on a
# usage error.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
die() { echo "run-reliability.sh: $*" >&2; exit 2; }

if [ -n "${FUZZ_REPLAY:-}" ] || [ -n "${FUZZ_REPORT:-}" ]; then
	exec "$top/tests/run-fuzz.sh"
fi

all_parts="fuzz powercut powercut-rekey keyload stress rekey-adversary logwrites"
declare -A driver=([fuzz]=run-fuzz.sh [powercut]=run-powercut.sh
	[powercut-rekey]=run-powercut.sh [keyload]=run-keyload.sh
	[stress]=run-stress.sh [rekey-adversary]=run-rekey-adversary.sh
	[logwrites]=run-logwrites.sh)
declare -A outvar=([fuzz]=FUZZ_RUN_OUT [powercut]=POWERCUT_OUT
	[powercut-rekey]=POWERCUT_OUT [keyload]=KEYLOAD_OUT [stress]=STRESS_OUT
	[rekey-adversary]=REKEY_ADVERSARY_OUT [logwrites]=LOGWRITES_OUT)
# what a part's driver gets besides its output directory
declare -A partenv=([powercut-rekey]=POWERCUT_BIN=$build/tests/powercut/btrfs_fscrypt_rekey_powercut)

if [ -n "${RELIABILITY_REPORT:-}" ]; then
	out=$(cd "$RELIABILITY_REPORT" 2>/dev/null && pwd) || die "no run directory $RELIABILITY_REPORT"
	parts=$(cat "$out/parts" 2>/dev/null) || die "$out has no parts file: not a run directory of this script"
else
	parts=${RELIABILITY_PARTS:-$all_parts}
	for p in $parts; do
		[ -n "${driver[$p]:-}" ] || die "unknown part '$p' (parts: $all_parts)"
	done
	out=${RELIABILITY_OUT:-$build/reliability/$(date +%Y-%m-%d-%H%M%S)}
	mkdir -p "$out" || die "cannot create $out"
	out=$(cd "$out" && pwd)
	[ -n "${RELIABILITY_OUT:-}" ] || ln -sfn "$(basename "$out")" "$build/reliability/latest"
	echo "$parts" >"$out/parts"
fi

# ---- running the parts ---------------------------------------------------------

run_part() { # part
	local p=$1 from var start rc envs
	var=RELIABILITY_FROM_${p^^}
	var=${var//-/_}
	from=${!var:-}
	if [ -n "$from" ]; then
		from=$(cd "$from" 2>/dev/null && pwd) || { echo "2" >"$out/$p.rc"; echo "$p: no directory ${!var}" >"$out/$p.log"; return; }
		ln -sfn "$from" "$out/$p"
		echo "from $from" >"$out/$p.source"
		# an earlier run's verdict: its figures say what it found
		echo "-" >"$out/$p.rc"
		return
	fi
	if [ ! -x "$top/tests/${driver[$p]}" ]; then
		echo "127" >"$out/$p.rc"
		echo "tests/${driver[$p]} does not exist in this tree" >"$out/$p.log"
		return
	fi
	start=$(date +%s)
	envs=("${outvar[$p]}=$out/$p")
	[ -z "${partenv[$p]:-}" ] || envs+=("${partenv[$p]}")
	env "${envs[@]}" "$top/tests/${driver[$p]}" >"$out/$p.log" 2>&1
	rc=$?
	echo "$rc" >"$out/$p.rc"
	echo "ran $(date -u -d "@$start" +%Y-%m-%dT%H:%M:%SZ), $(( $(date +%s) - start )) s" >"$out/$p.source"
}

if [ -z "${RELIABILITY_REPORT:-}" ]; then
	jobs_max=${RELIABILITY_JOBS:-1}
	case $jobs_max in '' | *[!0-9]* | 0) die "RELIABILITY_JOBS must be a positive number" ;; esac
	for p in $parts; do
		while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
			wait -n
		done
		echo "[reliability $(date +%H:%M:%S)] $p: starting (log: $out/$p.log)"
		( run_part "$p"; echo "[reliability $(date +%H:%M:%S)] $p: done, exit $(cat "$out/$p.rc")" ) &
	done
	wait
fi

# ---- the table -------------------------------------------------------------------

fig() { # part key
	sed -n "s/^$2\t//p" "$out/$1/figures.tsv" 2>/dev/null | head -n 1
}
val() { local v; v=$(fig "$1" "$2"); echo "${v:--}"; }
num() { local v; v=$(fig "$1" "$2"); case $v in '' | *[!0-9]*) echo 0 ;; *) echo "$v" ;; esac; }
dur() { # seconds
	case $1 in '' | *[!0-9]*) echo "-" ;; *) echo "$(($1 / 60)) min $(($1 % 60)) s" ;; esac
}

ok=1
rows=
: >"$out/summary.tsv"
for p in $parts; do
	rc=$(cat "$out/$p.rc" 2>/dev/null || echo 127)
	case $rc in
	0) result=PASS ;;
	1) result=FAIL ;;
	127) result="NOT RUN ($(cat "$out/$p.log" 2>/dev/null))" ;;
	-) result="from an earlier run" ;;
	*) result="ERROR (exit $rc; see $out/$p.log)" ;;
	esac
	[ -f "$out/$p/figures.tsv" ] || { [ "$rc" = 127 ] || result+=", no figures.tsv"; }
	# an earlier run counts as clean only when its figures say so below
	[ "$rc" = 0 ] || [ "$rc" = - ] || ok=0
	case $p in
	fuzz)
		what="$(val fuzz images) images ($(val fuzz mounted) mounted)"
		checked="$(val fuzz clean_results) clean results; control file failures: $(val fuzz control_failures)"
		clean="$(val fuzz clean_errors)"
		lost="$(val fuzz bugs) bugs"
		bad=$(( $(num fuzz bugs) + $(num fuzz control_failures) )) ;;
	powercut | powercut-rekey)
		what="$(val "$p" cuts) cuts ($(val "$p" boots) boots)"
		checked="$(val "$p" fsynced_bytes_checked) fsynced bytes in $(val "$p" fsynced_records) records; btrfs check: $(val "$p" check_runs) runs, $(val "$p" check_errors) with errors"
		clean="-"
		lost="$(val "$p" bytes_lost) bytes lost"
		bad=$(( $(num "$p" bytes_lost) + $(num "$p" check_errors) )) ;;
	keyload)
		what="$(val keyload cycles) key removal cycles ($(val keyload removals_busy) busy, $(val keyload removals_complete) complete)"
		checked="$(val keyload fsynced_bytes_checked) fsynced bytes; ENOKEY seen $(val keyload enokey_seen) times"
		clean="-"
		lost="$(val keyload bytes_lost) bytes lost"
		bad=$(( $(num keyload bytes_lost) )) ;;
	stress)
		what="$(dur "$(fig stress seconds)") of $(val stress ops) operations, $(val stress balances) balances, $(val stress scrubs) scrubs"
		checked="$(val stress files_checked) files, $(val stress mismatches) mismatches; scrub errors $(val stress scrub_errors); btrfs check errors $(val stress check_errors)"
		clean="-"
		lost="$(val stress leak_hits) plaintext markers on the device (control marker found: $(val stress control_found))"
		bad=$(( $(num stress mismatches) + $(num stress scrub_errors) +
			$(num stress check_errors) + $(num stress leak_hits) ))
		[ "$(fig stress control_found)" = 1 ] || bad=$((bad + 1)) ;;
	rekey-adversary)
		what="$(dur "$(fig rekey-adversary seconds)") of adversary: $(val rekey-adversary rekeys_completed) rekeys completed of $(val rekey-adversary rekeys_tried) tried, $(val rekey-adversary ops) operations"
		checked="$(val rekey-adversary names_checked) names on the device, $(val rekey-adversary files_checked) files and symlinks by path; btrfs check clean: $(val rekey-adversary check_clean)"
		clean="rekeys refused: $(val rekey-adversary rekeys_busy) EBUSY, $(val rekey-adversary rekeys_enokey) ENOKEY"
		lost="$(val rekey-adversary failures) failures ($(val rekey-adversary live_failures) during the run), $(val rekey-adversary aborts) transaction aborts, read-only: $(val rekey-adversary went_ro)"
		bad=$(( $(num rekey-adversary failures) + $(num rekey-adversary live_failures) +
			$(num rekey-adversary aborts) + $(num rekey-adversary went_ro) +
			$(num rekey-adversary kmsg_bad) ))
		[ "$(fig rekey-adversary check_clean)" = 1 ] || bad=$((bad + 1))
		[ "$(num rekey-adversary rekeys_completed)" != 0 ] || bad=$((bad + 1)) ;;
	logwrites)
		what="$(val logwrites entries) log entries replayed, $(val logwrites points_checked) states ($(val logwrites points_mode) points)"
		checked="$(val logwrites marks_checked) of $(val logwrites marks) marks and $(val logwrites flush_points_checked) flush/FUA points ($(val logwrites flush_points) in the log, $(val logwrites flush_points_merged) the same state as the next, $(val logwrites flush_points_before_mkfs) before mkfs), $(val logwrites files_checked) file checks (controls found: $(val logwrites controls_ok)); btrfs check clean: $(val logwrites check_clean) ($(val logwrites check_runs) runs)"
		clean="-"
		lost="$(val logwrites lost) files lost, $(val logwrites name_errors) name errors, $(val logwrites mount_failures) mount failures, $(val logwrites kmsg_bad) bad kernel lines"
		bad=$(( $(num logwrites lost) + $(num logwrites name_errors) +
			$(num logwrites mount_failures) + $(num logwrites check_errors) +
			$(num logwrites kmsg_bad) ))
		[ "$(fig logwrites check_clean)" = 1 ] || bad=$((bad + 1))
		[ "$(fig logwrites controls_ok)" = 1 ] || bad=$((bad + 1))
		if [ "$(num logwrites marks_checked)" = 0 ] ||
			[ "$(fig logwrites marks_checked)" != "$(fig logwrites marks)" ]; then
			bad=$((bad + 1))
		fi ;;
	esac
	splats=$(val "$p" splats)
	src=$(cat "$out/$p.source" 2>/dev/null)
	[ "$splats" = 0 ] || bad=$((bad + 1))
	[ "$bad" = 0 ] || ok=0
	[ -f "$out/$p/figures.tsv" ] || ok=0
	d=$(fig "$p" duration_s)
	[ -n "$d" ] || d=$(fig "$p" seconds)
	rows+="| $p | $what | $checked | $clean | $lost | $splats | $(dur "$d") | $result${src:+; $src} |"$'\n'
	[ -f "$out/$p/figures.tsv" ] && sed "s/^/$p\t/" "$out/$p/figures.tsv" >>"$out/summary.tsv"
done

{
	echo "# Reliability figures"
	echo
	echo "Run directory $out. Parts run here used kernel $(basename "${KERNEL:-$build/bzImage-6.12-debug}") (series $(sed -n 's/^series_hash=//p' "${KERNEL:-$build/bzImage-6.12-debug}.info" 2>/dev/null)); a part taken from an earlier run names its own kernel and date in its summary.md (in its subdirectory, as every part's report)."
	echo
	echo "| part | tried | checked | clean errors | lost / bugs | splats | duration | result |"
	echo "|---|---|---|---|---|---|---|---|"
	printf '%s' "$rows"
	echo
	if [ "$ok" = 1 ]; then
		echo "Every part is clean: no bug, no byte lost, no splat."
	else
		echo "**Not clean**: see the rows above and each part's summary.md."
	fi
} >"$out/summary.md"
cat "$out/summary.md"
[ "$ok" = 1 ]
