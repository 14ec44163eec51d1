#!/bin/bash
# Power cuts during encrypted btrfs writes (issue #14, part 2), host side.
#
#   tests/run-powercut.sh
#
# Boots the debug kernel once per cut, on two scratch disks kept from boot
# to boot (A: the filesystem, 1 GiB; B: the log of what is durable, 256
# MiB; both cache=none). The guest program
# (tests/powercut/btrfs_fscrypt_powercut.c, which describes the workload, the
# log and the rule the verifier applies) runs a workload of writers, fsync,
# renames, reflinks, snapshots, remounts and key removal in encrypted
# directories of both key modes (POWERCUT_BIN=.../btrfs_fscrypt_rekey_powercut:
# writes and rekeys of a subvolume, see that program); when "powercut: working" reaches the
# console, this script sleeps a random time and SIGKILLs QEMU. The next boot
# first verifies that cut (mount and tree-log replay, every fsynced byte
# bit for bit, `btrfs check --readonly`), then starts the workload for the
# next cut. The first boot only works (mkfs), the last one only verifies:
# CUTS cuts take CUTS + 1 boots. The run stops at the first failure, with
# the filesystem image as the cut left it (cut-image.img) kept.
#
# Environment:
#   POWERCUT_CUTS       cuts (default 100)
#   POWERCUT_SEED       seed of the kill times and of the workload's choices
#                       (default 0x14f0002); the same seed gives the same
#                       kill times and the same sequence of operations
#                       (the guest's timing still varies)
#   POWERCUT_MIN_MS, POWERCUT_MAX_MS
#                       the kill comes this long after "working" (uniform,
#                       default 3000 to 15000)
#   POWERCUT_OUT        output directory (default
#                       build/reliability/powercut-<date>-<time>)
#   POWERCUT_BOOT_TIMEOUT  seconds a boot may take to reach "working" (or,
#                       for the last boot, to end): default 300
#   POWERCUT_SELFCHECK=1   the last boot's verifier reads one log record
#                       changed (verify --self-check): it must report lost
#                       bytes, so such a run must FAIL (the control)
#   POWERCUT_KEEP_DISKS=1  keep the disk images of a passing run too
#   POWERCUT_BUDGET_S   if set, no new cut starts when the run would
#                       otherwise end later than this many seconds after
#                       its start (at the average cycle so far): the next
#                       boot is the last, verify-only one, and the run
#                       reports the cuts it made (not a failure)
#   KERNEL, ROOT        default build/bzImage-6.12-debug, build/root.img
#   POWERCUT_BIN        default build/tests/powercut/btrfs_fscrypt_powercut
#   POWERCUT_CONFIG     a test configuration (tests/configs/<name>.conf, e.g.
#                       encrypt): its mkfs and mount options go to every
#                       mkfs and btrfs mount of the guest program
#   ACCEL               auto (kvm if build/kvm-probe says it works, else
#                       tcg), kvm or tcg
#
# Writes to the output directory: figures.tsv (cuts, boots,
# fsynced_records, fsynced_bytes_checked, bytes_lost, check_runs,
# check_errors, splats, duration_s; compressed_files and two_key_files,
# summed over the verifies: files with compressed extents, files with
# extents of two master keys; cross_key_clones and clones, durable at the
# last verify), summary.md, cuts.tsv (one line per
# cut), boot-NNN/ (console.log, QEMU's command line and output); prints a
# progress line per cut.
#
# Exit status: 0 when every cut verified clean (nothing lost, btrfs check
# clean) and every console is free of splats; 1 on loss, a check error, a
# splat, a hang, a workload error or a guest that died; 2 on a setup error
# (the message says what to do); 77 when the guest program skipped (no btrfs
# encryption or per-extent keys in the kernel, no patched btrfs-progs in the
# image).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
setup_error() { echo "run-powercut.sh: setup error: $*" >&2; exit 2; }

