# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154 # sets the caller's variables; $top and $out are the caller's
# Sourced by the drivers of reliability parts that run one guest test in
# one boot (tests/run-stress.sh, run-rekey-adversary.sh, run-logwrites.sh),
# after the boot, with $top and $out set: what came back from it.
#
# part_results TEST FIGURES: copies the test's log to $out/test.log; sets
# status and test_secs (from the guest's tests.tsv), splat_lines and
# splats (vm-images/console-check.sh on the console); writes
# $out/figures.tsv from the guest's results/FIGURES (empty if the test did
# not get to write it) with a splats line added. fig KEY reads a figure.
part_results() { # test figures-file
	local name=$1 figs=$out/vm/results/$2
	[ -f "$out/vm/results/tests/$name.log" ] && cp "$out/vm/results/tests/$name.log" "$out/test.log"
	status=$(awk -F'\t' -v n="$name" '$1 == n { print $2 }' "$out/vm/results/tests.tsv" 2>/dev/null)
	test_secs=$(awk -F'\t' -v n="$name" '$1 == n { print $3 }' "$out/vm/results/tests.tsv" 2>/dev/null)
	splat_lines=$("$top/vm-images/console-check.sh" "$out/vm/console.log" 2>/dev/null)
	splats=0
	[ -n "$splat_lines" ] && splats=$(printf '%s\n' "$splat_lines" | wc -l)
	if [ -f "$figs" ]; then
		cp "$figs" "$out/figures.tsv"
	else
		: >"$out/figures.tsv"
	fi
	printf 'splats\t%s\n' "$splats" >>"$out/figures.tsv"
}
fig() { awk -F'\t' -v k="$1" '$1 == k { print $2; exit }' "$out/figures.tsv"; }
