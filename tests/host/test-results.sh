#!/bin/bash
# The result files of `make test` and the attribution of kernel splats to
# tests, on synthetic runs (no VM): tests/run-tests.sh is sourced for its
# functions (guest_report, report, write_results) and given made-up console
# logs, tests.tsv files and test logs.
#   - results came back: a splat fails the test that was running when it
#     appeared (KASAN in a test that passed, a WARNING in one that failed
#     itself, lockdep in one that skipped), with the splat's telling line as
#     the reason; a splat before the first marker fails guest/boot; the
#     test before a splat, clean, still passes; failures and skips carry
#     the reason from their logs; a test that never ran fails
#   - the guest panicked (no tests.tsv): results from the console's end
#     markers, the oops fails the test that was running, the rest "did not
#     run"
#   - results.xml parses (python3 xml.etree) and agrees with report.tsv and
#     the summary counts, test by test: status, time, reason, log tail, with
#     markup, control characters and broken UTF-8 in the log; results.ktap
#     has the same results in order
#   - phased tests (tests/run-phased.sh with a stand-in for run-vm.sh): a
#     splat's line and whether it came during the phase or in its boot
#     before the test are in the reason
#   - tests/run-tests.sh run with GUEST_TESTS=0 and two host tests (one
#     that does not exist): summary line, exit status, test-latest's files
# Controls: XML with a bare "&" must fail the same parse check.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nfail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; nfail=$((nfail + 1)); }

RUNS=$tmp/runs
# shellcheck source=tests/run-tests.sh
. "$here/tests/run-tests.sh" || { echo "FAIL cannot source tests/run-tests.sh"; exit 1; }
set +o pipefail

# A fresh run directory: $run, and the counters of report().
new_run() { run=$tmp/$1; mkdir -p "$run/results/tests"; : >"$run/report.tsv"; passed=0 failed=0 skipped=0; }
# The console as the serial port gives it, with \r\n line ends.
console() { printf '%s\r\n' "$@" >"$run/console.log"; }

# expect NAME STATUS REGEX: the line of NAME in report.tsv has STATUS and a
# reason matching REGEX (grep -E).
expect() {
	local row status reason
	row=$(awk -F'\t' -v n="$1" '$1 == n' "$run/report.tsv")
	status=$(cut -f2 <<<"$row") reason=$(cut -f5- <<<"$row")
	if [ -z "$row" ]; then
		bad "$1: not reported"
	elif [ "$(wc -l <<<"$row")" != 1 ]; then
		bad "$1: reported $(wc -l <<<"$row") times"
	elif [ "$status" != "$2" ]; then
		bad "$1: $status, want $2 (reason: $reason)"
	elif ! grep -Eq -- "$3" <<<"$reason"; then
		bad "$1: reason '$reason' does not match /$3/"
	else
		ok "$1: $status${reason:+ ($reason)}"
	fi
}

boot='[    0.000000] Linux version 6.1.192+ (lab@lab)'
echo "== results came back"
new_run r1
console "$boot" \
	"[    0.500000] ------------[ cut here ]------------" \
	"[    0.500100] WARNING: CPU: 0 PID: 1 at init/main.c:1 boot_warn+0x1/0x2" \
	"LAB-JOB-START" \
	"LAB-TEST-START t_pass" "[   10.000000] BTRFS info (device vdd): first mount" "LAB-TEST PASS t_pass (3s)" \
	"LAB-TEST-START t_kasan" \
	"[   20.000000] ==================================================================" \
	"[   20.000100] BUG: KASAN: slab-use-after-free in fscrypt_put_extent_info+0x1/0x2" \
	"LAB-TEST PASS t_kasan (4s)" \
	"LAB-TEST-START t_fail_and_warn" \
	"[   30.000000] ------------[ cut here ]------------" \
	"[   30.000100] WARNING: CPU: 1 PID: 7 at fs/btrfs/fscrypt.c:182 btrfs_fscrypt_get_extent_info+0x1f8/0x270" \
	"[   30.000200] ---[ end trace 0000000000000000 ]---" \
	"LAB-TEST FAIL t_fail_and_warn (5s)" \
	"LAB-TEST-START t_skip_lockdep" \
	"[   40.000000] WARNING: possible circular locking dependency detected" \
	"LAB-TEST SKIP t_skip_lockdep (1s)" \
	"LAB-TEST-START t_fail" "WARNING: userspace text, not a splat" "LAB-TEST FAIL t_fail (2s)" \
	"LAB-TEST-START t_skip" "LAB-TEST SKIP t_skip (0s)" \
	"LAB-EXIT-CODE: 0"
