#!/bin/bash
# Host side of the stress run of issue #14 (parts 4 and 5: concurrent
# stress, leaks).
#
# One boot of the debug kernel (KUnit off: kunit.enable=0; make test runs
# it) runs tests/btrfs_fscrypt_stress.c alone,
# through the usual harness (vm-images/run-vm.sh; tests/guest-run.sh in the
# job, whose run script sets the test's STRESS_* variables): random
# operations on encrypted files of both key modes for STRESS_SECONDS while
# balance, scrub and drop_caches loop, then the model check, a final scrub,
# btrfs check and the raw-device leak scan with its control. `make test`
# runs the same program with its short default.
#
#   tests/run-stress.sh
#
# Environment:
#   STRESS_SECONDS   seconds of random operations (default 600)
#   STRESS_SEED      the generator's seed (default the test's, 0x14f0004)
#   STRESS_PROGRESS  a progress line every N seconds (default 60)
#   STRESS_SCRATCH   size of the scratch disk (default 2G)
#   STRESS_OUT       the report directory (default
#                    build/reliability/stress-<date>-<time>)
#   KERNEL, ROOT     default build/bzImage-6.12-debug, build/root.img
#   STRESS_BIN       default build/tests/bin/btrfs_fscrypt_stress
#   TIMEOUT          the whole boot (default STRESS_SECONDS + 1800 s)
#
# Writes to the report directory:
#   figures.tsv      the test's figures (seconds, ops, balances, scrubs,
#                    scrub_errors, check_errors, leak_hits, control_found,
#                    files_checked, mismatches; rekeys, rekeys_refused,
#                    rekeys_busy, rekey_files_moved, reflinks,
#                    reflinks_cross_key, compress_changes,
#                    compressible_writes, compressed_extents_prologue,
#                    compressed_extents_end, compressed_files_end,
#                    chunks_relocated, scrub_bytes) and splats (kernel
#                    splats on the console, vm-images/console-check.sh)
#   summary.md       the table, the operations and what the background did,
#                    splats and btrfs error lines, the verdict; also printed
#   test.log         the test's output; vm/ the boot (console.log,
#                    results/, run.info, verdict); job/ what the guest ran
#
# Exit status: 0 when the test passed, every figure is clean (0 scrub and
# check errors, 0 leak hits, the control found, 0 mismatches) and the
# console shows no splat and no btrfs error; 1 otherwise; 2 on a setup error
# (the message says what to do).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
die() { echo "run-stress.sh: $*" >&2; exit 2; }

kernel=${KERNEL:-$build/bzImage-6.12-debug}
root=${ROOT:-$build/root.img}
bin=${STRESS_BIN:-$build/tests/bin/btrfs_fscrypt_stress}
seconds=${STRESS_SECONDS:-600}
seed=${STRESS_SEED:-}
progress=${STRESS_PROGRESS:-60}
scratch=${STRESS_SCRATCH:-2G}
out=${STRESS_OUT:-$build/reliability/stress-$(date +%Y-%m-%d-%H%M%S)}

case $seconds$progress in
'' | *[!0-9]*) die "STRESS_SECONDS and STRESS_PROGRESS must be whole numbers of seconds (got '$seconds', '$progress')" ;;
esac
case $seed in
'' | [0-9]* ) ;;
*) die "STRESS_SEED must be a number, decimal or 0x hex (got '$seed')" ;;
esac
timeout=${TIMEOUT:-$((seconds + 1800))}
[ -x "$bin" ] || die "$bin is not built: run make -C tests (or make test)"
[ -f "$kernel" ] || die "no kernel $kernel: run make kernel FLAVOR=debug"
[ -f "$root" ] || die "no root image $root: run make image"
[ -x "$top/tests/guest-run.sh" ] || die "no tests/guest-run.sh in $top"

mkdir -p "$out/job/tests/bin" || die "cannot create $out (set STRESS_OUT to a writable directory)"
out=$(cd "$out" && pwd)
ln -sfn "$(basename "$out")" "$(dirname "$out")/stress-latest" 2>/dev/null
rm -rf "$out/vm" "$out/figures.tsv" "$out/summary.md" "$out/test.log"
cp "$bin" "$out/job/tests/bin/btrfs_fscrypt_stress" || die "cannot copy $bin"
install -m 0755 "$top/tests/guest-run.sh" "$out/job/guest-run.sh" || die "cannot copy tests/guest-run.sh"
{
	echo '#!/bin/bash'
	echo '# written by tests/run-stress.sh'
	echo "export STRESS_SECONDS=$seconds STRESS_PROGRESS=$progress"
	[ -n "$seed" ] && echo "export STRESS_SEED=$seed"
	# the guest harness's limit per test: the run and its checks
	echo "export TEST_TIMEOUT=$((timeout - 300))"
	echo 'exec /job/guest-run.sh'
} >"$out/job/run"
chmod 0755 "$out/job/run"

echo "== stress: $seconds s of random operations on encrypted btrfs with balance, scrub, drop_caches${seed:+, seed $seed}"
echo "   report: $out"
start=$(date +%s)
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
"$top/vm-images/run-vm.sh" --kernel "$kernel" --root "$root" --job "$out/job" \
	--out "$out/vm" --scratch "$scratch" --timeout "$timeout" \
	--append kunit.enable=0 --lab-args btrfs_fscrypt_stress
vm_rc=$?
wall=$(( $(date +%s) - start ))
[ "$vm_rc" = 5 ] && die "the VM could not be started: $(cat "$out/vm/verdict" 2>/dev/null) (see vm-images/run-vm.sh --help)"