kernel=${KERNEL:-$build/bzImage-6.12-debug}
root=${ROOT:-$build/root.img}
bin=${POWERCUT_BIN:-$build/tests/powercut/btrfs_fscrypt_powercut}
config=${POWERCUT_CONFIG:-}
guest=$top/tests/powercut/guest-powercut.sh
cuts=${POWERCUT_CUTS:-100}
seed=${POWERCUT_SEED:-0x14f0002}
min_ms=${POWERCUT_MIN_MS:-3000}
max_ms=${POWERCUT_MAX_MS:-15000}
boot_timeout=${POWERCUT_BOOT_TIMEOUT:-300}
selfcheck=${POWERCUT_SELFCHECK:-0}
keep=${POWERCUT_KEEP_DISKS:-0}
budget=${POWERCUT_BUDGET_S:-0}
accel=${ACCEL:-auto}
out=${POWERCUT_OUT:-$build/reliability/powercut-$(date +%Y-%m-%d-%H%M%S)}
cpus=2 mem=1536

for v in cuts min_ms max_ms boot_timeout budget; do
	case ${!v} in '' | *[!0-9]*) setup_error "$v=${!v} is not a number" ;; esac
done
[ "$cuts" -ge 1 ] || setup_error "POWERCUT_CUTS must be at least 1"
[ "$max_ms" -ge "$min_ms" ] || setup_error "POWERCUT_MAX_MS ($max_ms) is below POWERCUT_MIN_MS ($min_ms)"
[[ $seed =~ ^(0x[0-9a-fA-F]+|[0-9]+)$ ]] || setup_error "POWERCUT_SEED=$seed is not a number (decimal or 0x hex)"
[ $((seed)) -lt 4294967296 ] || setup_error "POWERCUT_SEED must fit in 32 bits"
[ -f "$kernel" ] || setup_error "no kernel $kernel: run make kernel FLAVOR=debug"
[ -f "$root" ] || setup_error "no root image $root: run make image"
[ -x "$bin" ] || setup_error "no guest program $bin: run make tests-bin (or make -C tests)"
[ -f "$guest" ] || setup_error "$guest is missing from the checkout"
[ -z "$config" ] || [ -f "$top/tests/configs/$config.conf" ] ||
	setup_error "POWERCUT_CONFIG=$config: no tests/configs/$config.conf"
command -v qemu-system-x86_64 >/dev/null || setup_error "qemu-system-x86_64 is not installed: run make test once (it installs it), or apt-get install qemu-system-x86"
case $accel in
auto)
	accel=tcg
	if [ -w /dev/kvm ] && [ "$(sed -n 2p "$build/kvm-probe" 2>/dev/null)" = yes ]; then
		accel=kvm
	fi
	;;
kvm | tcg) ;;
*) setup_error "ACCEL=$accel: use auto, kvm or tcg" ;;
esac
# shellcheck disable=SC2054 # QEMU option values are comma-separated lists
case $accel in
kvm) accel_args=(-accel kvm -cpu host) ;;
tcg) accel_args=(-accel tcg,thread=multi -cpu max) ;;
esac

mkdir -p "$out" || setup_error "cannot create $out"
out=$(cd "$out" && pwd)
[[ $out != *,* ]] || setup_error "the output directory $out contains a comma (QEMU's -drive cannot take it)"
rm -rf "$out"/boot-* "$out/job"
mkdir -p "$out/job"
# The guest runs it as /job/powercut-prog, whichever program it is.
# A configuration's options: /job/config.conf, read by the guest side.
if [ -n "$config" ] && ! cp "$top/tests/configs/$config.conf" "$out/job/config.conf"; then
	setup_error "cannot copy tests/configs/$config.conf into the job"
fi
if ! { cp "$bin" "$out/job/powercut-prog" && install -m 0755 "$guest" "$out/job/run" &&
	tar -cf "$out/job.tar" -C "$out/job" .; }; then
	setup_error "cannot pack the job into $out/job.tar"
fi
disk_a=$out/disk-a.img disk_b=$out/disk-b.img
rm -f "$disk_a" "$disk_b" "$out/cut-image.img"
if ! { truncate -s 1G "$disk_a" && truncate -s 256M "$disk_b"; }; then
	setup_error "cannot create the scratch disks in $out"
fi

# ---- one boot ------------------------------------------------------------------

qpid=
cleanup() { [ -n "$qpid" ] && kill -KILL "$qpid" 2>/dev/null; }
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

