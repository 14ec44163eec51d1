#!/bin/bash
# Host side of the reliability part rekey-adversary (issue #33, item 5):
# BTRFS_IOC_FSCRYPT_REKEY in a loop beside tasks, some of them unprivileged,
# that hold inodes through unencrypted parents and a second subvol= mount,
# set policies, create, rename, link, unlink, read, write, reflink, remove
# and re-add keys and snapshot (tests/btrfs_fscrypt_rekey_adversary.c says
# what and how it is checked).
#
# One boot of the debug kernel (KUnit off: kunit.enable=0; make test runs
# it) runs the test alone through the usual harness (vm-images/run-vm.sh;
# tests/guest-run.sh in the job, whose run script sets the test's
# REKEY_ADVERSARY_* variables) for REKEY_ADVERSARY_SECONDS, then its final
# rekey, btrfs check and the verification of every name and file. `make
# test` runs the same program with its short default (75 s).
#
#   tests/run-rekey-adversary.sh
#
# Environment:
#   REKEY_ADVERSARY_SECONDS  seconds of the adversary (default 1800)
#   REKEY_ADVERSARY_SEED     the seed (default: the test picks one and prints it)
#   REKEY_ADVERSARY_SKIP     operations left out (e.g. setpolicy,unlink)
#   REKEY_ADVERSARY_SCRATCH  size of the scratch disk (default 2G)
#   REKEY_ADVERSARY_OUT      the report directory (default
#                            build/reliability/rekey-adversary-<date>-<time>)
#   KERNEL, ROOT             default build/bzImage-6.12-debug, build/root.img
#   REKEY_ADVERSARY_BIN      default build/tests/bin/btrfs_fscrypt_rekey_adversary
#   TIMEOUT                  the whole boot (default REKEY_ADVERSARY_SECONDS + 1800 s)
#
# Writes to the report directory:
#   figures.tsv   the test's figures (seed, seconds, rekeys_completed,
#                 rekeys_tried, rekeys_busy, rekeys_enokey, ops,
#                 live_failures, garbage_names, mismatches,
#                 readlinks_nokey, kmsg_bad, aborts, went_ro,
#                 names_checked, disk_errors, files_checked, files_bad,
#                 check_clean, failures) and splats (kernel
#                 splats on the console, vm-images/console-check.sh)
#   summary.md    the figures, the operations by result, the failures and
#                 kernel log lines, the verdict; also printed
#   test.log      the test's output; vm/ the boot; job/ what the guest ran
#
# Exit status: 0 when the test passed, its figures are clean (no failure,
# no transaction abort, never read-only, btrfs check clean) and the console
# shows no splat and no btrfs error; 1 otherwise; 2 on a setup error.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
die() { echo "run-rekey-adversary.sh: $*" >&2; exit 2; }

name=btrfs_fscrypt_rekey_adversary
kernel=${KERNEL:-$build/bzImage-6.12-debug}
root=${ROOT:-$build/root.img}
bin=${REKEY_ADVERSARY_BIN:-$build/tests/bin/$name}
seconds=${REKEY_ADVERSARY_SECONDS:-1800}
seed=${REKEY_ADVERSARY_SEED:-}
skip=${REKEY_ADVERSARY_SKIP:-}
scratch=${REKEY_ADVERSARY_SCRATCH:-2G}
out=${REKEY_ADVERSARY_OUT:-$build/reliability/rekey-adversary-$(date +%Y-%m-%d-%H%M%S)}

case $seconds in
'' | *[!0-9]*) die "REKEY_ADVERSARY_SECONDS must be a whole number of seconds (got '$seconds')" ;;
esac
case $seed in
'' | [0-9]*) ;;
*) die "REKEY_ADVERSARY_SEED must be a number, decimal or 0x hex (got '$seed')" ;;
esac
case $skip in
*[!a-z,-]*) die "REKEY_ADVERSARY_SKIP is a comma-separated list of operation names (got '$skip')" ;;
esac
timeout=${TIMEOUT:-$((seconds + 1800))}
[ -x "$bin" ] || die "$bin is not built: run make tests-bin"
[ -f "$kernel" ] || die "no kernel $kernel: run make kernel FLAVOR=debug"
[ -f "$root" ] || die "no root image $root: run make image"

mkdir -p "$out/job/tests/bin" || die "cannot create $out (set REKEY_ADVERSARY_OUT to a writable directory)"
out=$(cd "$out" && pwd)
ln -sfn "$(basename "$out")" "$(dirname "$out")/rekey-adversary-latest" 2>/dev/null
rm -rf "$out/vm" "$out/figures.tsv" "$out/summary.md" "$out/test.log"
cp "$bin" "$out/job/tests/bin/$name" || die "cannot copy $bin"
install -m 0755 "$top/tests/guest-run.sh" "$out/job/guest-run.sh" || die "cannot copy tests/guest-run.sh"
{
	echo '#!/bin/bash'
	echo '# written by tests/run-rekey-adversary.sh'
	echo "export REKEY_ADVERSARY_SECONDS=$seconds"
	[ -n "$seed" ] && echo "export REKEY_ADVERSARY_SEED=$seed"
	[ -n "$skip" ] && echo "export REKEY_ADVERSARY_SKIP=$skip"
	# the guest harness's limit per test: the run and its checks
	echo "export TEST_TIMEOUT=$((timeout - 300))"
	echo 'exec /job/guest-run.sh'
} >"$out/job/run"
chmod 0755 "$out/job/run"

