# shellcheck shell=bash disable=SC2154 # top: set by the test that sources this
# The sequential workload's own checks, known answers of its hooks. Sourced by
# tests/host/bench-workloads.sh, which finds every
# bench/workloads/*/selftest.sh and defines what this uses: top, ok, bad,
# same (name got want) and in_workload (workload command...: the command in
# a subshell with the workload loaded as bench/guest/lib.sh loads it).
same "sequential: at most 64 extents" "$(in_workload sequential wl_checks /m)" "seq /m/bench/seq 1 64 0"
