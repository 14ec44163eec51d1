#!/bin/bash
# Host side of `make test`: the cheap host-side tests first (tests/host/*.sh,
# e.g. the shellcheck and pyflakes runs), then the guest tests in one boot of
# the debug kernel, the phased guest tests (two boots each,
# tests/run-phased.sh), the power-cut slices (writes; rekeys), and last
# the host tests that boot VMs themselves
# (marked "# lab-host-test: after-guest"). Prints one line per test followed
# by "N passed, N failed, N skipped", and exits non-zero if any test failed.
#
#   tests/run-tests.sh              everything
#   ONLY=a,b tests/run-tests.sh     only these guest tests, phased ones
#                                   and the power-cut slices (powercut,
#                                   powercut_rekey, powercut@encrypt)
#                                   included (host tests too); the shared
#                                   boot is left out if ONLY names only
#                                   phased tests and slices; a test
#                                   configuration's runs are named
#                                   test@config (ONLY=config: all of them,
#                                   powercut@config included)
#   HOST_TESTS=0                    skip the host-side tests
#   HOST_TESTS=a,b                  only these host tests (tests/host/a.sh)
#   GUEST_TESTS=0                   nothing that boots a VM: the cheap
#                                   host tests only
#   FAIL_FAST=1                     stop after the cheap host tests if one
#                                   of them failed
#   RUNS=DIR                        where runs go (default build/runs)
#
# Results of a run, in $RUNS/test-<stamp>/ (and $RUNS/test-latest/):
#   results.xml    JUnit XML: one testcase per reported line, with its time;
#                  a failure or skip has its reason and the tail of its log
#   results.ktap   the same as KTAP (kernel test anything protocol)
#   report.tsv     what both are written from: name, status, seconds, log,
#                  reason
# A kernel splat on the shared boot's console fails the test that was
# running when it appeared (the last LAB-TEST-START marker before it), with
# the splat's first line as the reason; one before the first marker fails
# guest/boot.
#
# Expects `make kernel FLAVOR=debug`, `make image` and the test binaries
# (build/tests/bin) to be built; the Makefile does that first.
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$top/build
kernel=${KERNEL:-$build/bzImage-6.12-debug}
# The kernel series' patch files: those of every series patches/series lists.
series_patch_files() {
	local d
	for d in $(grep -v '^[[:space:]]*\(#\|$\)' "$top/patches/series"); do
		ls "$top/patches/$d"/*.patch 2>/dev/null
	done
}
stamp=$(date +%Y%m%d-%H%M%S)
start_epoch=$(date +%s)
runs=${RUNS:-$build/runs}
run=$runs/test-$stamp
job=$build/jobs/test
# The main boot's budgets (tests/README.md, "Time budgets"): the whole
# boot TIMEOUT and each test TEST_BUDGET seconds, both times the machine's
# slowdown, which the boot measures as its time to its first test over
# BOOT_REF (vm-images/run-vm.sh --boot-ref).
TIMEOUT=${TIMEOUT:-2400}
TEST_BUDGET=${TEST_BUDGET:-1200}
BOOT_REF=${BOOT_REF:-15}
TAIL_LINES=50	# of a failed or skipped test's log in the result files

passed=0 failed=0 skipped=0
selected() { [ -z "${ONLY:-}" ] || [[ ",$ONLY," == *",$1,"* ]]; }

# --- reporting -----------------------------------------------------------------

# One line on the terminal per test, and one in $run/report.tsv, from which
# write_results makes the result files. The reason of a pass is only a note.
# The log goes last but one and is never empty ("-"), and the reason last:
# fields of a tab-separated line read back with `read` must not be empty.
report() { # status name seconds reason [log]
	local status=$1 name=$2 secs=$3 reason=$4 log=${5:-} detail
	case $status in PASS) passed=$((passed + 1)) ;; SKIP) skipped=$((skipped + 1)) ;;
	*) status=FAIL; failed=$((failed + 1)) ;; esac
	reason=$(printf '%s' "$reason" | tr '\t\r\n' '   ')
	[ "$status" = SKIP ] && secs=
	detail="${secs:+${secs}s}${secs:+${reason:+; }}$reason"
	[ "$status" = FAIL ] && [ -n "$log" ] && detail+="${detail:+; }log: $log"
	printf '%-4s %s%s\n' "$status" "$name" "${detail:+ ($detail)}"
	if [ "$status" = FAIL ] && [ -f "$log" ]; then
		tail -n 15 "$log" | sed 's/^/       | /'
	fi
	printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$status" "${secs:-0}" "${log:--}" "$reason" >>"$run/report.tsv"
}

# Why a test failed, from its log: its first "FAIL..." line (the first
# failed check of tests/lib, or of a host test), else its last line.
fail_reason() { # log
	{ grep -a -m1 '^FAIL' "$1" || tail -n 1 "$1"; } 2>/dev/null | tr -d '\r'
}

# Text made safe for XML: valid UTF-8 only, no terminal colour sequences,
# none of the control characters XML 1.0 forbids (console output carries
# \r), and the markup characters escaped.
xml_text() {
	iconv -f UTF-8 -t UTF-8 -c 2>/dev/null | sed $'s/\033\\[[0-9;?]*[A-Za-z]//g' | tr -d '\000-\010\013-\037' |
		sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g'
}
xml_attr() { printf '%s' "$1" | tr '\t\n' '  ' | xml_text; }

# $run/results.xml (JUnit: one testsuite per first part of the names,
# guest, host, powercut) and $run/results.ktap, from $run/report.tsv.
write_results() {
	local tsv=$run/report.tsv suite n f s t name status secs log reason i=0
	[ -f "$tsv" ] || : >"$tsv"
	{
		echo '<?xml version="1.0" encoding="UTF-8"?>'
		read -r n f s t < <(awk -F'\t' '{ n++; f += $2 == "FAIL"; s += $2 == "SKIP"; t += $3 }
			END { print n + 0, f + 0, s + 0, t + 0 }' "$tsv")
		printf '<testsuites name="fscrypt-lab make test" tests="%s" failures="%s" skipped="%s" errors="0" time="%s" timestamp="%s">\n' \
			"$n" "$f" "$s" "$t" "$(date -d "@$start_epoch" +%Y-%m-%dT%H:%M:%S)"
		for suite in $(cut -f1 "$tsv" | sed 's|/.*||' | awk '!seen[$0]++'); do
			read -r n f s t < <(awk -F'\t' -v want="$suite" '{ p = $1; sub(/\/.*/, "", p) } p == want {
				n++; f += $2 == "FAIL"; s += $2 == "SKIP"; t += $3 } END { print n + 0, f + 0, s + 0, t + 0 }' "$tsv")
			printf '  <testsuite name="%s" tests="%s" failures="%s" skipped="%s" errors="0" time="%s">\n' \
				"$(xml_attr "$suite")" "$n" "$f" "$s" "$t"
			while IFS=$'\t' read -r name status secs log reason; do
				[ "${name%%/*}" = "$suite" ] || continue
				[ "$log" = - ] && log=
				printf '    <testcase classname="%s" name="%s" time="%s"' "$(xml_attr "$suite")" \
					"$(xml_attr "${name#"$suite"/}")" "$secs"
				case $status in
				PASS)
					if [ -n "$reason" ]; then
						printf '>\n      <system-out>%s</system-out>\n    </testcase>\n' "$(xml_attr "$reason")"
					else
						printf '/>\n'
					fi ;;
				FAIL)
					printf '>\n      <failure type="FAIL" message="%s">' "$(xml_attr "$reason")"
					[ -n "$log" ] && { echo "log: $log"; tail -n "$TAIL_LINES" "$log" 2>/dev/null; } | xml_text
					printf '</failure>\n    </testcase>\n' ;;
				SKIP)
					printf '>\n      <skipped message="%s"/>\n' "$(xml_attr "$reason")"
					[ -f "$log" ] && printf '      <system-out>%s</system-out>\n' \
						"$( { echo "log: $log"; tail -n "$TAIL_LINES" "$log"; } | xml_text)"
					printf '    </testcase>\n' ;;
				esac
			done <"$tsv"
			echo '  </testsuite>'
		done
		echo '</testsuites>'
	} >"$run/results.xml.tmp" && mv "$run/results.xml.tmp" "$run/results.xml"

	# KTAP: the result lines, with the time, reason and log tail as
	# diagnostic lines ("# ...") before each.
	{
		echo "KTAP version 1"
		echo "# fscrypt-lab make test, started $(date -d "@$start_epoch" +%Y-%m-%dT%H:%M:%S), $run"
		echo "1..$(wc -l <"$tsv")"
		while IFS=$'\t' read -r name status secs log reason; do
			i=$((i + 1))
			[ "$log" = - ] && log=
			echo "# $name: ${secs}s${reason:+; $reason}"
			if [ "$status" != PASS ] && [ -f "$log" ]; then
				echo "# log: $log"
				tail -n "$TAIL_LINES" "$log" | tr -d '\000-\010\013-\037' | sed 's/^/# | /'
			fi
			case $status in
			PASS) echo "ok $i $name" ;;
			SKIP) echo "ok $i $name # SKIP $reason" ;;
			*) echo "not ok $i $name" ;;
			esac
		done <"$tsv"
	} >"$run/results.ktap.tmp" && mv "$run/results.ktap.tmp" "$run/results.ktap"
}

