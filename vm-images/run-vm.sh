#!/bin/bash
# Boot a lab kernel in QEMU and run one job in it (the kvm-xfstests pattern).
#
#   vm-images/run-vm.sh --kernel bzImage --job DIR --out DIR [options]
#
#   --kernel FILE    bzImage to boot (built-in virtio, no initramfs)
#   --job DIR        directory whose contents become /job in the guest; the
#                    guest runs /job/run (vm-images/lab-init)
#   --out DIR        where the run is saved: console.log, results/, run.info
#   --root FILE      root image (default build/root.img), attached snapshot=on
#   --scratch SIZE   add a scratch virtio-blk disk (cache=none); repeatable.
#                    The guest sees them as /dev/vdd, /dev/vde, ...
#   --scratch-file F attach the existing image file F as the next scratch
#                    disk instead (kept, not truncated): a later boot can
#                    look at what this one left on it. Mixes with --scratch;
#                    the order on the command line is the order of the disks
#   --expect-crash   the job ends the boot itself by crashing the guest
#                    (echo b > /proc/sysrq-trigger) right after printing a
#                    line LAB-CRASH-NOW on the console; no results come back.
#                    That is then the success case (see exit status)
#   --timeout SEC    limit for the whole run (default 1800); with
#                    --boot-ref, times the machine's slowdown
#   --boot-ref SEC   how long the boot takes to its LAB-JOB-START line on an
#                    idle machine: the run measures its own time to that
#                    line and calls the ratio, between 1 and 4, the
#                    machine's slowdown (a busy host gives a slow pass
#                    rather than a timeout); recorded in run.info
#   --test-budget SEC  a test may run SEC seconds (times the slowdown) from
#                    its LAB-TEST-START line to its end line (LAB-TEST
#                    <status> or LAB-TEST-END); over that, the run is
#                    killed (status 3) and the verdict names the test
#   --accel MODE     auto|kvm|tcg|icount (default: $ACCEL or auto)
#   --cpus N --mem MB
#   --append ARGS    extra kernel command line
#   --lab-args STR   passed to /job/run as $LAB_ARGS (no spaces)
#   --shell          interactive root shell on this terminal, no timeout
#
# Disks: vda root (snapshot=on: the guest cannot change the image),
# vdb job (a tar, read-only), vdc results (the guest writes a tar to it),
# vdd... scratch.
#
# Exit status: 0 when the job exited 0 and the console is clean;
# 1 job failed, 2 kernel splat on the console, 3 timeout, 4 no results,
# 5 usage or setup error. The reason is printed, and saved in $out/verdict.
# With --expect-crash: 0 when the console is clean, shows LAB-CRASH-NOW and
# no results came back; 1 if the job finished instead (its exit code is in
# $out/results/exit-code), 4 if the guest died without the marker; 2 and 3
# as always (a splat before or during the crash still fails the run).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)

kernel='' job='' out='' root=$top/build/root.img timeout=1800 accel=${ACCEL:-auto}
boot_ref='' test_budget=''
cpus=2 mem=3072 append='' lab_args='' shell=0 scratch=() expect_crash=0
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 5; }
die() { echo "run-vm.sh: error: $*" >&2; [ -n "$out" ] && [ -d "$out" ] && echo "setup error: $*" >"$out/verdict"; exit 5; }
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) kernel=$2; shift ;;
	--job) job=$2; shift ;;
	--out) out=$2; shift ;;
	--root) root=$2; shift ;;
	--scratch) scratch+=("size:$2"); shift ;;
	--scratch-file) scratch+=("file:$2"); shift ;;
	--expect-crash) expect_crash=1 ;;
	--timeout) timeout=$2; shift ;;
	--boot-ref) boot_ref=$2; shift ;;
	--test-budget) test_budget=$2; shift ;;
	--accel) accel=$2; shift ;;
	--cpus) cpus=$2; shift ;;
	--mem) mem=$2; shift ;;
	--append) append=$2; shift ;;
	--lab-args) lab_args=$2; shift ;;
	--shell) shell=1 ;;
	-h|--help) usage ;;
	*) echo "run-vm.sh: unknown option $1" >&2; usage ;;
	esac
	shift
done
[ -n "$kernel" ] && [ -n "$out" ] || usage
for v in "$timeout" $boot_ref $test_budget; do
	case $v in
	'' | *[!0-9]* | 0) die "--timeout, --boot-ref and --test-budget take a whole number of seconds above 0 (got '$v')" ;;
	esac
done
[ -f "$kernel" ] || die "kernel $kernel not found (make kernel)"
[ -f "$root" ] || die "root image $root not found (make image)"
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
rm -rf "$out/results" "$out/disks" "$out/verdict" "$out/watchdog"
mkdir -p "$out/results" "$out/disks"

