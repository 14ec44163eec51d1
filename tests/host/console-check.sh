#!/bin/bash
# Unit test of vm-images/console-check.sh on synthetic console logs: every
# kind of splat is found and named, a clean log passes, and userspace text
# that merely contains "WARNING" or "BUG:" is not mistaken for a splat.
# Attribution to the test running (markers, also on a \r\n console), and
# --by-test, the per-test form tests/run-tests.sh reads.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
check=$top/vm-images/console-check.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

expect() { # name expected-rc expected-kind log-lines...
	local name=$1 want_rc=$2 want_kind=$3 out rc
	shift 3
	printf '%s\n' "$@" >"$tmp/$name.log"
	out=$("$check" "$tmp/$name.log")
	rc=$?
	if [ "$rc" != "$want_rc" ]; then
		echo "FAIL $name: exit $rc, expected $want_rc; output: $out"; fails=$((fails + 1)); return
	fi
	if [ -n "$want_kind" ] && [ "${out%%:*}" != "$want_kind" ]; then
		echo "FAIL $name: kind '${out%%:*}', expected '$want_kind'"; fails=$((fails + 1)); return
	fi
	echo "ok   $name${out:+: $out}"
}

boot='[    0.000000] Linux version 6.1.192+'
expect clean 0 "" "$boot" "[    8.160354] Run /sbin/lab-init as init process" "LAB-TEST-START t1" "all good"
expect userspace-words 0 "" "$boot" "WARNING: this is test output" "BUG: not a kernel line" "Kernel panic - in a comment"
expect kasan 1 "KASAN report" "$boot" "LAB-TEST-START t2" "[   12.1] ==================================================================" "[   12.2] BUG: KASAN: slab-use-after-free in fscrypt_put_extent_info+0x1/0x2"
expect lockdep 1 "lockdep report" "$boot" "[    3.0] WARNING: possible circular locking dependency detected"
expect lockdep-inconsistent 1 "lockdep report" "$boot" "[    3.0] WARNING: inconsistent lock state"
expect atomic-sleep 1 "sleep in atomic" "$boot" "[    3.0] BUG: sleeping function called from invalid context at mm/slab.h:723"
expect hung-task 1 "hung task" "$boot" "[  250.0] INFO: task kworker/u4:1:42 blocked for more than 120 seconds."
expect oops 1 "oops" "$boot" "[    5.0] BUG: kernel NULL pointer dereference, address: 0000000000000000" "[    5.1] Oops: 0002 [#1] PREEMPT SMP KASAN"
expect kernel-bug 1 "oops" "$boot" "[    5.0] kernel BUG at fs/btrfs/inode.c:1234!"
expect warning 1 "WARNING" "$boot" "[    5.0] ------------[ cut here ]------------" "[    5.1] WARNING: CPU: 1 PID: 77 at fs/crypto/keysetup.c:99 f+0x1/0x2"
expect panic 1 "kernel panic" "$boot" "[    5.0] Kernel panic - not syncing: VFS: Unable to mount root fs"
expect rcu-stall 1 "soft lockup / RCU stall" "$boot" "[   60.0] rcu: INFO: rcu_preempt self-detected stall on CPU"

# The splat is attributed to the test that was running.
printf '%s\n' "$boot" "LAB-TEST-START first" "LAB-TEST-START second" "[ 9.0] WARNING: CPU: 0 PID: 1 at x.c:1 f" >"$tmp/attr.log"
if "$check" "$tmp/attr.log" | grep -q "(during second)"; then
	echo "ok   attribution"
else
	echo "FAIL attribution: $("$check" "$tmp/attr.log")"; fails=$((fails + 1))
fi

# The serial console ends lines with \r\n: test names come out without it.
printf '%s\r\n' "$boot" "LAB-TEST-START first" "[ 9.0] BUG: KASAN: use-after-free in f+0x1/0x2" >"$tmp/crlf.log"
if "$check" "$tmp/crlf.log" | grep -q " f+0x1/0x2 (during first)$"; then
	echo "ok   attribution on a \\r\\n console"
else
	echo "FAIL attribution on a \\r\\n console: $("$check" "$tmp/crlf.log" | od -c | head -n 5)"; fails=$((fails + 1))
fi

# --by-test: one line per test with a splat, in console order, with its
# count and first telling line ("cut here" passed over for the WARNING).
printf '%s\r\n' "$boot" "[ 1.0] BUG: sleeping function called from invalid context at x.c:1" \
	"LAB-TEST-START t1" "[ 2.0] all fine" "LAB-TEST-START t2" "[ 3.0] ------------[ cut here ]------------" \
	"[ 3.1] WARNING: CPU: 0 PID: 9 at fs/x.c:5 g+0x1/0x2" "[ 3.2] ---[ end trace 0000000000000000 ]---" \
	"[ 4.0] Oops: 0002 [#1] PREEMPT SMP" >"$tmp/bytest.log"
want=$(printf '%s\t%s\t%s\t%s\t%s\n' boot 1 "sleep in atomic" 2 "BUG: sleeping function called from invalid context at x.c:1" \
	t2 3 WARNING 7 "WARNING: CPU: 0 PID: 9 at fs/x.c:5 g+0x1/0x2")
got=$("$check" --by-test "$tmp/bytest.log")
rc=$?
if [ "$rc" = 1 ] && [ "$got" = "$want" ]; then
	echo "ok   --by-test: boot and t2, t2's WARNING line rather than cut here"
else
	echo "FAIL --by-test: exit $rc, got:"; echo "$got"; echo "want:"; echo "$want"; fails=$((fails + 1))
fi
if got=$("$check" --by-test "$tmp/clean.log") && [ -z "$got" ]; then
	echo "ok   --by-test: a clean log gives nothing and exit 0"
else
	echo "FAIL --by-test on a clean log: '$got'"; fails=$((fails + 1))
fi
[ "$fails" = 0 ]