# ---- what came back ------------------------------------------------------------

# shellcheck source=tests/lib/part-results.sh
. "$top/tests/lib/part-results.sh"
part_results btrfs_fscrypt_stress stress-figures.tsv
btrfs_errors=$(grep -a -E '^\[ *[0-9]+\.[0-9]+\] BTRFS (error|critical)' "$out/vm/console.log" 2>/dev/null)
nbtrfs_errors=0
[ -n "$btrfs_errors" ] && nbtrfs_errors=$(printf '%s\n' "$btrfs_errors" | wc -l)


ok=1
why=()
[ "$vm_rc" = 0 ] || { ok=0; why+=("the boot: $(cat "$out/vm/verdict" 2>/dev/null)"); }
[ "$status" = PASS ] || { ok=0; why+=("the test: ${status:-no result}"); }
if [ "$(wc -l <"$out/figures.tsv")" -lt 11 ]; then
	ok=0
	why+=("no figures came back (the test did not get to its end)")
else
	for k in scrub_errors check_errors leak_hits mismatches splats; do
		[ "$(fig "$k")" = 0 ] || { ok=0; why+=("$k $(fig "$k")"); }
	done
	[ "$(fig control_found)" = 1 ] || { ok=0; why+=("the leak scan's control was not found: the scan is blind"); }
fi
[ "$nbtrfs_errors" = 0 ] || { ok=0; why+=("$nbtrfs_errors btrfs error lines on the console"); }

# ---- the report ----------------------------------------------------------------

info() { sed -n "s/^$1=//p" "$out/vm/run.info" 2>/dev/null; }
logline() { grep -a -m 1 "^# $1" "$out/test.log" 2>/dev/null | sed 's/^# //'; }
{
	echo "# Reliability: concurrent stress on encrypted btrfs"
	echo
	echo "$started, kernel $(basename "$kernel") (series $(sed -n 's/^series_hash=//p' "$kernel.info" 2>/dev/null)), $(info accel) with $(info cpus) vCPUs, scratch disk $scratch; $seconds s of random operations, seed ${seed:-the default (0x14f0004)}."
	echo
	echo "| seconds | ops | balances | scrubs | scrub errors | check errors | leak hits | control found | files checked | mismatches | splats | duration |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
	printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
		"$(fig seconds)" "$(fig ops)" "$(fig balances)" "$(fig scrubs)" \
		"$(fig scrub_errors)" "$(fig check_errors)" "$(fig leak_hits)" \
		"$(fig control_found)" "$(fig files_checked)" "$(fig mismatches)" \
		"$splats" "$((wall / 60)) min $((wall % 60)) s (boot; the test ${test_secs:-?} s)"
	echo
	echo "What each kind of operation did (issue #36: rekeys, reflinks across master keys, compression settings, beside scrub and balance):"
	echo
	echo "| rekeys done | refused EOPNOTSUPP / EBUSY | files moved by rekeys | reflinks (across keys) | compression changes | compressible writes | compressed extents: prologue file / end (files) | chunks relocated | bytes scrubbed |"
	echo "|---|---|---|---|---|---|---|---|---|"
	printf '| %s | %s / %s | %s | %s (%s) | %s | %s | %s / %s (%s) | %s | %s |\n' \
		"$(fig rekeys)" "$(fig rekeys_refused)" "$(fig rekeys_busy)" \
		"$(fig rekey_files_moved)" "$(fig reflinks)" "$(fig reflinks_cross_key)" \
		"$(fig compress_changes)" "$(fig compressible_writes)" \
		"$(fig compressed_extents_prologue)" "$(fig compressed_extents_end)" \
		"$(fig compressed_files_end)" "$(fig chunks_relocated)" "$(fig scrub_bytes)"
	echo
	echo "Test: ${status:-no result}; boot: $(cat "$out/vm/verdict" 2>/dev/null)."
	echo
	if [ -s "$out/test.log" ]; then
		for k in operations reflinks renames rekeys compression "prologue:" "compressed extents" balancer scrubber dropper "after a remount"; do
			l=$(logline "$k")
			[ -n "$l" ] && echo "- $l"
		done
		grep -a -E '^  (run tag|encrypted marker|encrypted name|control marker|unencrypted name) ' "$out/test.log" |
			sed 's/^  /- raw scan: /'
		echo
		echo "Where the test's time went (seconds since its start):"
		echo
		grep -a '^== \[' "$out/test.log" | sed 's/^== \[\([0-9.]*\)s\] /- \1 s: /'
		echo
	fi
	echo "## Splats and btrfs errors"
	echo
	if [ "$splats" = 0 ] && [ "$nbtrfs_errors" = 0 ]; then
		echo "None on the console."
	else
		[ -n "$splat_lines" ] && printf '%s\n' "$splat_lines" | head -n 40 | sed 's/^/- /'
		[ -n "$btrfs_errors" ] && printf '%s\n' "$btrfs_errors" | head -n 20 | sed 's/^/- /'
	fi
	echo
	if [ "$ok" = 1 ]; then
		echo "Verdict: PASS."
	else
		echo "Verdict: FAIL:"
		printf -- '- %s\n' "${why[@]}"
		if [ -s "$out/test.log" ]; then
			echo
			echo "Test failures (test.log):"
			echo
			grep -a '^FAIL' "$out/test.log" | head -n 20 | sed 's/^/    /'
		fi
	fi
} >"$out/summary.md"
cat "$out/summary.md"
[ "$ok" = 1 ] || exit 1
exit 0
