#!/bin/bash
# Test of the VM runner itself: deliberately broken jobs must fail, each with
# the right exit status and a message that says why.
#   - a job that exits 3            -> status 1, "job exited with code 3"
#   - a job that crashes the kernel -> status 2, "kernel splat ... oops"
#     (echo c > /proc/sysrq-trigger)
#   - a job that hangs              -> status 3, "timeout"
#   - a test that hangs, with --test-budget  -> status 3, the test named
#   - a test slower than its budget on an idle machine, with the budget
#     scaled by a slowdown the boot measured (--boot-ref 2: any boot is
#     "slow")                       -> status 0, run.info has the slowdown
# and a good job passes (status 0), so the checks are not vacuous.
# --expect-crash (phase 1 of a phased test, tests/run-phased.sh):
#   - a job that prints LAB-CRASH-NOW and reboots with sysrq-b -> status 0
#   - a job that exits 0 instead of crashing  -> status 1, "job finished"
#   - a job that reboots without the marker   -> status 4, "no LAB-CRASH-NOW"
# It boots VMs, so tests/run-tests.sh runs it after the guest tests:
# lab-host-test: after-guest
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
kernel=${KERNEL:-$top/build/bzImage-6.12-debug}
work=$top/build/runs/runner-selftest
rm -rf "$work"
mkdir -p "$work"
fails=0

job() { # name script
	mkdir -p "$work/$1.job"
	printf '#!/bin/bash\n%s\n' "$2" >"$work/$1.job/run"
	chmod +x "$work/$1.job/run"
}
expect() { # name want-status want-verdict-regex [runner args]
	local name=$1 want=$2 re=$3 rc verdict
	shift 3
	"$top/vm-images/run-vm.sh" --kernel "$kernel" --job "$work/$name.job" \
		--out "$work/$name" --cpus 1 "$@" >"$work/$name.out" 2>&1
	rc=$?
	verdict=$(cat "$work/$name/verdict" 2>/dev/null)
	if [ "$rc" = "$want" ] && echo "$verdict" | grep -Eq "$re"; then
		echo "ok   $name: status $rc: $verdict"
	else
		echo "FAIL $name: status $rc (want $want), verdict '$verdict' (want /$re/)"
		tail -n 20 "$work/$name.out"
		fails=$((fails + 1))
	fi
}

job good 'echo fine; exit 0'
job exit3 'echo failing on purpose; exit 3'
job crash 'echo c > /proc/sysrq-trigger; sleep 60'
job hang 'sleep 3600'
job test-hang 'echo LAB-TEST-START stuck_test >/dev/console; sleep 3600'
job test-scaled 'echo LAB-TEST-START slow_test >/dev/console; sleep 20; echo "LAB-TEST PASS slow_test (20s)" >/dev/console; exit 0'
job crash-expected 'echo LAB-CRASH-NOW >/dev/console; echo b > /proc/sysrq-trigger; sleep 60'
job crash-missing 'exit 0'
job crash-unmarked 'echo b > /proc/sysrq-trigger; sleep 60'

expect good 0 '^ok: job passed'
expect exit3 1 'job exited with code 3'
expect crash 2 'kernel splat on the console \(.*(oops|kernel panic)'
expect hang 3 'timeout' --timeout 100
expect test-hang 3 'timeout: test stuck_test ran for over 10s \(--test-budget 10s x slowdown 1\.00\)' \
	--timeout 300 --test-budget 10 --boot-ref 1000
expect test-scaled 0 '^ok: job passed' --timeout 300 --test-budget 10 --boot-ref 2
if grep -q '^slowdown=4\.00$' "$work/test-scaled/run.info"; then
	echo "ok   test-scaled: run.info: $(grep -E '^(boot_to_job_s|slowdown)=' "$work/test-scaled/run.info" | paste -sd' ')"
else
	echo "FAIL test-scaled: run.info has no slowdown=4.00 (boot 2 s = 1, at most 4)"
	fails=$((fails + 1))
fi
expect crash-expected 0 '^ok: the guest crashed itself as expected' --expect-crash
expect crash-missing 1 'was to crash itself .* but the job finished with exit code 0' --expect-crash
expect crash-unmarked 4 'no LAB-CRASH-NOW line' --expect-crash
[ "$fails" = 0 ]
