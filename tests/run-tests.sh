#!/bin/bash
# Host side of `make test`: run the guest tests in one boot of the debug
# kernel, then the phased guest tests (two boots each, tests/run-phased.sh),
# then the host-side tests (tests/host/*.sh), and print one line per test
# followed by "N passed, N failed, N skipped".
#
#   tests/run-tests.sh              everything
#   ONLY=a,b tests/run-tests.sh     only these guest tests, phased ones
#                                   included (host tests too); the shared
#                                   boot is left out if ONLY names only
#                                   phased tests
#   HOST_TESTS=0                    skip the host-side tests
#
# Expects `make kernel FLAVOR=debug`, `make image` and the test binaries
# (build/tests/bin) to be built; the Makefile does that first.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
kernel=$build/bzImage-debug
stamp=$(date +%Y%m%d-%H%M%S)
run=$build/runs/test-$stamp
job=$build/jobs/test
TIMEOUT=${TIMEOUT:-2400}

passed=0 failed=0 skipped=0
selected() { [ -z "${ONLY:-}" ] || [[ ",$ONLY," == *",$1,"* ]]; }

# Phased tests (build/tests/phased) to run, and whether the shared boot is
# needed at all.
phased=()
for t in "$build"/tests/phased/*; do
	[ -x "$t" ] && selected "$(basename "$t")" && phased+=("$(basename "$t")")
done
main_boot=1
if [ -n "${ONLY:-}" ]; then
	main_boot=0
	for n in ${ONLY//,/ }; do
		[ -x "$build/tests/phased/$n" ] || [ "$n" = powercut ] || main_boot=1
	done
fi
report() { # status name detail
	printf '%-4s %s%s\n' "$1" "$2" "${3:+ ($3)}"
	case $1 in PASS) passed=$((passed + 1)) ;; SKIP) skipped=$((skipped + 1)) ;; *) failed=$((failed + 1)) ;; esac
}

rm -rf "$job"
mkdir -p "$job/tests" "$build/runs"
mkdir -p "$job/tests/bin"
find "$build/tests/bin" -maxdepth 1 -type f -perm -u+x -exec cp {} "$job/tests/bin/" \;
install -m 0755 "$top/tests/guest-run.sh" "$job/run"
cp -r "$top/profiles" "$job/profiles"
ln -sfn "test-$stamp" "$build/runs/test-latest"

mkdir -p "$run"
if [ "$main_boot" = 1 ]; then
	echo "== guest tests: debug kernel, one boot (log: $run/console.log)"
	start=$(date +%s)
	"$top/vm-images/run-vm.sh" --kernel "$kernel" --job "$job" --out "$run" \
		--scratch 1G --scratch 1G --timeout "$TIMEOUT" ${ONLY:+--lab-args "$ONLY"}
	vm_rc=$?
	echo "== guest run took $(( $(date +%s) - start ))s"
fi

if [ "$main_boot" = 1 ] && [ -f "$run/results/tests.tsv" ]; then
	# Every KUnit suite the series adds must have reported.
	for suite in $(grep -h -A4 '^+static struct kunit_suite' "$top"/patches/*.patch |
		       sed -n 's/^+[[:space:]]*\.name = "\(.*\)",/\1/p'); do
		grep -q "^kunit/$suite/" "$run/results/tests.tsv" ||
			printf 'kunit/%s\tFAIL\t0\n' "$suite" >>"$run/results/tests.tsv"
	done
	while IFS=$'\t' read -r name status secs; do
		detail="${secs}s"
		if [ "$status" != PASS ]; then
			detail+="; log: $run/results/tests/$name.log"
			[ "$status" = SKIP ] && detail="$(tail -n 1 "$run/results/tests/$name.log")"
		fi
		case $name in
		kunit/*) detail=; [ "$status" = PASS ] || detail="see $run/results/tests/kunit-$(echo "$name" | cut -d/ -f2).log, or 'did not run'" ;;
		esac
		report "$status" "guest/$name" "$detail"
		if [ "$status" = FAIL ] && [ -f "$run/results/tests/$name.log" ]; then
			tail -n 15 "$run/results/tests/$name.log" | sed 's/^/       | /'
		fi
	done <"$run/results/tests.tsv"
fi
# The boot itself is a test: a splat, a timeout or a missing result fails it,
# whatever the tests said.
if [ "$main_boot" = 1 ]; then
	case $vm_rc in
	0|1) report PASS "guest/kernel-console-clean" ;;
	*) report FAIL "guest/kernel-console-clean" "$(cat "$run/verdict" 2>/dev/null)" ;;
	esac
fi

# Phased tests: their own boots; a splat in them fails that test.
for name in "${phased[@]}"; do
	pout=$run/phased/$name
	echo "== phased guest test $name: two boots (log: $pout/test.log)"
	tstart=$(date +%s)
	"$top/tests/run-phased.sh" "$name" "$pout"
	rc=$?
	secs=$(( $(date +%s) - tstart ))
	reason=$(cut -s -f2- "$pout/result" 2>/dev/null)
	case $rc in
	0) report PASS "guest/$name" "${secs}s" ;;
	77) report SKIP "guest/$name" "$reason" ;;
	*) report FAIL "guest/$name" "${secs}s; ${reason:-no result}"
	   tail -n 15 "$pout/test.log" 2>/dev/null | sed 's/^/       | /' ;;
	esac
done

# Power cuts (issue #14): 3 cuts with a fixed seed, own boots (tests/run-powercut.sh).
if selected powercut; then
	echo "== powercut: 3 power cuts (log: $run/powercut.log)"
	tstart=$(date +%s)
	POWERCUT_CUTS=3 POWERCUT_SEED=0x14f0002 POWERCUT_OUT=$run/powercut \
		"$top/tests/run-powercut.sh" >"$run/powercut.log" 2>&1
	rc=$?
	secs=$(( $(date +%s) - tstart ))
	case $rc in
	0) report PASS powercut "${secs}s; $(awk -F'\t' '{ v[$1] = $2 } END { printf "%s cuts, %s fsynced bytes checked, %s lost", v["cuts"], v["fsynced_bytes_checked"], v["bytes_lost"] }' "$run/powercut/figures.tsv" 2>/dev/null)" ;;
	77) report SKIP powercut "$(sed -n 's/^Verdict: \*\*SKIP: \(.*\)\*\*$/\1/p' "$run/powercut/summary.md" 2>/dev/null)" ;;
	*) report FAIL powercut "${secs}s; log: $run/powercut.log"; tail -n 15 "$run/powercut.log" | sed 's/^/       | /' ;;
	esac
fi

if [ "${HOST_TESTS:-1}" = 1 ]; then
	echo "== host tests"
	for t in "$top"/tests/host/*.sh; do
		[ -x "$t" ] || continue
		name=host/$(basename "$t" .sh)
		log=$build/runs/test-$stamp/$(basename "$t" .sh).log
		tstart=$(date +%s)
		"$t" >"$log" 2>&1
		rc=$?
		secs=$(( $(date +%s) - tstart ))
		case $rc in
		0) report PASS "$name" "${secs}s" ;;
		77) report SKIP "$name" "$(tail -n 1 "$log")" ;;
		*) report FAIL "$name" "${secs}s; log: $log"; tail -n 15 "$log" | sed 's/^/       | /' ;;
		esac
	done
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
