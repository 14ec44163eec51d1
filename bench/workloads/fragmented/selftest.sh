# shellcheck shell=bash disable=SC2154 # top: set by the test that sources this
# The fragmented workload's own checks, known answers of its hooks. Sourced by
# tests/host/bench-workloads.sh, which finds every
# bench/workloads/*/selftest.sh and defines what this uses: top, ok, bad,
# same (name got want) and in_workload (workload command...: the command in
# a subshell with the workload loaded as bench/guest/lib.sh loads it).
same "fragmented: at least 16384 extents" "$(in_workload fragmented wl_checks /m)" "frag /m/bench/frag 16384 - 0"
same "fragmented: MIN_EXTENTS override" "$(MIN_EXTENTS=100 in_workload fragmented wl_checks /m)" "frag /m/bench/frag 100 - 0"
