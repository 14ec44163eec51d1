#!/bin/bash
# Scan a guest serial console log for kernel splats.
#
#   vm-images/console-check.sh console.log
#
# Prints one line per splat found: "<kind>: console.log:<line>: <text>
# (during <test>)" and exits 1 if there was any, 0 if the log is clean.
# Only kernel lines (with a printk timestamp) are considered, so that a test
# printing the word "WARNING" does not fail the run. The test that was
# running is the last "LAB-TEST-START <name>" marker before the splat.
set -euo pipefail
log=${1:?usage: console-check.sh console.log}
[ -r "$log" ] || { echo "console-check.sh: cannot read $log" >&2; exit 2; }

# Kinds, most specific first: the first pattern that matches names a line.
awk '
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
	test = "boot"
	found = 0
}
/LAB-TEST-START / { sub(/.*LAB-TEST-START /, ""); test = $0; next }
/^\[ *[0-9]+\.[0-9]+\]/ {
	for (i = 0; i < n; i++) {
		if ($0 ~ p[i]) {
			line = $0
			sub(/^\[ *[0-9]+\.[0-9]+\] */, "", line)
			printf "%s: %s:%d: %s (during %s)\n", k[i], FILENAME, FNR, line, test
			found++
			break
		}
	}
}
END { exit found ? 1 : 0 }
' "$log"
