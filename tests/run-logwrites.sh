#!/bin/bash
# Host side of the logwrites part of `make reliability` (issue #36, item 4):
# every crash point of an encrypted workload, not only random ones.
#
# One boot of the debug kernel (KUnit off: kunit.enable=0; make test runs
# it) runs tests/btrfs_fscrypt_logwrites.c alone, through the usual harness
# (vm-images/run-vm.sh; tests/guest-run.sh in the job), with two scratch
# disks: the workload (mkfs.btrfs -O encrypt, compress=zstd, per-extent
# keys, two master keys, fsyncs, renames, reflinks across keys, a rekey in
# the middle) is recorded with dm-log-writes, then replayed from the first
# entry onto an empty device, and at every flush, FUA and mark of the log
# the state is mounted read-write through a dm-snapshot (tree-log replay),
# every fsynced file and name checked, and `btrfs check` run.  `make test`
# runs the same program checking the marks only (its default).
#
#   tests/run-logwrites.sh
#
# Environment:
#   LOGWRITES_POINTS  all (default): every flush, FUA and mark; marks: the
#                     marks only; sample: what make test checks (a third
#                     of the marks, the commit, the rekey and the last)
#   LOGWRITES_SEED    the workload's seed (default the test's, 0x36f0004)
#   LOGWRITES_SCRATCH size of each of the two scratch disks (default 1G)
#   LOGWRITES_OUT     the report directory (default
#                     build/reliability/logwrites-<date>-<time>)
#   KERNEL, ROOT      default build/bzImage-6.12-debug, build/root.img
#   LOGWRITES_BIN     default build/tests/bin/btrfs_fscrypt_logwrites
#   TIMEOUT           the whole boot (default 3600 s)
#
# Writes to the report directory:
#   figures.tsv  the test's figures (entries, flush_points, points_checked,
#                flush_points_checked, marks, marks_checked, files_checked,
#                lost, name_errors, mount_failures, check_runs,
#                check_errors, check_clean, kmsg_bad, the controls,
#                record_s, replay_s, ...), splats (vm-images/console-check.sh) and duration_s
#   summary.md   the table, the failing points if any, the verdict; also
#                printed
#   test.log     the test's output; vm/ the boot; job/ what the guest ran
#
# Exit status: 0 when the test passed, every mark was checked, nothing was
# lost, btrfs check was clean at every point and the console shows no
# splat; 1 otherwise; 2 on a setup error (the message says what to do).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
die() { echo "run-logwrites.sh: $*" >&2; exit 2; }

kernel=${KERNEL:-$build/bzImage-6.12-debug}
root=${ROOT:-$build/root.img}
bin=${LOGWRITES_BIN:-$build/tests/bin/btrfs_fscrypt_logwrites}
points=${LOGWRITES_POINTS:-all}
seed=${LOGWRITES_SEED:-}
scratch=${LOGWRITES_SCRATCH:-1G}
out=${LOGWRITES_OUT:-$build/reliability/logwrites-$(date +%Y-%m-%d-%H%M%S)}
timeout=${TIMEOUT:-3600}

case $points in all | marks | sample) ;; *) die "LOGWRITES_POINTS must be all, marks or sample (got '$points')" ;; esac
case $seed in '' | [0-9]*) ;; *) die "LOGWRITES_SEED must be a number, decimal or 0x hex (got '$seed')" ;; esac
case $timeout in '' | *[!0-9]*) die "TIMEOUT must be a number of seconds (got '$timeout')" ;; esac
[ -x "$bin" ] || die "$bin is not built: run make -C tests (or make test)"
[ -f "$kernel" ] || die "no kernel $kernel: run make kernel FLAVOR=debug"
[ -f "$root" ] || die "no root image $root: run make image"
[ -x "$top/tests/guest-run.sh" ] || die "no tests/guest-run.sh in $top"
# a kernel built before the debug fragment had device-mapper cannot run it
if [ -f "$kernel.info" ] && [ -f "$build/obj-6.12-debug/.config" ] && [ "$kernel" = "$build/bzImage-6.12-debug" ]; then
	grep -q '^CONFIG_DM_LOG_WRITES=y' "$build/obj-6.12-debug/.config" ||
		die "$kernel has no dm-log-writes (CONFIG_DM_LOG_WRITES): run make kernel FLAVOR=debug"
fi

mkdir -p "$out/job/tests/bin" || die "cannot create $out (set LOGWRITES_OUT to a writable directory)"
out=$(cd "$out" && pwd)
ln -sfn "$(basename "$out")" "$(dirname "$out")/logwrites-latest" 2>/dev/null
rm -rf "$out/vm" "$out/figures.tsv" "$out/summary.md" "$out/test.log"
cp "$bin" "$out/job/tests/bin/btrfs_fscrypt_logwrites" || die "cannot copy $bin"
install -m 0755 "$top/tests/guest-run.sh" "$out/job/guest-run.sh" || die "cannot copy tests/guest-run.sh"
{
	echo '#!/bin/bash'
	echo '# written by tests/run-logwrites.sh'
	echo "export LOGWRITES_POINTS=$points"
	[ -n "$seed" ] && echo "export LOGWRITES_SEED=$seed"
	echo "export TEST_TIMEOUT=$((timeout - 120))"
	echo 'exec /job/guest-run.sh'
} >"$out/job/run"
chmod 0755 "$out/job/run"