if ! command -v qemu-system-x86_64 >/dev/null; then
	echo "[vm] FAIL: qemu-system-x86_64 is not installed; 'make test' and 'make bench' install it (package qemu-system-x86), or run: apt-get install qemu-system-x86" >&2
	exit 2
fi

# --- acceleration -----------------------------------------------------------

# A short boot under KVM with no root disk: a working KVM reaches the
# "VFS: Unable to mount root" panic in a second or two; this machine's nested
# KVM hangs in the decompressor, so the probe gives up quickly. The answer is
# cached per host kernel and QEMU version.
kvm_works() {
	[ -w /dev/kvm ] || return 1
	local cache=$top/build/kvm-probe key
	key="$(uname -r) $(qemu-system-x86_64 --version | head -n1)"
	if [ -f "$cache" ] && [ "$(head -n1 "$cache")" = "$key" ]; then
		[ "$(sed -n 2p "$cache")" = yes ]
		return
	fi
	echo "[vm] probing KVM with a 20 s test boot (cached in $cache)" >&2
	local plog=$top/build/kvm-probe.log ok=no
	timeout -k 2 20 qemu-system-x86_64 -nodefaults -no-reboot -display none \
		-accel kvm -cpu host -m 256 -kernel "$kernel" \
		-append "console=ttyS0 panic=-1" -serial "file:$plog" >/dev/null 2>&1
	grep -q -e "Kernel panic" -e "VFS:" "$plog" 2>/dev/null && ok=yes
	mkdir -p "$top/build"
	printf '%s\n%s\n' "$key" "$ok" >"$cache"
	[ $ok = yes ]
}

case "$accel" in
# Without KVM, auto is plain TCG, or ACCEL_NO_KVM (the bench asks for
# icount: guest CPU time that host load does not move).
auto) if kvm_works; then accel=kvm; else accel=${ACCEL_NO_KVM:-tcg}; fi ;;
kvm|tcg|icount) ;;
*) die "unknown ACCEL/--accel '$accel' (use auto, kvm, tcg or icount)" ;;
esac
# shellcheck disable=SC2054 # QEMU option values (tcg,thread=...) are comma-separated lists
case "$accel" in
kvm) accel_args=(-accel kvm -cpu host) ;;
tcg) accel_args=(-accel tcg,thread=multi -cpu max) ;;
# icount needs single-threaded TCG. A fixed shift makes the guest clock
# count instructions (2^2 ns each), so CPU-bound work takes the same guest
# time however busy the host is; shift=auto would track host time again.
icount) accel_args=(-accel tcg,thread=single -icount shift=2 -cpu max) ;;
esac
# Under icount the x86 kernel hangs bringing up a second CPU ("Booting SMP
# configuration", seen here with shift=2 and shift=auto), so icount guests
# get one.
if [ "$accel" = icount ] && [ "$cpus" != 1 ]; then
	echo "[vm] icount: using 1 vCPU instead of $cpus (SMP bring-up hangs under icount)" >&2
	cpus=1
fi

# --- disks --------------------------------------------------------------------

jobtar=$out/disks/job.tar
if [ -n "$job" ]; then
	[ -d "$job" ] || die "job directory $job not found"
	tar -cf "$jobtar" -C "$job" . || die "cannot pack job $job"
else
	tar -cf "$jobtar" -T /dev/null
fi
results=$out/disks/results.img
truncate -s 1G "$results"