kunit=$(grep -h -A4 '^+static struct kunit_suite' "$here"/patches/*.patch |
	sed -n 's/^+[[:space:]]*\.name = "\(.*\)",/\1/p' | head -n 1)
printf '%s\t%s\t%s\n' t_pass PASS 3 t_kasan PASS 4 t_fail_and_warn FAIL 5 t_skip_lockdep SKIP 1 \
	t_fail FAIL 2 t_skip SKIP 0 >"$run/results/tests.tsv"
if [ -n "$kunit" ]; then
	printf 'kunit/%s/%s\t%s\t0\n' "$kunit" case_ok PASS "$kunit" case_bad FAIL >>"$run/results/tests.tsv"
	printf '    # case_bad: EXPECTATION FAILED at lib/x.c:3\n    not ok 2 case_bad\n' >"$run/results/tests/kunit-$kunit.log"
fi
printf 'step one\nFAIL t.c:12: [x == 1] got 2\nFAIL: t_fail: 1 check(s) failed\n' >"$run/results/tests/t_fail.log"
printf 'looking\nSKIP: no zoned device\n' >"$run/results/tests/t_skip.log"
# markup, control characters, an escape sequence, broken and good UTF-8
printf 'a <tag> & "quote" ]]> end\n\001ctl \033[31mred\033[0m\nbad utf-8: \377\376 good: \303\274 \342\211\245\nFAIL w.c:3: [ok] no\n' \
	>"$run/results/tests/t_fail_and_warn.log"
echo "SKIP: lockdep test skipped" >"$run/results/tests/t_skip_lockdep.log"
guest_report t_pass t_kasan t_fail_and_warn t_skip_lockdep t_fail t_skip t_never >"$tmp/r1.out" 2>&1
expect guest/t_pass PASS '^$'
expect guest/t_kasan FAIL '^kernel splat \(KASAN report\) during the test: BUG: KASAN: slab-use-after-free in fscrypt_put_extent_info\+0x1/0x2 \(console\.log:10\)$'
expect guest/t_fail_and_warn FAIL '^kernel splat \(WARNING\) during the test: WARNING: CPU: 1 PID: 7 at fs/btrfs/fscrypt\.c:182 .*\(console\.log:14, 2 splat lines\); the test failed: FAIL w\.c:3: \[ok\] no$'
expect guest/t_skip_lockdep FAIL '^kernel splat \(lockdep report\) during the test: WARNING: possible circular locking dependency detected .*; the test skipped: SKIP: lockdep test skipped$'
expect guest/t_fail FAIL '^FAIL t\.c:12: \[x == 1\] got 2$'
expect guest/t_skip SKIP '^SKIP: no zoned device$'
expect guest/t_never FAIL '^did not run$'
expect guest/boot FAIL '^kernel splat \(WARNING\) before the first test: WARNING: CPU: 0 PID: 1 at init/main\.c:1 boot_warn'
if [ -n "$kunit" ]; then
	expect "guest/kunit/$kunit/case_ok" PASS '^$'
	expect "guest/kunit/$kunit/case_bad" FAIL '^case_bad: EXPECTATION FAILED at lib/x\.c:3$'
fi
if grep -q 'boot_warn' "$run/boot-splat.log" 2>/dev/null; then ok "guest/boot: its log is the console from the splat on"; else bad "guest/boot: no boot-splat.log with the splat"; fi
if grep -q '^       | FAIL t\.c:12' "$tmp/r1.out"; then ok "terminal: a failure shows the tail of its log"; else bad "terminal: no log tail under guest/t_fail"; fi
r1=$run counts1="$passed $failed $skipped"
write_results

echo "== the guest panicked: no tests.tsv came back"
new_run r2
console "$boot" "LAB-JOB-START" \
	"LAB-TEST-START t_a" "LAB-TEST PASS t_a (2s)" \
	"LAB-TEST-START t_f" "LAB-TEST FAIL t_f (1s)" \
	"LAB-TEST-START t_b" \
	"[   50.000000] BUG: kernel NULL pointer dereference, address: 0000000000000000" \
	"[   50.000100] Oops: 0002 [#1] PREEMPT SMP KASAN" \
	"[   50.000200] Kernel panic - not syncing: Fatal exception"
echo "FAIL: kernel splat on the console (kernel panic,oops); see console.log" >"$run/verdict"
guest_report t_a t_f t_b t_c >"$tmp/r2.out" 2>&1
expect guest/t_a PASS '^$'
if [ "$(awk -F'\t' '$1 == "guest/t_a" { print $3 }' "$run/report.tsv")" = 2 ]; then ok "guest/t_a: its time from the console marker"; else bad "guest/t_a: time not 2"; fi
expect guest/t_f FAIL '^its log did not come back$'
expect guest/t_b FAIL '^kernel splat \(oops\) during the test: BUG: kernel NULL pointer dereference, address: 0+ \(console\.log:8, 3 splat lines\); started, but no result'
expect guest/t_c FAIL '^did not run: the guest stopped before it \(FAIL: kernel splat'
expect guest/boot PASS '^$'
[ -n "$kunit" ] && expect "guest/kunit/$kunit" FAIL "^no result: the guest's results did not come back"

echo "== results.xml and results.ktap"
run=$r1
check_xml() { # xml tsv passed failed skipped
	$py - "$@" <<'EOF'
import sys, xml.etree.ElementTree as ET
xml, tsv, npass, nfail, nskip = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
root = ET.parse(xml).getroot()
assert root.tag == "testsuites", root.tag
assert (int(root.get("tests")), int(root.get("failures")), int(root.get("skipped"))) == \
    (npass + nfail + nskip, nfail, nskip), root.attrib
cases = {}
for suite in root.findall("testsuite"):
    mine = suite.findall("testcase")
    assert int(suite.get("tests")) == len(mine), suite.attrib
    assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in mine)
    assert int(suite.get("skipped")) == sum(c.find("skipped") is not None for c in mine)
    for c in mine:
        cases[c.get("classname") + "/" + c.get("name")] = c
rows = [l.rstrip("\n").split("\t") for l in open(tsv, encoding="utf-8", errors="replace")]
assert len(rows) == len(cases), (len(rows), len(cases))
for name, status, secs, log, reason in rows:
    c = cases[name]
    assert float(c.get("time")) == float(secs), (name, c.get("time"), secs)
    f, s = c.find("failure"), c.find("skipped")
    got = "FAIL" if f is not None else "SKIP" if s is not None else "PASS"
    assert got == status, (name, got, status)
    if f is not None:
        assert f.get("message") == reason, (name, f.get("message"), reason)
        if log != "-":
            assert ("log: " + log) in f.text, (name, f.text)
    if s is not None:
        assert s.get("message") == reason, (name, s.get("message"), reason)
print("ok   results.xml: %d testcases agree with report.tsv and the counts" % len(rows))
EOF
}
if check_xml "$run/results.xml" "$run/report.tsv" $counts1; then :; else bad "results.xml does not parse or does not agree (above)"; fi
# shellcheck disable=SC2016 # Python code, not shell
if $py - "$run/results.xml" <<'EOF'; then ok "results.xml: the failing log tail, escaped, without control characters"; else bad "results.xml: the log tail of guest/t_fail_and_warn"; fi
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
c = [c for c in root.iter("testcase") if c.get("name") == "t_fail_and_warn"][0]
t = c.find("failure").text
assert 'a <tag> & "quote" ]]> end' in t, t
assert "ctl red" in t and "\x1b" not in t and "\x01" not in t, repr(t)
assert "good: \u00fc \u2265" in t, repr(t)
assert c.find("failure").get("message").startswith("kernel splat (WARNING)"), c.find("failure").attrib
s = [c for c in root.iter("testcase") if c.get("name") == "t_skip"][0]
assert "SKIP: no zoned device" in s.find("system-out").text
EOF
printf '<?xml version="1.0"?>\n<testsuites><testsuite><testcase name="a & b"/></testsuite></testsuites>\n' >"$tmp/broken.xml"
if check_xml "$tmp/broken.xml" "$run/report.tsv" $counts1 >/dev/null 2>&1; then
	bad "control: XML with a bare & passes the check"
else
	ok "control: XML with a bare & fails the check"
fi
want=$(awk -F'\t' '{ printf "%s %d %s%s\n", ($2 == "FAIL") ? "not ok" : "ok", NR, $1, ($2 == "SKIP") ? " # SKIP " $5 : "" }' "$run/report.tsv")
got=$(grep -E '^(not )?ok ' "$run/results.ktap")
if [ "$got" = "$want" ] && grep -qx "1\.\.$(wc -l <"$run/report.tsv")" "$run/results.ktap" &&
	[ "$(head -n 1 "$run/results.ktap")" = "KTAP version 1" ]; then
	ok "results.ktap: version, plan and $(wc -l <<<"$got") results in order"
else
	bad "results.ktap: got"$'\n'"$got"$'\n'"want"$'\n'"$want"
fi

echo "== phased tests: a splat in their boots"
# A copy of the scripts with a stand-in for run-vm.sh, which writes the
# console a boot would give and returns run-vm.sh's exit status for it.
tree=$tmp/tree
mkdir -p "$tree/tests" "$tree/vm-images" "$tree/build/tests/phased"
cp "$here/tests/run-phased.sh" "$here/tests/guest-phase.sh" "$tree/tests/"
cp "$here/vm-images/console-check.sh" "$tree/vm-images/"
printf '#!/bin/sh\nexit 0\n' >"$tree/build/tests/phased/ph"
chmod +x "$tree/build/tests/phased/ph"
cat >"$tree/vm-images/run-vm.sh" <<'EOF'
#!/bin/bash
# stand-in: FAKE_SPLAT=<phase> splats during the test, FAKE_BOOT_SPLAT=<phase> before it
while [ $# -gt 0 ]; do case $1 in --out) out=$2; shift ;; --lab-args) args=$2; shift ;; esac; shift; done
p=${args#*:}
mkdir -p "$out/results"
{
	echo "[    0.000000] Linux version 6.1.192+"
	[ "${FAKE_BOOT_SPLAT:-}" = "$p" ] && echo "[    1.000000] BUG: sleeping function called from invalid context at fs/x.c:1"
	echo "LAB-TEST-START $args"
	[ "${FAKE_SPLAT:-}" = "$p" ] && printf '%s\n' "[    5.000000] ------------[ cut here ]------------" \
		"[    5.000100] WARNING: CPU: 0 PID: 3 at fs/btrfs/tree-log.c:77 log_inode+0x1/0x2"
	[ "$p" = 1 ] && echo "LAB-CRASH-NOW"
} | sed 's/$/\r/' >"$out/console.log"
if [ -n "$("$(dirname "$0")/console-check.sh" "$out/console.log")" ]; then
	echo "FAIL: kernel splat on the console; see $out/console.log" >"$out/verdict"; exit 2
fi
[ "$p" = 2 ] && echo 0 >"$out/results/phase-rc"
echo "ok" >"$out/verdict"
EOF
chmod +x "$tree/vm-images/run-vm.sh"
phased() { # name want-rc want-regex [env...]
	local name=$1 want=$2 re=$3 rc result
	shift 3
	env "$@" "$tree/tests/run-phased.sh" ph "$tmp/ph-$name" >/dev/null 2>&1
	rc=$?
	result=$(cat "$tmp/ph-$name/result" 2>/dev/null)
	if [ "$rc" = "$want" ] && grep -Eq -- "$re" <<<"$result"; then
		ok "phased $name: exit $rc: $result"
	else
		bad "phased $name: exit $rc (want $want), result '$result' (want /$re/)"
	fi
}
phased clean 0 '^PASS$'
phased splat-phase2 1 '^FAIL	phase 2: kernel splat \(WARNING\) during ph:2: WARNING: CPU: 0 PID: 3 at fs/btrfs/tree-log\.c:77 log_inode\+0x1/0x2 \(console\.log:4, 2 splat lines\); see ' FAKE_SPLAT=2
phased boot-splat-phase1 1 '^FAIL	phase 1: kernel splat \(sleep in atomic\) in the boot before the test started: BUG: sleeping function called' FAKE_BOOT_SPLAT=1

echo "== tests/run-tests.sh itself, without a VM"
# One host test that passes and one that does not exist: the summary line,
# the exit status, and the result files at the stable path test-latest.
RUNS=$tmp/e2e GUEST_TESTS=0 HOST_TESTS=console-check,no-such "$here/tests/run-tests.sh" >"$tmp/e2e.out" 2>&1
rc=$?
if [ "$rc" = 1 ] && [ "$(tail -n 1 "$tmp/e2e.out")" = "1 passed, 1 failed, 0 skipped" ]; then
	ok "run-tests.sh: exit 1 and '1 passed, 1 failed, 0 skipped'"
else
	bad "run-tests.sh: exit $rc (want 1), last line '$(tail -n 1 "$tmp/e2e.out")'"
fi
if check_xml "$tmp/e2e/test-latest/results.xml" "$tmp/e2e/test-latest/report.tsv" 1 1 0 &&
	grep -q '^not ok 1 host/no-such$' "$tmp/e2e/test-latest/results.ktap"; then
	ok "run-tests.sh: test-latest/results.xml and results.ktap"
else
	bad "run-tests.sh: result files at test-latest"
fi
RUNS=$tmp/e2e-pass GUEST_TESTS=0 HOST_TESTS=console-check "$here/tests/run-tests.sh" >"$tmp/e2e-pass.out" 2>&1
rc=$?
if [ "$rc" = 0 ] && [ "$(tail -n 1 "$tmp/e2e-pass.out")" = "1 passed, 0 failed, 0 skipped" ]; then
	ok "run-tests.sh: exit 0 when all passed"
else
	bad "run-tests.sh: exit $rc (want 0), last line '$(tail -n 1 "$tmp/e2e-pass.out")'"
fi

if [ "$nfail" = 0 ]; then
	echo "test-results: all passed"
else
	echo "test-results: $nfail failed"
	exit 1
fi