boot() { # n what cut
	local cmdline
	bdir=$out/boot-$(printf %03d "$1")
	mkdir -p "$bdir"
	console=$bdir/console.log
	: >"$console"
	rm -f "$bdir/results.img"
	truncate -s 64M "$bdir/results.img"
	# kunit.enable=0: the KUnit suites of `make test` need not run again
	# at every boot (2 s of each under TCG).
	cmdline="console=ttyS0 root=/dev/vda rw rootfstype=ext4 init=/sbin/lab-init"
	cmdline+=" panic=-1 oops=panic printk.devkmsg=on pci=noacpi kunit.enable=0"
	cmdline+=" lab.args=$2:$((seed)):$3"
	qemu=(qemu-system-x86_64 -nodefaults -no-reboot -display none
		"${accel_args[@]}" -smp "$cpus" -m "$mem"
		-kernel "$kernel" -append "$cmdline"
		-drive "file=$root,format=raw,if=virtio,snapshot=on,cache=unsafe"
		-drive "file=$out/job.tar,format=raw,if=virtio,readonly=on"
		-drive "file=$bdir/results.img,format=raw,if=virtio,cache=unsafe"
		-drive "file=$disk_a,format=raw,if=virtio,cache=none,aio=threads"
		-drive "file=$disk_b,format=raw,if=virtio,cache=none,aio=threads"
		-device virtio-rng-pci -serial "file:$console")
	printf '%q ' "${qemu[@]}" >"$bdir/qemu.cmdline"
	echo >>"$bdir/qemu.cmdline"
	"${qemu[@]}" </dev/null >"$bdir/qemu.out" 2>&1 &
	qpid=$!
}

# Wait for "powercut: working" (0), QEMU's exit (1) or the timeout (2).
wait_working() {
	local deadline=$((SECONDS + boot_timeout))
	while :; do
		grep -q -a 'powercut: working (boot' "$console" && return 0
		if ! kill -0 "$qpid" 2>/dev/null; then
			wait "$qpid" 2>/dev/null
			qpid=
			grep -q -a 'powercut: working (boot' "$console" && return 0
			return 1
		fi
		[ "$SECONDS" -ge "$deadline" ] && return 2
		sleep 0.2
	done
}

# Wait for QEMU's exit (0) or the timeout (2: QEMU is killed).
wait_exit() {
	local deadline=$((SECONDS + boot_timeout))
	while kill -0 "$qpid" 2>/dev/null; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			kill -KILL "$qpid" 2>/dev/null
			wait "$qpid" 2>/dev/null
			qpid=
			return 2
		fi
		sleep 0.2
	done
	wait "$qpid" 2>/dev/null
	qpid=
	return 0
}

kill_now() {
	kill -KILL "$qpid" 2>/dev/null
	wait "$qpid" 2>/dev/null
	qpid=
}

# The kill times: a 64-bit LCG of the seed (bash arithmetic wraps), so that
# a seed gives the same times on any machine.
rng=$(( $((seed)) ^ 0x5851f42d4c957f2d ))
next_delay() {
	rng=$(( rng * 6364136223846793005 + 1442695040888963407 ))
	delay_ms=$(( min_ms + ((rng >> 33) & 0x7fffffff) % (max_ms - min_ms + 1) ))
}

ms_to_s() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }

# ---- the verifier's line of a boot -----------------------------------------------

vline=
# The kernel's copy (written to /dev/kmsg: never split by other output) if
# it is there, else the copy on the console.
verify_line() { # console
	vline=$(grep -a '^\[ *[0-9.]*\] powercut-verify: ' "$1" | tail -n 1 |
		sed 's/^\[[^]]*\] //' | tr -d '\r')
	[ -n "$vline" ] || vline=$(grep -a -o 'powercut-verify: .*' "$1" | tail -n 1 | tr -d '\r')
}
vget() { # key (from $vline); empty if absent
	sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" ${vline#powercut-verify: }"
}
num() { local v; v=$(vget "$1"); echo "${v:-0}"; }

# ---- the run -------------------------------------------------------------------------

echo "== power cuts: $cuts cuts, seed $seed, kill ${min_ms}-${max_ms} ms after 'working', $(basename "$kernel") under $accel${config:+, configuration $config}"
echo "   output: $out"
start=$SECONDS
declare -a kill_ms boot_start to_working
cuts_done=0 boots=0 records=0 bytes_checked=0 bytes_lost=0 bytes_wrong=0
check_runs=0 check_errors=0 splats=0 errors=0 work_errors=0 replays=0
bytes_extent=0 bytes_inode=0 renames_both=0
# what the workloads' additions of issue #36 reached, per verify: live files
# with compressed extents, files holding extents of a second key (kx's, or
# both rekey keys), durable clones (across keys)
comp_files=0 comp_max=0 xkey_files=0 xkey_max=0 xclones=0 clones=0
fail='' skip='' budget_stop=''
printf 'cut\tto_working_s\tkill_s\tcycle_s\tlog_replay\tcommitted\tinflight\tbytes_checked\tbytes_extent\tbytes_inode\tbytes_lost\tbytes_wrong\terrors\tcheck_errors\tresult\n' >"$out/cuts.tsv"