drives=(
	-drive "file=$root,format=raw,if=virtio,snapshot=on,cache=unsafe"
	-drive "file=$jobtar,format=raw,if=virtio,readonly=on"
	-drive "file=$results,format=raw,if=virtio,cache=unsafe"
)
i=0
for spec in "${scratch[@]}"; do
	case $spec in
	size:*)
		img=$out/disks/scratch$i.img
		truncate -s "${spec#size:}" "$img" || die "cannot create scratch disk of size ${spec#size:}"
		;;
	file:*)
		img=${spec#file:}
		[ -f "$img" ] || die "scratch image file $img not found"
		img=$(cd "$(dirname "$img")" && pwd)/$(basename "$img")
		;;
	esac
	# QEMU's -drive splits on commas
	[[ $img != *,* ]] || die "scratch image path $img contains a comma"
	drives+=(-drive "file=$img,format=raw,if=virtio,cache=none,aio=threads")
	i=$((i + 1))
done

cmdline="console=ttyS0 root=/dev/vda rw rootfstype=ext4 init=/sbin/lab-init"
cmdline+=" panic=-1 oops=panic printk.devkmsg=on"
# ACPI is there for the PM timer and HPET (TSC calibration); evaluating its
# PCI interrupt routing is very slow under TCG with KASAN, and not needed.
cmdline+=" pci=noacpi"
[ -n "$lab_args" ] && cmdline+=" lab.args=$lab_args"
[ "$shell" = 1 ] && cmdline+=" lab.shell=1"
[ -n "$append" ] && cmdline+=" $append"

qemu=(qemu-system-x86_64 -nodefaults -no-reboot -display none
	"${accel_args[@]}" -smp "$cpus" -m "$mem"
	-kernel "$kernel" -append "$cmdline"
	"${drives[@]}" -device virtio-rng-pci)

# The root image's identity: its sha256 (first 16 hex digits), cached
# beside it as long as its size and mtime stay (hashing 1 GB takes seconds).
root_identity() {
	local cache=$root.sha256 stamp
	stamp=$(stat -c '%s %Y' "$root" 2>/dev/null) || { echo unknown; return; }
	if [ -f "$cache" ] && [ "$(sed -n 1p "$cache")" = "$stamp" ]; then
		sed -n 2p "$cache"
		return
	fi
	local sum
	sum=$(sha256sum "$root" | cut -c1-16)
	printf '%s\n%s\n' "$stamp" "$sum" >"$cache" 2>/dev/null
	echo "$sum"
}

console=$out/console.log
: >"$console"
{
	echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "accel=$accel"
	echo "cpus=$cpus"
	echo "mem_mb=$mem"
	echo "kernel=$kernel"
	[ -f "$kernel.info" ] && sed 's/^/kernel_/' "$kernel.info"
	echo "timeout_s=$timeout"
	echo "boot_ref_s=$boot_ref"
	echo "test_budget_s=$test_budget"
	# what a comparison of runs must hold equal (reports/lab/gate.py refuses
	# to compare runs whose environments differ)
	echo "qemu_version=$(qemu-system-x86_64 --version | head -n1 | awk '{ print $4 }')"
	echo "host_cpu_model=$(awk -F': ' '$1 ~ /^model name/ { print $2; exit }' /proc/cpuinfo)"
	echo "host_cpus=$(nproc)"
	echo "host_kernel=$(uname -r)"
	echo "root_image_sha256=$(root_identity)"
	printf 'qemu_cmdline='; printf '%q ' "${qemu[@]}"; echo
} >"$out/run.info"
budget="timeout=${timeout}s"
[ -n "$boot_ref" ] && budget+=" x slowdown (boot ${boot_ref}s = 1)"
[ -n "$test_budget" ] && budget+=", ${test_budget}s per test"
echo "[vm] booting $(basename "$kernel") accel=$accel cpus=$cpus mem=${mem}M $budget; console: $console"

# --- run ------------------------------------------------------------------------

# The machine's slowdown is measured by the boot itself, never assumed
# above this: a run that needs more is a hang, not a slow machine.
SLOWDOWN_MAX=4

# slowdown_of BOOT_S: BOOT_S / boot_ref, between 1 and SLOWDOWN_MAX, with
# two decimals (bash has integers only: hundredths).
slowdown_of() {
	local h=100
	[ -n "$boot_ref" ] && h=$(($1 * 100 / boot_ref))
	[ "$h" -lt 100 ] && h=100
	[ "$h" -gt $((SLOWDOWN_MAX * 100)) ] && h=$((SLOWDOWN_MAX * 100))
	echo "$h"
}

# Kill QEMU (pid $1, the timeout(1) that runs it) when the whole run or the
# running test is over its budget times the slowdown; the reason goes to
# $out/watchdog for the verdict. Polls the console every 2 s.
watchdog() {
	local qpid=$1 now boot_s='' h=100 line cur='' cur_t=0 limit
	while kill -0 "$qpid" 2>/dev/null; do
		sleep 2
		now=$(($(date +%s) - start))
		if [ -z "$boot_s" ] && grep -aq '^LAB-JOB-START' "$console"; then
			boot_s=$now
			h=$(slowdown_of "$boot_s")
			{
				echo "boot_to_job_s=$boot_s"
				echo "slowdown=$(fmt_h "$h")"
			} >>"$out/run.info"
		fi
		limit=$((timeout * h / 100))
		if [ "$now" -gt "$limit" ]; then
			echo "the run took over ${limit}s (--timeout ${timeout}s x slowdown $(fmt_h "$h"))" >"$out/watchdog"
			break
		fi
		[ -n "$test_budget" ] || continue
		line=$(grep -aE '^LAB-TEST-START |^LAB-TEST-END |^LAB-TEST [A-Z]+ ' "$console" | tail -n 1)
		line=${line%$'\r'}	# the serial console ends lines with CR LF
		case $line in
		"LAB-TEST-START "*)
			if [ "${line#LAB-TEST-START }" != "$cur" ]; then
				cur=${line#LAB-TEST-START }
				cur_t=$now
			fi
			limit=$((test_budget * h / 100))
			if [ $((now - cur_t)) -gt "$limit" ]; then
				echo "test $cur ran for over ${limit}s (--test-budget ${test_budget}s x slowdown $(fmt_h "$h"))" >"$out/watchdog"
				break
			fi
			;;
		*) cur='' ;;
		esac
	done
	if [ -f "$out/watchdog" ]; then
		kill -TERM "$qpid" 2>/dev/null
		sleep 5
		kill -KILL "$qpid" 2>/dev/null
	fi
}
fmt_h() { echo "$(($1 / 100)).$(printf '%02d' $(($1 % 100)))"; }