# --- the shared boot's results -----------------------------------------------------

# Report the shared boot's tests (expected: the names of the tests it was to
# run). Results come from results/tests.tsv, or, when the guest's results
# never came back (a panic, a timeout), from the console's
# "LAB-TEST <status> <name> (<n>s)" markers. A kernel splat fails the test
# that was running when it appeared (console-check.sh --by-test: the last
# LAB-TEST-START marker before it), with its first line as the reason; one
# before the first marker fails the pseudo-test guest/boot. A test that
# started but has no result, or never started, fails as well.
guest_report() { # expected-test...
	local con=$run/console.log tsv=$run/results/tests.tsv verdict rows t n kind at text
	local name status secs log reason own suite
	local -A splat=() splat_at=() seen=() started=()
	verdict=$(cat "$run/verdict" 2>/dev/null)
	while IFS=$'\t' read -r t n kind at text; do
		splat[$t]="kernel splat ($kind) during the test: $text (console.log:$at"
		[ "$n" -gt 1 ] && splat[$t]+=", $n splat lines"
		splat[$t]+=")" splat_at[$t]=$at
	done < <("$top/vm-images/console-check.sh" --by-test "$con" 2>/dev/null)
	while read -r t; do started[$t]=1; done < <(sed -n 's/\r$//; s/.*LAB-TEST-START //p' "$con" 2>/dev/null)

	if [ -f "$tsv" ]; then
		rows=$(cat "$tsv")
	else
		rows=$(sed -n 's/\r$//; s/^LAB-TEST \(PASS\|FAIL\|SKIP\) \(.*\) (\([0-9]*\)s)$/\2\t\1\t\3/p' "$con" 2>/dev/null)
	fi
	# Every KUnit suite the series adds must have reported.
	# shellcheck disable=SC2046 # patch paths have no spaces
	for suite in $(grep -h -A4 '^+static struct kunit_suite' $(series_patch_files) |
		       sed -n 's/^+[[:space:]]*\.name = "\(.*\)",/\1/p'); do
		grep -q "^kunit/$suite/" <<<"$rows" || rows+=$'\n'"kunit/$suite"$'\t'"NORESULT"$'\t'0
	done
	for t in "$@"; do
		grep -q "^$t"$'\t' <<<"$rows" || rows+=$'\n'"$t"$'\t'"NORESULT"$'\t'0
	done

	while IFS=$'\t' read -r name status secs; do
		[ -n "$name" ] || continue
		seen[$name]=1
		log=$run/results/tests/$name.log reason='' own=''
		case $name in kunit/*) log=$run/results/tests/kunit-$(echo "$name" | cut -d/ -f2).log secs= ;; esac
		[ -f "$log" ] || log=
		case $status in
		NORESULT)
			status=FAIL
			if [ -f "$tsv" ]; then
				reason="did not run"
			elif [ -n "${started[$name]:-}" ]; then
				reason="started, but no result: the guest stopped during it ($verdict)"
			elif [[ $name == kunit/* ]]; then
				reason="no result: the guest's results did not come back ($verdict)"
			else
				reason="did not run: the guest stopped before it ($verdict)"
			fi ;;
		FAIL)
			own="the test failed: "
			if [ -z "$log" ]; then
				reason="its log did not come back"
			elif [[ $name == kunit/* ]]; then
				# the case's first failed expectation, from its suite's log
				reason=$(grep -a -m1 "# ${name##*/}: .*FAILED" "$log" 2>/dev/null | sed 's/^ *# //')
				reason=${reason:-the KUnit case failed}
			else
				reason=$(fail_reason "$log")
			fi ;;
		SKIP)
			own="the test skipped: "
			reason=$(grep -a '^SKIP: ' "$log" 2>/dev/null | tail -n 1 | tr -d '\r')
			[ -n "$reason" ] || reason=$(tail -n 1 "$log" 2>/dev/null | tr -d '\r') ;;
		esac
		if [ -n "${splat[$name]:-}" ]; then
			reason="${splat[$name]}${reason:+; $own$reason}"
			status=FAIL
		fi
		report "$status" "guest/$name" "$secs" "$reason" "$log"
	done <<<"$rows"

	if [ ! -s "$con" ]; then
		# no splat to find in a console that is not there: the VM never ran
		report FAIL guest/boot "" "no console output: the VM did not start (${verdict:-no verdict}); see the runner's messages above" ""
	elif [ -n "${splat[boot]:-}" ]; then
		# its log: the console from the splat on
		sed -n "${splat_at[boot]},+40p" "$con" | tr -d '\r' >"$run/boot-splat.log"
		report FAIL guest/boot "" "${splat[boot]/during the test/before the first test}" "$run/boot-splat.log"
	else
		report PASS guest/boot "" ""
	fi
	# A splat during a test that has no result line (a marker of another
	# name) still fails something.
	for t in "${!splat[@]}"; do
		[ "$t" = boot ] || [ -n "${seen[$t]:-}" ] || report FAIL "guest/$t" "" "${splat[$t]}" "$con"
	done
}

