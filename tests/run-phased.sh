#!/bin/bash
# Run one phased guest test: a test that needs two boots on the same disks,
# e.g. "crash the VM after an fsync, then check in the next boot".
#
#   tests/run-phased.sh NAME OUTDIR
#
# The test program is build/tests/phased/NAME (from tests/phased/NAME.c);
# the guest runs it as `NAME 1` in the first boot and `NAME 2` in the second
# (tests/guest-phase.sh). Both boots get the same two scratch image files,
# OUTDIR/scratch0.img (1G, /dev/vdd) and OUTDIR/scratch1.img (64M, /dev/vde),
# fresh for each run of this script.
#
#   phase 1 is expected to crash the VM (run-vm.sh --expect-crash): that is
#           its success. If it returns instead, 77 means skip (nothing to
#           test on this kernel, no second boot) and anything else fails.
#   phase 2 runs normally: 0 pass, 77 skip, anything else fail.
# A kernel splat, a timeout or a missing result in either boot fails the
# test, whatever the program said; the reason names the splat's first line
# and whether it came during the phase or in the boot before it.
#
# Writes OUTDIR/test.log (each phase's part of its console log: the test's
# output with the kernel's messages) and OUTDIR/result, one line:
# "PASS", "SKIP<TAB>reason" or "FAIL<TAB>reason". Exit status 0, 77 or 1.
# The scratch images are deleted unless the test failed.
#
# Environment: KERNEL (default build/bzImage-6.12-debug), PHASE_TIMEOUT (seconds
# per boot, default 600), ACCEL.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
name=${1:?usage: run-phased.sh NAME OUTDIR}
out=${2:?usage: run-phased.sh NAME OUTDIR}
kernel=${KERNEL:-$top/build/bzImage-6.12-debug}
timeout=${PHASE_TIMEOUT:-600}
bin=$top/build/tests/phased/$name

rm -rf "$out"
mkdir -p "$out/job/tests/phased"
out=$(cd "$out" && pwd)
log=$out/test.log
: >"$log"

finish() { # status [reason]
	printf '%s%s\n' "$1" "${2:+	$2}" >"$out/result"
	[ "$1" = FAIL ] || rm -f "$out/scratch0.img" "$out/scratch1.img"
	case $1 in PASS) exit 0 ;; SKIP) exit 77 ;; *) exit 1 ;; esac
}

[ -x "$bin" ] || finish FAIL "$bin is not built (make tests-bin)"
cp "$bin" "$out/job/tests/phased/"
install -m 0755 "$top/tests/guest-phase.sh" "$out/job/run"
truncate -s 1G "$out/scratch0.img" && truncate -s 64M "$out/scratch1.img" ||
	finish FAIL "cannot create the scratch images in $out"

boot() { # phase [run-vm.sh options]
	local p=$1
	shift
	"$top/vm-images/run-vm.sh" --kernel "$kernel" --job "$out/job" \
		--out "$out/phase$p" --timeout "$timeout" --lab-args "$name:$p" \
		--scratch-file "$out/scratch0.img" --scratch-file "$out/scratch1.img" "$@"
}

# Append phase $1's part of its console to the log.
phase_log() {
	local console=$out/phase$1/console.log
	echo "== phase $1 (from $console)" >>"$log"
	sed -n "/^LAB-TEST-START $name:$1/,\$p" "$console" 2>/dev/null | tr -d '\r' >>"$log"
	echo "== phase $1 verdict: $(cat "$out/phase$1/verdict" 2>/dev/null)" >>"$log"
}

# Why phase $1 failed: the runner's verdict, and when a kernel splat was on
# its console, the splat's first line and where it appeared (during the
# test, or in the boot before the test started), so that the splat is
# attributed to this test and its boot as in the shared boot's tests.
why() { # phase rc
	local s
	s=$("$top/vm-images/console-check.sh" --by-test "$out/phase$1/console.log" 2>/dev/null |
		awk -F'\t' '{ n += $2 } NR == 1 {
			where = ($1 == "boot") ? "in the boot before the test started" : "during " $1
			s = sprintf("kernel splat (%s) %s: %s (console.log:%d", $3, where, $5, $4) }
			END { if (s != "") printf "%s%s)", s, (n > 1) ? ", " n " splat lines" : "" }')
	if [ -n "$s" ] && [ "$2" = 2 ]; then
		echo "$s; see $out/phase$1/console.log"
	else
		echo "$(cat "$out/phase$1/verdict" 2>/dev/null)${s:+; $s}"
	fi
}

# Why the program skipped: its last "SKIP: ..." line.
skip_reason() {
	grep -a '^SKIP: ' "$log" | tail -n 1 | sed 's/^SKIP: //'
}

boot 1 --expect-crash
rc=$?
phase_log 1
prc=$(cat "$out/phase1/results/phase-rc" 2>/dev/null)
if [ "$rc" != 0 ]; then
	[ "$rc" = 1 ] && [ "$prc" = 77 ] && finish SKIP "$(skip_reason)"
	finish FAIL "phase 1: $(why 1 "$rc")${prc:+ (program exit $prc)}"
fi

boot 2
rc=$?
phase_log 2
prc=$(cat "$out/phase2/results/phase-rc" 2>/dev/null)
[ "$rc" = 0 ] || finish FAIL "phase 2: $(why 2 "$rc")"
case $prc in
0) finish PASS ;;
77) finish SKIP "$(skip_reason)" ;;
*) finish FAIL "phase 2: the program exited ${prc:-?}; log: $log" ;;
esac