start=$(date +%s)
if [ "$shell" = 1 ]; then
	"${qemu[@]}" -chardev "stdio,id=con,mux=on,signal=off,logfile=$console" \
		-serial chardev:con -mon chardev=con
	rc=$?
else
	# Progress: echo the job's LAB-* marker lines as they appear.
	# tail --pid ends with this script, so nothing keeps our stdout open
	# (a caller piping us into tee would otherwise wait forever).
	(tail --pid=$$ -n +1 -F "$console" 2>/dev/null |
		grep --line-buffered -E '^LAB-(TEST|PROGRESS|JOB)' | sed -u 's/^/[vm] /') &
	ticker=$!
	if [ -n "$boot_ref$test_budget" ]; then
		# the watchdog enforces the scaled limits; this one only backs it up
		timeout -k 10 $((timeout * SLOWDOWN_MAX + 60)) "${qemu[@]}" -serial "file:$console" </dev/null &
		qpid=$!
		watchdog "$qpid"
		wait "$qpid"
	else
		timeout -k 10 "$timeout" "${qemu[@]}" -serial "file:$console" </dev/null
	fi
	rc=$?
	sleep 0.5
	pkill -P $ticker 2>/dev/null
	kill $ticker 2>/dev/null
fi
elapsed=$(( $(date +%s) - start ))
echo "elapsed_s=$elapsed" >>"$out/run.info"
echo "qemu_exit=$rc" >>"$out/run.info"

# --- verdict --------------------------------------------------------------------

tar -xf "$results" -C "$out/results" 2>/dev/null
[ -s "$out/disks/results.img" ] && rm -f "$out/disks/results.img"
[ "${KEEP_DISKS:-0}" = 1 ] || rm -rf "$out/disks"

verdict() { echo "$2" >"$out/verdict"; echo "[vm] $2"; exit "$1"; }

splats=$("$here/console-check.sh" "$console")
if [ -f "$out/watchdog" ]; then
	[ -n "$splats" ] && echo "$splats" | sed 's/^/[vm]   /'
	echo "[vm] the console's last lines:"
	tail -n 15 "$console" | sed 's/^/[vm]   /'
	verdict 3 "FAIL: timeout: $(cat "$out/watchdog"); see the end of $console for where it hung"
fi
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
	[ -n "$splats" ] && echo "$splats" | sed 's/^/[vm]   /'
	verdict 3 "FAIL: timeout: the run was killed after ${timeout}s (raise --timeout/TIMEOUT=, or look at the end of $console for where it hung)"
fi
if [ -n "$splats" ]; then
	echo "$splats" | head -n 5 | sed 's/^/[vm]   /'
	kinds=$(echo "$splats" | cut -d: -f1 | sort -u | paste -sd, -)
	verdict 2 "FAIL: kernel splat on the console ($kinds); see $console"
fi
[ "$shell" = 1 ] && verdict 0 "shell session ended after ${elapsed}s"
if [ "$expect_crash" = 1 ]; then
	if [ -f "$out/results/exit-code" ]; then
		verdict 1 "FAIL: the guest was to crash itself (--expect-crash), but the job finished with exit code $(cat "$out/results/exit-code") after ${elapsed}s; output in $out/results/job.log and $console"
	fi
	grep -q '^LAB-CRASH-NOW' "$console" ||
		verdict 4 "FAIL: no results and no LAB-CRASH-NOW line: the guest died, but not by the job's deliberate crash (qemu exit $rc); see $console"
	verdict 0 "ok: the guest crashed itself as expected (--expect-crash) after ${elapsed}s (accel=$accel)"
fi
if [ ! -f "$out/results/exit-code" ]; then
	verdict 4 "FAIL: no results came back from the guest (qemu exit $rc); see $console"
fi
jrc=$(cat "$out/results/exit-code")
[ "$jrc" = 0 ] || verdict 1 "FAIL: the job exited with code $jrc after ${elapsed}s; output in $out/results/job.log"
verdict 0 "ok: job passed in ${elapsed}s (accel=$accel)"
