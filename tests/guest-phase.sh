#!/bin/bash
# In-guest side of a phased test; becomes /job/run (see tests/run-phased.sh).
#
# $LAB_ARGS is "<name>:<phase>": run /job/tests/phased/<name> <phase> on the
# scratch disks (which run-phased.sh keeps from one boot to the next).
# The test writes straight to the console, not through a pipe: a phase that
# ends by crashing the VM would lose what a pipe still holds, and the console
# log is the only record of such a boot (run-phased.sh takes each phase's
# output from it). A phase that returns gets its exit status saved in
# $RESULTS/phase-rc: 0 pass, 77 skip, anything else fail.
export SCRATCH_DEV=/dev/vdd SCRATCH_DEV2=/dev/vde SCRATCH_MNT=/mnt/scratch
export SCRATCH_MNT2=/mnt/scratch2
TEST_TIMEOUT=${TEST_TIMEOUT:-600}
mkdir -p "$RESULTS" "$SCRATCH_MNT" "$SCRATCH_MNT2"

name=${LAB_ARGS%%:*} phase=${LAB_ARGS#*:}
t=/job/tests/phased/$name
if [ -z "$name" ] || [ "$phase" = "$LAB_ARGS" ] || [ ! -x "$t" ]; then
	echo "guest-phase.sh: bad LAB_ARGS '$LAB_ARGS' (want <name>:<phase> with /job/tests/phased/<name>)" >/dev/console
	echo 2 >"$RESULTS/phase-rc"
	exit 0
fi

echo "LAB-TEST-START $name:$phase" >/dev/console
start=$(date +%s)
timeout -k 10 "$TEST_TIMEOUT" "$t" "$phase" </dev/null >/dev/console 2>&1
rc=$?
[ $rc = 124 ] && echo "(killed after ${TEST_TIMEOUT}s)" >/dev/console
echo "$rc" >"$RESULTS/phase-rc"
echo "LAB-TEST-END $name:$phase rc=$rc ($(( $(date +%s) - start ))s)" >/dev/console
umount -q "$SCRATCH_MNT" "$SCRATCH_MNT2" 2>/dev/null
dmesg >"$RESULTS/dmesg.txt"
exit 0