for ((n = 1; n <= cuts + 1; n++)); do
	final=0
	[ "$n" -gt "$cuts" ] && final=1
	# the time budget: would one more cut (and the last boot) end too late?
	if [ "$final" = 0 ] && [ "$n" -gt 1 ] && [ "$budget" -gt 0 ] &&
		[ $(( (SECONDS - start) * (n + 1) / (n - 1) )) -gt "$budget" ]; then
		final=1
		budget_stop=$((n - 1))
		echo "time budget of ${budget}s: no cut after cut $budget_stop; the next boot only verifies"
	fi
	if [ "$n" = 1 ]; then
		what=first
	elif [ "$final" = 0 ]; then
		what=cycle
	elif [ "$selfcheck" = 1 ]; then
		what=last-selfcheck
	else
		what=last
	fi
	boot_start[n]=$SECONDS
	launch_ns=$(date +%s%N)
	boot "$n" "$what" "$n"
	boots=$n
	ended=
	if [ "$final" = 0 ]; then
		wait_working
		case $? in
		0)
			next_delay
			t0=$(date +%s%N)
			to_working[n]=$(( (t0 - launch_ns) / 1000000 ))
			sleep "$(ms_to_s "$delay_ms")"
			if kill -0 "$qpid" 2>/dev/null; then
				kill_now
				kill_ms[n]=$(( ($(date +%s%N) - t0) / 1000000 ))
				[ -f "$disk_a" ] && cp --sparse=always "$disk_a" "$out/cut-image.img"
			else
				wait "$qpid" 2>/dev/null
				qpid=
				ended="the guest ended during the workload, before the kill"
			fi
			;;
		1) ended="the guest ended without reaching 'powercut: working'" ;;
		2)
			kill_now
			ended="hang: no 'powercut: working' line within ${boot_timeout}s (POWERCUT_BOOT_TIMEOUT); see the end of $console"
			;;
		esac
	else
		wait_exit || ended="hang: the last boot did not end within ${boot_timeout}s; see the end of $console"
	fi

	s=$("$top/vm-images/console-check.sh" "$console" 2>/dev/null)
	if [ -n "$s" ]; then
		k=$(printf '%s\n' "$s" | wc -l)
		splats=$((splats + k))
		printf '%s\n' "$s" | head -n 5 | sed 's/^/   splat: /'
		fail+="boot $n: $k kernel splat(s) ($(printf '%s\n' "$s" | cut -d: -f1 | sort -u | paste -sd, -)); see $console"$'\n'
	fi
	k=$(grep -a -c 'powercut: ERROR' "$console")
	if [ "$k" -gt 0 ]; then
		work_errors=$((work_errors + k))
		grep -a 'powercut: ERROR' "$console" | head -n 5 | tr -d '\r' | sed 's/^/   /'
		fail+="boot $n: $k error line(s) from the guest program; see $console"$'\n'
	fi

	# The verifier's result for cut n-1.
	if [ "$n" -ge 2 ]; then
		c=$((n - 1))
		verify_line "$console"
		vrc=$(grep -a -o 'LAB-POWERCUT-VERIFY rc=[0-9]*' "$console" | tail -n 1 | sed 's/.*=//')
		if [ -z "$vline" ]; then
			if [ "$vrc" = 77 ]; then
				skip=$(grep -a '^SKIP: ' "$console" | tail -n 1 | tr -d '\r' | sed 's/^SKIP: //')
				break
			fi
			fail+="cut $c: no verifier result in boot $n (${ended:-the verifier did not finish}); see $console"$'\n'
			echo "cut $c/$cuts: killed after $(ms_to_s "${kill_ms[c]:-0}") s; verify: NO RESULT (see $console)"
			break
		fi
		cuts_done=$c
		records=$(num committed)
		bytes_checked=$((bytes_checked + $(num bytes_checked)))
		bytes_extent=$((bytes_extent + $(num bytes_extent)))
		bytes_inode=$((bytes_inode + $(num bytes_inode)))
		bytes_lost=$((bytes_lost + $(num bytes_lost)))
		bytes_wrong=$((bytes_wrong + $(num bytes_wrong)))
		errors=$((errors + $(num errors)))
		check_runs=$((check_runs + $(num check_runs)))
		check_errors=$((check_errors + $(num check_errors)))
		replays=$((replays + $(num log_replay)))
		renames_both=$((renames_both + $(num renames_both)))
		comp_files=$((comp_files + $(num compressed_files)))
		[ "$(num compressed_files)" -gt "$comp_max" ] && comp_max=$(num compressed_files)
		k=$(( $(num xkey_files) + $(num two_key_files) ))
		xkey_files=$((xkey_files + k))
		[ "$k" -gt "$xkey_max" ] && xkey_max=$k
		xclones=$(num xclones)
		clones=$(num clones)
		cycle=$(( boot_start[n] - boot_start[c] ))
		check="check clean"
		[ "$(num check_errors)" = 0 ] || check="check: $(num check_errors) error(s)"
		[ "$(num check_runs)" = 0 ] && check="check did not run"
		extra=
		[ "$(num log_replay)" = 1 ] && extra="tree log replayed; "
		[ "$(num renames_both)" = 0 ] || extra+="$(num renames_both) file(s) under both names after a rename between directories in flight; "
		echo "cut $c/$cuts: killed after $(ms_to_s "${kill_ms[c]:-0}") s; verify: $(num bytes_checked) bytes checked, $(num bytes_lost) lost, $check ($extra$(num committed) operations durable, $(num inflight) in flight; boot to 'working' $(ms_to_s "${to_working[c]:-0}") s, cycle ${cycle} s)"
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" \
			"$(ms_to_s "${to_working[c]:-0}")" "$(ms_to_s "${kill_ms[c]:-0}")" "$cycle" "$(num log_replay)" \
			"$(num committed)" "$(num inflight)" "$(num bytes_checked)" \
			"$(num bytes_extent)" "$(num bytes_inode)" "$(num bytes_lost)" \
			"$(num bytes_wrong)" "$(num errors)" "$(num check_errors)" \
			"$(vget result)" >>"$out/cuts.tsv"
		if [ "$(vget result)" = PASS ] && [ "$vrc" != 0 ]; then
			fail+="cut $c: the verifier printed PASS but exited with ${vrc:-no status}; see $console"$'\n'
		elif [ "$(vget result)" != PASS ]; then
			fail+="cut $c: the verifier failed: $(num bytes_lost) bytes lost, $(num bytes_wrong) wrong, $(num errors) other errors, $(num check_errors) btrfs check errors; see $console (the filesystem as the cut left it: $out/cut-image.img)"$'\n'
			grep -a 'powercut: FAIL' "$console" | head -n 10 | tr -d '\r' | sed 's/^/   /'
		fi
	fi
	if [ -n "$ended" ]; then
		if [ "$n" = 1 ] && grep -q -a 'LAB-POWERCUT-WORK-ENDED rc=77' "$console"; then
			skip=$(grep -a '^SKIP: ' "$console" | tail -n 1 | tr -d '\r' | sed 's/^SKIP: //')
			break
		fi
		# a verify failure already explains why no workload started
		if [ "$(vget result)" = PASS ] || [ "$n" = 1 ] || [ -z "$vline" ]; then
			fail+="boot $n: $ended; see $console"$'\n'
		fi
	fi
	[ -z "$fail" ] || break
	[ "$final" = 0 ] || break
