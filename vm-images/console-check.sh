#!/bin/bash
# Scan a guest serial console log for kernel splats.
#
#   vm-images/console-check.sh [--by-test] console.log
#
# Prints one line per splat found: "<kind>: console.log:<line>: <text>
# (during <test>)" and exits 1 if there was any, 0 if the log is clean.
# Only kernel lines (with a printk timestamp) are considered, so that a test
# printing the word "WARNING" does not fail the run. The test that was
# running is the last "LAB-TEST-START <name>" marker before the splat;
# before the first marker it is "boot".
#
# --by-test prints instead one line per test that had a splat, in console
# order, for tests/run-tests.sh to fail that test:
#   test<TAB>number of splat lines<TAB>kind<TAB>line<TAB>text
# where text is the first line that says what happened: a "cut here" line
# is passed over for the WARNING or BUG line that follows it.
set -euo pipefail
by_test=0
[ "${1:-}" = --by-test ] && { by_test=1; shift; }
log=${1:?usage: console-check.sh [--by-test] console.log}
[ -r "$log" ] || { echo "console-check.sh: cannot read $log" >&2; exit 2; }

# Kinds, most specific first: the first pattern that matches names a line.
awk -v by_test="$by_test" '
BEGIN {
	n = 0
	k[n] = "KASAN report";     p[n++] = "BUG: KASAN:"
	k[n] = "lockdep report";   p[n++] = "WARNING: (possible (circular|recursive) locking|inconsistent lock state|suspicious RCU usage|held lock freed|bad unlock balance)|INFO: possible irq lock inversion|BUG: (lock held when returning|MAX_LOCKDEP)|DEBUG_LOCKS_WARN_ON"
	k[n] = "sleep in atomic";  p[n++] = "BUG: (sleeping function called from invalid context|scheduling while atomic)"
	k[n] = "hung task";        p[n++] = "INFO: task .* blocked for more than"
	k[n] = "oops";             p[n++] = "Oops:|general protection fault|BUG: unable to handle|BUG: kernel NULL pointer|kernel BUG at"
	k[n] = "BUG";              p[n++] = "BUG:"
	k[n] = "WARNING";          p[n++] = "WARNING: CPU:|------------\\[ cut here \\]------------"
	k[n] = "UBSAN report";     p[n++] = "UBSAN:"
	k[n] = "soft lockup / RCU stall"; p[n++] = "soft lockup|detected stalls? on|self-detected stall"
	k[n] = "kernel panic";     p[n++] = "Kernel panic - not syncing"
	cut = "\\[ cut here \\]"
	test = "boot"
	found = 0
	ntests = 0
}
# The serial console ends its lines with \r\n: not part of names or texts.
{ sub(/\r$/, "") }
/LAB-TEST-START / { sub(/.*LAB-TEST-START /, ""); test = $0; next }
/^\[ *[0-9]+\.[0-9]+\]/ {
	for (i = 0; i < n; i++) {
		if ($0 ~ p[i]) {
			line = $0
			sub(/^\[ *[0-9]+\.[0-9]+\] */, "", line)
			if (!by_test)
				printf "%s: %s:%d: %s (during %s)\n", k[i], FILENAME, FNR, line, test
			found++
			if (!(test in count))
				order[ntests++] = test
			count[test]++
			# the first line of the test, unless a better one follows "cut here"
			if (count[test] == 1 || (text[test] ~ cut && line !~ cut)) {
				kind[test] = k[i]; text[test] = line; at[test] = FNR
			}
			break
		}
	}
}
END {
	if (by_test)
		for (j = 0; j < ntests; j++) {
			t = order[j]
			printf "%s\t%d\t%s\t%d\t%s\n", t, count[t], kind[t], at[t], text[t]
		}
	exit found ? 1 : 0
}
' "$log"