echo "== rekey-adversary: $seconds s of rekeys beside holders, unprivileged policies, namespace and data operations, key removal and snapshots${seed:+, seed $seed}${skip:+, without $skip}"
echo "   report: $out"
start=$(date +%s)
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
"$top/vm-images/run-vm.sh" --kernel "$kernel" --root "$root" --job "$out/job" \
	--out "$out/vm" --scratch "$scratch" --timeout "$timeout" \
	--append kunit.enable=0 --lab-args "$name"
vm_rc=$?
wall=$(( $(date +%s) - start ))
[ "$vm_rc" = 5 ] && die "the VM could not be started: $(cat "$out/vm/verdict" 2>/dev/null) (see vm-images/run-vm.sh --help)"

# ---- what came back ------------------------------------------------------------

# shellcheck source=tests/lib/part-results.sh
. "$top/tests/lib/part-results.sh"
part_results "$name" rekey-adversary-figures.tsv
btrfs_errors=$(grep -a -E '^\[ *[0-9]+\.[0-9]+\] BTRFS (error|critical)|Transaction aborted|forced readonly' "$out/vm/console.log" 2>/dev/null)
nbtrfs_errors=0
[ -n "$btrfs_errors" ] && nbtrfs_errors=$(printf '%s\n' "$btrfs_errors" | wc -l)


ok=1
why=()
[ "$vm_rc" = 0 ] || { ok=0; why+=("the boot: $(cat "$out/vm/verdict" 2>/dev/null)"); }
[ "$status" = PASS ] || { ok=0; why+=("the test: ${status:-no result}"); }
if [ -z "$(fig rekeys_completed)" ]; then
	ok=0
	why+=("no figures came back (the test did not get to its end)")
else
	for k in failures live_failures aborts went_ro kmsg_bad splats; do
		[ "$(fig "$k")" = 0 ] || { ok=0; why+=("$k $(fig "$k")"); }
	done
	[ "$(fig check_clean)" = 1 ] || { ok=0; why+=("btrfs check was not clean"); }
	[ "$(fig rekeys_completed)" != 0 ] || { ok=0; why+=("no rekey completed"); }
fi
[ "$nbtrfs_errors" = 0 ] || { ok=0; why+=("$nbtrfs_errors btrfs error or abort lines on the console"); }

# ---- the report ----------------------------------------------------------------

info() { sed -n "s/^$1=//p" "$out/vm/run.info" 2>/dev/null; }
{
	echo "# Reliability: rekeys beside a concurrent adversary"
	echo
	echo "$started, kernel $(basename "$kernel") (series $(sed -n 's/^series_hash=//p' "$kernel.info" 2>/dev/null)), $(info accel) with $(info cpus) vCPUs, scratch disk $scratch; $seconds s asked, seed $(fig seed)${skip:+, without $skip}."
	echo
	echo "| seconds | rekeys completed | rekeys tried | EBUSY | ENOKEY | operations | failures (during the run) | aborts | read-only | names checked | files checked | btrfs check clean | splats | duration |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	printf '| %s | %s | %s | %s | %s | %s | %s (%s) | %s | %s | %s | %s | %s | %s | %s |\n' \
		"$(fig seconds)" "$(fig rekeys_completed)" "$(fig rekeys_tried)" "$(fig rekeys_busy)" \
		"$(fig rekeys_enokey)" "$(fig ops)" "$(fig failures)" "$(fig live_failures)" \
		"$(fig aborts)" "$(fig went_ro)" "$(fig names_checked)" "$(fig files_checked)" \
		"$(fig check_clean)" "$splats" "$((wall / 60)) min $((wall % 60)) s (boot; the test ${test_secs:-?} s)"
	echo
	echo "Test: ${status:-no result}; boot: $(cat "$out/vm/verdict" 2>/dev/null)."
	echo
	if [ -s "$out/test.log" ]; then
		grep -a -m 1 '^adversary: ' "$out/test.log" | sed 's/^/- /'
		grep -a -m 1 '^names listed: ' "$out/test.log" | sed 's/^/- /'
		grep -a -m 1 '^key removals: ' "$out/test.log" | sed 's/^/- /'
		echo
		echo "Operations by result:"
		echo
		sed -n '/^operations (result: count):/,/^key removals:/p' "$out/test.log" | grep -a '^  ' | sed 's/^  /    /'
		echo
	fi
	echo "## Splats, btrfs errors and aborts"
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
