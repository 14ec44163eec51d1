#!/bin/bash
# In-guest test harness; becomes /job/run (see tests/run-tests.sh).
#
# Runs every test program in /job/tests/bin in name order (the scratch disks
# are zero at boot, not between tests: each test makes its own filesystem),
# and writes one line per test to
# $RESULTS/tests.tsv: name, status (PASS/FAIL/SKIP), seconds.
# Exit status convention of a test: 0 pass, 77 skip, anything else fail.
# A "LAB-TEST-START <name>" marker on the console lets the host attribute a
# kernel splat to the test that was running, and the "LAB-TEST <status>
# <name> (<n>s)" line after each test gives the host its result even when
# the results disk never comes back (a panic, a timeout): tests/run-tests.sh
# reads both, in this form.
export SCRATCH_DEV=/dev/vdd SCRATCH_DEV2=/dev/vde SCRATCH_MNT=/mnt/scratch
export SCRATCH_MNT2=/mnt/scratch2 PATH=/job/tests/bin:$PATH
TEST_TIMEOUT=${TEST_TIMEOUT:-900}
mkdir -p "$RESULTS/tests" "$SCRATCH_MNT" "$SCRATCH_MNT2"
: >"$RESULTS/tests.tsv"
# The boot log, with the KUnit results, before the tests can push it out
# of the kernel's ring buffer.
dmesg >"$RESULTS/dmesg-boot.txt"

only=${LAB_ARGS:-}	# optional comma-separated list of tests to run
wanted() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }

# run_test NAME PROGRAM [VAR=VALUE...]: one result line.
run_test() {
	local name=$1 t=$2 start rc secs status
	shift 2
	echo "LAB-TEST-START $name" >/dev/console
	start=$(date +%s)
	env "$@" timeout -k 10 "$TEST_TIMEOUT" "$t" >>"$RESULTS/tests/$name.log" 2>&1
	rc=$?
	secs=$(( $(date +%s) - start ))
	umount -q "$SCRATCH_MNT" "$SCRATCH_MNT2" 2>/dev/null
	case $rc in
	0) status=PASS ;;
	77) status=SKIP ;;
	124) status=FAIL; echo "(killed after ${TEST_TIMEOUT}s)" >>"$RESULTS/tests/$name.log" ;;
	*) status=FAIL ;;
	esac
	printf '%s\t%s\t%s\n' "$name" "$status" "$secs" >>"$RESULTS/tests.tsv"
	echo "LAB-TEST $status $name (${secs}s)" >/dev/console
}

for t in /job/tests/bin/*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	wanted "$name" && run_test "$name" "$t"
done

# Test configurations (tests/configs/*.conf): some tests again, with the
# configuration's btrfs mount options; results named <test>@<config>.
for conf in /job/configs/*.conf; do
	[ -f "$conf" ] || continue
	cfg=$(basename "$conf" .conf)
	# shellcheck disable=SC1090 # data files of tests/configs/
	( . "$conf"
	for name in $TESTS; do
		[ -x "/job/tests/bin/$name" ] || continue
		wanted "$name@$cfg" || wanted "$cfg" || continue
		printf '%s: %s\nmkfs.btrfs options: %s\nmount options of every btrfs mount: %s\n' \
			"$cfg" "$DESCRIPTION" "${BTRFS_MKFS_OPTS:-}" "$BTRFS_MOUNT_OPTS" \
			>"$RESULTS/tests/$name@$cfg.log"
		run_test "$name@$cfg" "/job/tests/bin/$name" \
			"LAB_BTRFS_MKFS_OPTS=${BTRFS_MKFS_OPTS:-}" \
			"LAB_BTRFS_MOUNT_OPTS=$BTRFS_MOUNT_OPTS"
	done )
done
dmesg >"$RESULTS/dmesg.txt"

# KUnit suites built into the kernel ran at boot; their KTAP results are in
# the kernel log. One line per test case, as kunit/<suite>/<case>.
sed 's/^\[[ 0-9.]*\] //' "$RESULTS/dmesg-boot.txt" | awk -v out="$RESULTS" '
	/^    # Subtest: / { suite = $3; next }
	suite != "" && /^    (not )?ok [0-9]+ / {
		status = ($1 == "not") ? "FAIL" : "PASS"
		name = ($1 == "not") ? $4 : $3
		if ($0 ~ / # SKIP/) status = "SKIP"
		printf "kunit/%s/%s\t%s\t0\n", suite, name, status >> (out "/tests.tsv")
		next
	}
	suite != "" { print >> (out "/tests/kunit-" suite ".log") }
	/^(not )?ok [0-9]+ / { suite = "" }
'
exit 0