# --- host tests ---------------------------------------------------------------------

# Run the host tests of one group: early (cheap, before the guest boot) or
# late (those marked "# lab-host-test: after-guest", which boot VMs).
host_tests() { # early|late
	local t name log tstart rc secs group sel=${HOST_TESTS:-1}
	local names=" ${sel//,/ } "
	[ "$sel" = 0 ] && return
	case $1 in early) echo "== host tests (cheap, before the guest tests)" ;;
	*) echo "== host tests (that boot VMs)" ;; esac
	if [ "$sel" != 1 ] && [ "$1" = early ]; then
		for name in $names; do
			[ -x "$top/tests/host/$name.sh" ] || report FAIL "host/$name" "" "no such host test: tests/host/$name.sh"
		done
	fi
	for t in "$top"/tests/host/*.sh; do
		[ -x "$t" ] || continue
		name=$(basename "$t" .sh)
		[ "$sel" = 1 ] || [[ $names == *" $name "* ]] || continue
		group=early
		grep -q '^# lab-host-test: after-guest' "$t" && group=late
		[ "$group" = "$1" ] || continue
		log=$run/$name.log
		tstart=$(date +%s)
		"$t" >"$log" 2>&1
		rc=$?
		secs=$(( $(date +%s) - tstart ))
		case $rc in
		0) report PASS "host/$name" "$secs" "" ;;
		77) report SKIP "host/$name" "" "$(tail -n 1 "$log")" "$log" ;;
		*) report FAIL "host/$name" "$secs" "$(fail_reason "$log")" "$log" ;;
		esac
	done
}

# Sourced (by tests/host/test-results.sh) for the functions above: stop here.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

# --- the run -----------------------------------------------------------------------

mkdir -p "$run"
: >"$run/report.tsv"
ln -sfn "test-$stamp" "$runs/test-latest"
echo "== results: $run/results.xml (JUnit), $run/results.ktap"
guest=${GUEST_TESTS:-1}

# The cheap host tests first, so that a trivial mistake shows in a minute,
# not after the guest boot.
host_tests early
if [ "${FAIL_FAST:-0}" = 1 ] && [ "$failed" != 0 ]; then
	echo "== FAIL_FAST: a cheap host test failed; no guest tests, no late host tests"
	guest=0
fi

# Phased tests (build/tests/phased) to run, and whether the shared boot is
# needed at all.
phased=()
main_boot=$guest
if [ "$guest" = 1 ]; then
	for t in "$build"/tests/phased/*; do
		[ -x "$t" ] && selected "$(basename "$t")" && phased+=("$(basename "$t")")
	done
	if [ -n "${ONLY:-}" ]; then
		main_boot=0
		for n in ${ONLY//,/ }; do
			[ -x "$build/tests/phased/$n" ] || [ "$n" = powercut ] ||
				[ "$n" = powercut_rekey ] || [ "$n" = powercut@encrypt ] || main_boot=1
		done
	fi
fi

if [ "$main_boot" = 1 ]; then
	rm -rf "$job"
	mkdir -p "$job/tests/bin"
	find "$build/tests/bin" -maxdepth 1 -type f -perm -u+x -exec cp {} "$job/tests/bin/" \;
	install -m 0755 "$top/tests/guest-run.sh" "$job/run"
	cp -r "$top/profiles" "$job/profiles"
	cp -r "$top/tests/configs" "$job/configs"
	expected=()
	for t in "$job"/tests/bin/*; do
		[ -x "$t" ] && selected "$(basename "$t")" && expected+=("$(basename "$t")")
	done
	# The test configurations' runs (tests/configs/, tests/guest-run.sh).
	for conf in "$top"/tests/configs/*.conf; do
		cfg=$(basename "$conf" .conf)
		# shellcheck disable=SC1090 # data files of tests/configs/
		for t in $(. "$conf"; echo "$TESTS"); do
			[ -x "$job/tests/bin/$t" ] || continue
			{ selected "$t@$cfg" || selected "$cfg"; } && expected+=("$t@$cfg")
		done
	done

	echo "== guest tests: debug kernel, one boot (log: $run/console.log)"
	start=$(date +%s)
	"$top/vm-images/run-vm.sh" --kernel "$kernel" --job "$job" --out "$run" \
		--scratch 1G --scratch 1G --timeout "$TIMEOUT" --boot-ref "$BOOT_REF" \
		--test-budget "$TEST_BUDGET" ${ONLY:+--lab-args "$ONLY"}
	vm_rc=$?
	echo "== guest run took $(( $(date +%s) - start ))s"
	guest_report "${expected[@]}"
	# The boot itself is a test: a splat, a timeout or a missing result
	# fails it, whatever the tests said.
	case $vm_rc in
	0|1) report PASS "guest/kernel-console-clean" "" "" ;;
	*) report FAIL "guest/kernel-console-clean" "" "$(cat "$run/verdict" 2>/dev/null)" "$run/console.log" ;;
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
	0) report PASS "guest/$name" "$secs" "" ;;
	77) report SKIP "guest/$name" "" "$reason" "$pout/test.log" ;;
	*) report FAIL "guest/$name" "$secs" "${reason:-no result}" "$pout/test.log" ;;
	esac
done

# A power-cut slice: CUTS cuts with the fixed SEED, its own boots
# (tests/run-powercut.sh) running the guest program PROGRAM
# (tests/powercut/PROGRAM.c); WHAT says what the cuts hit, if not just writes;
# CONFIG names a test configuration (tests/configs/CONFIG.conf) whose mkfs
# and mount options the guest program gets.
powercut_slice() { # name cuts seed program [what] [config]
	local name=$1 out=$run/$1 log=$run/$1.log tstart rc secs
	echo "== $name: $2 power cuts${5:+ $5}${6:+ in the configuration $6} (log: $log)"
	tstart=$(date +%s)
	POWERCUT_CUTS=$2 POWERCUT_SEED=$3 POWERCUT_OUT=$out \
		POWERCUT_BIN=$build/tests/powercut/$4 POWERCUT_CONFIG=${6:-} \
		"$top/tests/run-powercut.sh" >"$log" 2>&1
	rc=$?
	secs=$(( $(date +%s) - tstart ))
	case $rc in
	0) report PASS "$name" "$secs" "$(awk -F'\t' '{ v[$1] = $2 } END { printf "%s cuts, %s fsynced bytes checked, %s lost", v["cuts"], v["fsynced_bytes_checked"], v["bytes_lost"] }' "$out/figures.tsv" 2>/dev/null)" ;;
	77) report SKIP "$name" "" "$(sed -n 's/^Verdict: \*\*SKIP: \(.*\)\*\*$/\1/p' "$out/summary.md" 2>/dev/null)" "$log" ;;
	*) report FAIL "$name" "$secs" "$(fail_reason "$log")" "$log" ;;
	esac
}

# Power cuts (issue #14): 3 cuts with a fixed seed.
if [ "$guest" = 1 ] && selected powercut; then
	powercut_slice powercut 3 0x14f0002 btrfs_fscrypt_powercut
fi

# Power cuts during rekeys and writes under the new key (issue #24): 2 cuts
# with a fixed seed, the same driver with the rekey guest program.
if [ "$guest" = 1 ] && selected powercut_rekey; then
	powercut_slice powercut_rekey 2 0x24f0002 btrfs_fscrypt_rekey_powercut "during rekeys"
fi

# The power-cut slice in the encrypt configuration (mkfs.btrfs -O encrypt,
# test_dummy_encryption; issue #36): 2 cuts, the seed of the powercut slice.
if [ "$guest" = 1 ] && { selected powercut@encrypt || selected encrypt; }; then
	powercut_slice powercut@encrypt 2 0x14f0002 btrfs_fscrypt_powercut "" encrypt
fi

[ "$guest" = 1 ] && host_tests late
write_results
echo "== results: $run/results.xml, $run/results.ktap"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