case $points in
all) what="every flush, FUA and mark" ;;
marks) what="every mark" ;;
sample) what="a sample of the marks (what make test checks)" ;;
esac
echo "== logwrites: an encrypted workload recorded with dm-log-writes, replayed to $what${seed:+, seed $seed}"
echo "   report: $out"
start=$(date +%s)
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
"$top/vm-images/run-vm.sh" --kernel "$kernel" --root "$root" --job "$out/job" \
	--out "$out/vm" --scratch "$scratch" --scratch "$scratch" --timeout "$timeout" \
	--append kunit.enable=0 --lab-args btrfs_fscrypt_logwrites
vm_rc=$?
wall=$(( $(date +%s) - start ))
[ "$vm_rc" = 5 ] && die "the VM could not be started: $(cat "$out/vm/verdict" 2>/dev/null) (see vm-images/run-vm.sh --help)"

# ---- what came back ------------------------------------------------------------

# shellcheck source=tests/lib/part-results.sh
. "$top/tests/lib/part-results.sh"
part_results btrfs_fscrypt_logwrites logwrites-figures.tsv
printf 'duration_s\t%s\n' "$wall" >>"$out/figures.tsv"

ok=1
why=()
[ "$vm_rc" = 0 ] || { ok=0; why+=("the boot: $(cat "$out/vm/verdict" 2>/dev/null)"); }
[ "$status" = PASS ] || { ok=0; why+=("the test: ${status:-no result}"); }
if [ -z "$(fig marks_checked)" ]; then
	ok=0
	why+=("no figures came back (the test did not get to its end)")
else
	for k in lost name_errors mount_failures check_errors kmsg_bad splats; do
		[ "$(fig "$k")" = 0 ] || { ok=0; why+=("$k $(fig "$k")"); }
	done
	[ "$(fig check_clean)" = 1 ] || { ok=0; why+=("btrfs check was not clean at every point"); }
	[ "$(fig controls_ok)" = 1 ] || { ok=0; why+=("a control failed (missing at mkfs: $(fig control_missing); flipped byte found: $(fig control_flip_found)): the checks are blind"); }
	if [ "$points" != sample ] && { [ "$(fig marks_checked)" != "$(fig marks)" ] || [ "$(fig marks)" = 0 ]; }; then
		ok=0
		why+=("$(fig marks_checked) of $(fig marks) marks checked")
	fi
fi

# ---- the report ----------------------------------------------------------------

info() { sed -n "s/^$1=//p" "$out/vm/run.info" 2>/dev/null; }
{
	echo "# Reliability: every crash point of an encrypted workload (dm-log-writes)"
	echo
	echo "$started, kernel $(basename "$kernel") (series $(sed -n 's/^series_hash=//p' "$kernel.info" 2>/dev/null)), $(info accel) with $(info cpus) vCPUs, two scratch disks of $scratch; points: $points, seed ${seed:-the default (0x36f0004)}."
	echo
	echo "| log entries | flush/FUA entries | states checked | at flush/FUA | at marks | marks in the log | file checks | lost | name errors | mount failures | btrfs check (runs, unclean) | bad kernel lines | splats | duration |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s, %s | %s | %s | %s |\n' \
		"$(fig entries)" "$(fig flush_points)" "$(fig points_checked)" \
		"$(fig flush_points_checked)" "$(fig marks_checked)" "$(fig marks)" \
		"$(fig files_checked)" "$(fig lost)" "$(fig name_errors)" \
		"$(fig mount_failures)" "$(fig check_runs)" "$(fig check_errors)" \
		"$(fig kmsg_bad)" "$splats" \
		"$((wall / 60)) min $((wall % 60)) s (boot; recording $(fig record_s) s, replay $(fig replay_s) s)"
	echo
	if [ -n "$(fig controls_ok)" ]; then
		echo "Controls: at the mark \`mkfs\` $(fig control_missing) files of the end missing (all must be); a byte flipped in the model at the last mark found: $(fig control_flip_found)."
		echo
	fi
	if [ "$points" = all ] && [ -n "$(fig flush_points)" ]; then
		echo "Of the $(fig flush_points) flush/FUA entries, $(fig flush_points_before_mkfs) come before the mark \`mkfs\` (no filesystem yet), $(fig flush_points_checked) were checked as states of their own, and $(fig flush_points_merged) left the same state as the next mark or flush (no write between), checked there."
		echo
	fi
	echo "Test: ${status:-no result} (${test_secs:-?} s); boot: $(cat "$out/vm/verdict" 2>/dev/null)."
	echo
	if [ -s "$out/test.log" ]; then
		echo "Where the test's time went (seconds since its start):"
		echo
		grep -a '^== \[' "$out/test.log" | sed 's/^== \[\([0-9.]*\)s\] /- \1 s: /'
		echo
		if grep -aq '^FAIL' "$out/test.log"; then
			echo "## Failing points"
			echo
			grep -a '^FAIL' "$out/test.log" | head -n 40 | sed 's/^/    /'
			echo
		fi
	fi
	echo "## Splats"
	echo
	if [ "$splats" = 0 ]; then
		echo "None on the console."
	else
		printf '%s\n' "$splat_lines" | head -n 40 | sed 's/^/- /'
	fi
	echo
	if [ "$ok" = 1 ]; then
		echo "Verdict: PASS."
	else
		echo "Verdict: FAIL:"
		printf -- '- %s\n' "${why[@]}"
	fi
} >"$out/summary.md"
cat "$out/summary.md"
[ "$ok" = 1 ] || exit 1
exit 0
