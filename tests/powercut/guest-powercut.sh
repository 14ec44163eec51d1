#!/bin/bash
# In-guest side of tests/run-powercut.sh; becomes /job/run.
#
# $LAB_ARGS is "<what>:<seed>:<cut>":
#   first           work on a new filesystem (mkfs), until the host kills the VM
#   cycle           verify the previous cut; if that passed, work until killed
#   last            verify the previous cut only
#   last-selfcheck  the same with a corrupted log record (the verifier must
#                   report loss: the control of the whole chain)
# The program writes straight to the console, not through a pipe: a boot
# ends with a kill, and the console log is the only record the host has
# (it reads the verifier's "powercut-verify:" line and waits for
# "powercut: working" there). Scratch disks: /dev/vdd the filesystem,
# /dev/vde the log.
export SCRATCH_DEV=/dev/vdd SCRATCH_DEV2=/dev/vde SCRATCH_MNT=/mnt/scratch
# POWERCUT_BIN of tests/run-powercut.sh, under a fixed name.
bin=/job/powercut-prog
mkdir -p "$SCRATCH_MNT" "$RESULTS"

# A test configuration (tests/configs/<name>.conf, POWERCUT_CONFIG of
# tests/run-powercut.sh): its mkfs and mount options for the program's
# lab_mkfs() and lab_mount().
if [ -f /job/config.conf ]; then
	# shellcheck disable=SC1091 # a data file of tests/configs/, copied in
	. /job/config.conf
	export LAB_BTRFS_MKFS_OPTS=${BTRFS_MKFS_OPTS:-} LAB_BTRFS_MOUNT_OPTS=${BTRFS_MOUNT_OPTS:-}
	echo "powercut: configuration: mkfs.btrfs options '$LAB_BTRFS_MKFS_OPTS', btrfs mount options '$LAB_BTRFS_MOUNT_OPTS'" >/dev/console
fi

IFS=: read -r what seed cut <<<"${LAB_ARGS:-}"
case $what in
first | cycle | last | last-selfcheck) ;;
*)
	echo "guest-powercut.sh: bad LAB_ARGS '${LAB_ARGS:-}' (want first|cycle|last|last-selfcheck:<seed>:<cut>)" >/dev/console
	exit 2
	;;
esac

echo "LAB-TEST-START powercut:$what:$cut" >/dev/console
vrc=0
if [ "$what" != first ]; then
	flag=
	[ "$what" = last-selfcheck ] && flag=--self-check
	start=$(date +%s)
	# shellcheck disable=SC2086 # $flag is empty or one word
	"$bin" verify $flag </dev/null >/dev/console 2>&1
	vrc=$?
	echo "LAB-POWERCUT-VERIFY rc=$vrc ($(( $(date +%s) - start ))s)" >/dev/console
	umount -q "$SCRATCH_MNT" 2>/dev/null
fi
echo "$vrc" >"$RESULTS/verify-rc"
if [ "$vrc" = 0 ] && { [ "$what" = first ] || [ "$what" = cycle ]; }; then
	mkfs=
	[ "$what" = first ] && mkfs=--mkfs
	# shellcheck disable=SC2086 # $mkfs is empty or one word
	"$bin" work "$seed" "$cut" $mkfs </dev/null >/dev/console 2>&1
	wrc=$?
	echo "LAB-POWERCUT-WORK-ENDED rc=$wrc" >/dev/console
	echo "$wrc" >"$RESULTS/work-rc"
	exit "$wrc"
fi
dmesg >"$RESULTS/dmesg.txt"
exit "$vrc"
