#!/bin/bash
# make bench-ab and the nightly's plumbing (bench/run-boots.sh, reports
# gate), without a VM: run-boots refuses what it cannot run (no kernel,
# wrong labels, an odd BOOTS for ab, an unknown workload) with exit 2 and
# a reason; a set laid out as run-boots lays it out, of synthetic runs
# (reports/lab/synthrun.py), is judged by `reports.lab.gate ab`: an A/A pair
# passes (exit 0), a NEW whose per-extent arm costs 20% more CPU per MiB
# is flagged (exit 1), each with its JUnit; a nightly set is refused
# against a baseline of another environment (exit 2).
#
# BENCH_AB_VM=1 also runs the real thing, twice (bench/run-boots.sh ab
# with the tiny workload, BOOTS=4, REPS=3, on $KERNEL, default the perf
# kernel): once A/A, once with NEW's lookups slowed down by
# BENCH_AB_INJECT_NS (default 20000); about 4 minutes a boot here under
# icount with the perf kernel, more with the debug one, so not part of
# make test (reports/results/ has the runs).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/lib/host-test.sh
. "$top/tests/lib/host-test.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3

# run-boots refuses, exit 2, with a reason (and starts no VM)
refuses() { # name want-in-message [VAR=VALUE...] args...
	local name=$1 want=$2 out rc envs=()
	shift 2
	while [ $# -gt 0 ] && [[ $1 =~ ^[A-Z_]+= ]]; do envs+=("$1"); shift; done
	out=$(env "${envs[@]}" SET_DIR="$tmp/refused" "$top/bench/run-boots.sh" "$@" 2>&1)
	rc=$?
	if [ $rc = 2 ] && echo "$out" | grep -q -- "$want"; then
		ok "run-boots refuses $name: $(echo "$out" | tail -n1)"
	else
		bad "run-boots $name: exit $rc, want 2 and '$want': $out"
	fi
	rm -rf "$tmp/refused"
}
touch "$tmp/bzImage"
refuses "no kind" "usage"
refuses "one kernel for ab" "ab needs two kernels" ab "old=$tmp/bzImage"
refuses "a wrong label" "does not belong" ab "old=$tmp/bzImage" "fast=$tmp/bzImage"
refuses "the same label twice" "ab needs old= and new=" ab "old=$tmp/bzImage" "old=$tmp/bzImage"
refuses "an odd BOOTS" "BOOTS must be even" BOOTS=3 ab "old=$tmp/bzImage" "new=$tmp/bzImage"
refuses "a missing kernel" "neither a file" ab "old=$tmp/nothing" "new=$tmp/bzImage"
refuses "a bad inject" "a number of nanoseconds" nightly "nightly=$tmp/bzImage,inject=fast"
refuses "an unknown workload" "unknown workload" WORKLOAD=nosuch nightly "nightly=$tmp/bzImage"
refuses "a directory without a series" "without a series file" nightly "nightly=$tmp"

# A set of synthetic runs in run-boots's layout: boot<N>-<label>/ and
# set.json. NEW's per-extent arm costs SCALE times the CPU per MiB.
make_set() { # dir kind scale labels...
	local dir=$1 kind=$2 scale=$3 i=0 label boots=""
	shift 3
	mkdir -p "$dir"
	for label in "$@"; do
		i=$((i + 1))
		local s=1.0
		[ "$label" = new ] && s=$scale
		(cd "$top" && $py -m reports.lab.synthrun "$dir/boot$i-$label" --seed $((100 + i)) \
			--cpu-scale "btrfs-extent=$s") >/dev/null || return 1
		boots+="${boots:+, }{\"index\": $i, \"label\": \"$label\", \"run\": \"boot$i-$label\"}"
	done
	echo "{\"format\": 1, \"kind\": \"$kind\", \"workload\": \"fragmented\", \"boots\": [$boots]}" >"$dir/set.json"
}

gate() { (cd "$top" && $py -m reports.lab.gate "$@"); }

# ab_case NAME SCALE RC SAYS JUNIT: an ab set whose NEW boots cost SCALE
# times the CPU per MiB on the per-extent arm; reports.lab.gate ab must exit
# RC, say SAYS, and write a JUnit file that has JUNIT
ab_case() {
	local name=$1 out rc
	if ! make_set "$tmp/$name" ab "$2" old new old new; then
		bad "cannot make the synthetic set $name"
		return
	fi
	out=$(gate ab "$tmp/$name" --junit "$tmp/$name.xml" 2>&1)
	rc=$?
	if [ $rc = "$3" ] && echo "$out" | grep -q "$4"; then
		ok "bench-ab $name: exit $rc: $(echo "$out" | grep -m1 'gate: \(ok\|REGRESSION\)')"
	else
		bad "bench-ab $name: exit $rc, want $3 and '$4': $out"
	fi
	grep -q "$5" "$tmp/$name.xml" && ok "bench-ab $name: JUnit has '$5'" ||
		bad "bench-ab $name JUnit: $(cat "$tmp/$name.xml")"
}
ab_case aa 1.0 0 "no slowdown of NEW" 'failures="0"'
ab_case slow 1.2 1 "NEW is slower" '<failure'

# the nightly check refuses a baseline of another environment (exit 2)
ok_sets=()
for n in 1 2 3 4; do
	make_set "$tmp/n$n" nightly 1.0 nightly nightly && ok_sets+=("$tmp/n$n")
done
if gate baseline "$tmp/base.json" "${ok_sets[@]}" >/dev/null 2>&1; then
	$py - "$tmp/base.json" <<'EOF'
import json, sys
b = json.load(open(sys.argv[1]))
b["identity"]["accel"] = "kvm"
json.dump(b, open(sys.argv[1], "w"))
EOF
	out=$(gate check "$tmp/n1" "$tmp/base.json" 2>&1)
	rc=$?
	if [ $rc = 2 ] && echo "$out" | grep -q "accel"; then
		ok "bench-check refuses a baseline of another accel: $(echo "$out" | tail -n1)"
	else
		bad "bench-check with another accel: exit $rc: $out"
	fi
else
	bad "cannot make a baseline of synthetic nightlies"
fi

if [ "${BENCH_AB_VM:-0}" = 1 ]; then
	k=${KERNEL:-$top/build/bzImage-6.12-perf}
	for what in aa injected; do
		new=new=$k
		[ $what = injected ] && new+=",inject=${BENCH_AB_INJECT_NS:-20000}"
		out=$(WORKLOAD=tiny REPS=3 BOOTS=4 SET_DIR=$tmp/vm-$what "$top/bench/run-boots.sh" ab "old=$k" "$new" 2>&1) ||
			{ bad "run-boots ab ($what) failed: $(echo "$out" | tail -n 5)"; continue; }
		out=$(gate ab "$tmp/vm-$what" 2>&1)
		rc=$?
		want=0
		[ $what = injected ] && want=1
		if [ $rc = $want ]; then ok "bench-ab in VMs ($what): exit $rc: $(echo "$out" | grep seqread)"; else bad "bench-ab in VMs ($what): exit $rc, want $want: $out"; fi
		cp -r "$tmp/vm-$what" "$top/build/bench/sets/bench-ab-selftest-$what-$(date -u +%Y%m%d-%H%M%S)" 2>/dev/null
	done
fi

[ "${fails:-0}" = 0 ] && echo "bench-ab: all checks passed" && exit 0
echo "bench-ab: $fails check(s) failed"
exit 1