done
duration=$((SECONDS - start))

# ---- figures and summary ------------------------------------------------------------

{
	printf 'cuts\t%s\n' "$cuts_done"
	printf 'boots\t%s\n' "$boots"
	printf 'fsynced_records\t%s\n' "$records"
	printf 'fsynced_bytes_checked\t%s\n' "$bytes_checked"
	printf 'bytes_lost\t%s\n' "$bytes_lost"
	printf 'check_runs\t%s\n' "$check_runs"
	printf 'check_errors\t%s\n' "$check_errors"
	printf 'splats\t%s\n' "$splats"
	printf 'duration_s\t%s\n' "$duration"
	printf 'compressed_files\t%s\n' "$comp_files"
	printf 'two_key_files\t%s\n' "$xkey_files"
	printf 'cross_key_clones\t%s\n' "$xclones"
	printf 'clones\t%s\n' "$clones"
} >"$out/figures.tsv"

if [ -n "$skip" ]; then
	verdict="SKIP: $skip"
elif [ -n "$fail" ]; then
	verdict="FAIL"
elif [ "$cuts_done" != "${budget_stop:-$cuts}" ]; then
	verdict="FAIL"
	fail="only $cuts_done of $cuts cuts were verified"$'\n'
elif [ -n "$budget_stop" ]; then
	verdict="PASS ($cuts_done of the $cuts cuts asked for: the time budget of ${budget}s ended the run)"
