# shellcheck shell=bash disable=SC2154 # top: set by the test that sources this
# The shared workload's own checks, known answers of its hooks. Sourced by
# tests/host/bench-workloads.sh, which finds every
# bench/workloads/*/selftest.sh and defines what this uses: top, ok, bad,
# same (name got want) and in_workload (workload command...: the command in
# a subshell with the workload loaded as bench/guest/lib.sh loads it).
same "shared: targets" "$(for p in seqread-orig randread-reflink seqread-snapshot; do in_workload shared wl_target /m $p; done | xargs)" \
	"/m/bench/orig /m/bench/reflink /m/snap/bench/orig"
same "shared: every side promises 8192 extents, all shared" "$(in_workload shared wl_checks /m | awk '{print $1, $3, $4, $5}' | xargs)" \
	"orig 8192 - 8192 reflink 8192 - 8192 snapshot 8192 - 8192"