else
	verdict="PASS"
fi
per_cut=-
selfnote=
[ "$selfcheck" = 1 ] && selfnote="; SELF-CHECK: the last verify reads a corrupted log record, so this run must fail"
[ "$cuts_done" -gt 0 ] && per_cut=$(awk -v d="$duration" -v c="$cuts_done" 'BEGIN { printf "%.1f", d / c }')
{
	case $(basename "$bin") in
	*rekey*) echo "# Power cuts during writes and rekeys of an encrypted subvolume (issue #24)" ;;
	*) echo "# Power cuts during encrypted writes (issue #14, part 2)" ;;
	esac
	echo
	echo "$(date -u +%Y-%m-%dT%H:%M:%SZ), kernel $(basename "$kernel") (series $(sed -n 's/^series_hash=//p' "$kernel.info" 2>/dev/null)), $accel with $cpus vCPUs, ${mem} MiB; seed $seed; kill ${min_ms}-${max_ms} ms after 'powercut: working'$selfnote${config:+; test configuration $config (tests/configs/$config.conf: mkfs and mount options)}."
	echo
	echo "Verdict: **$verdict**"
	echo
	echo "| cuts | boots | fsynced records | fsynced bytes checked | bytes lost | check runs | check errors | splats | duration |"
	echo "|---|---|---|---|---|---|---|---|---|"
	echo "| $cuts_done | $boots | $records | $bytes_checked | $bytes_lost | $check_runs | $check_errors | $splats | $((duration / 60)) min $((duration % 60)) s ($per_cut s per cut) |"
	echo
	echo "- fsynced records: operations (write batches, clones, creates, renames, unlinks, snapshots) the log shows as durable at the last verify."
	echo "- fsynced bytes checked: summed over the verifies; each verify compares every byte of every file and snapshot file the log describes (per-extent-key files $bytes_extent, per-inode-key files $bytes_inode)."
	echo "- bytes found wrong beyond a file's fsynced size: $bytes_wrong; other verifier errors (names, sizes, modes, snapshots, plaintext names without the key): $errors; error lines of the workload: $work_errors."
	echo "- cuts whose mount replayed a tree log: $replays of $cuts_done."
	case $(basename "$bin") in
	*rekey*) echo "- what the verifies met (issue #36): writer files with compressed extents (FIEMAP; compress=zstd, compressible data), summed over the verifies $comp_files (at most $comp_max at one cut); writer files with extents of both keys (written before and after a rekey, or given by a clone), summed $xkey_files (at most $xkey_max); clones durable at the last verify: $clones." ;;
	*) echo "- what the verifies met (issue #36): live files with compressed extents (FIEMAP; compress=zstd, compressible data), summed over the verifies $comp_files (at most $comp_max at one cut); live files holding extents of the second key (kx's, by clones from kx/src across keys), summed $xkey_files (at most $xkey_max); clones from kx/src durable at the last verify: $xclones." ;;
	esac
	echo "- files found under both their old and new name after a rename between the two directories was in flight (allowed: btrfs logs each directory at its own fsync; see the guest program's header): $renames_both."
	echo "- per cut (one boot: verify of the previous cut, then the workload until the kill): $per_cut s on average; cuts.tsv has each cut."
	if [ -n "$fail" ]; then
		echo
		echo "## Failures"
		echo
		printf '%s' "$fail" | sed 's/^/- /'
	fi
} >"$out/summary.md"
cat "$out/summary.md"

if [ -z "$fail" ] && [ -z "$skip" ] && [ "$keep" != 1 ]; then
	rm -f "$disk_a" "$disk_b" "$out/cut-image.img"
fi
rm -f "$out"/boot-*/results.img
[ -n "$skip" ] && exit 77
[ -z "$fail" ]
