# shellcheck shell=bash disable=SC2154 # top: set by the test that sources this
# The rekey workload's own checks, known answers of its hooks. Sourced by
# tests/host/bench-workloads.sh, which finds every
# bench/workloads/*/selftest.sh and defines what this uses: top, ok, bad,
# same (name got want) and in_workload (workload command...: the command in
# a subshell with the workload loaded as bench/guest/lib.sh loads it).
same "rekey: phases" "$(in_workload rekey wl_phases | xargs)" "seqread-onekey seqread-twokeys randread-onekey randread-twokeys"
same "rekey: every read is counted, none is a command" "$(in_workload rekey wl_count_phases | xargs)|$(in_workload rekey wl_command_phases | xargs)" "seqread-onekey seqread-twokeys randread-onekey randread-twokeys|"
same "rekey: both files in the subvolume, each promised MIN_EXTENTS" "$(in_workload rekey wl_checks /m)" "twokeys /m/sv/bench/twokeys 16384 - 0
onekey /m/sv/bench/onekey 16384 - 0"
same "rekey: targets" "$(in_workload rekey wl_target /m seqread-twokeys) $(in_workload rekey wl_target /m randread-onekey)" "/m/sv/bench/twokeys /m/sv/bench/onekey"
same "rekey: a pass's list: every other block once, each write synced" "$(in_workload rekey rk_iolog /f 1 8 | awk '$2 == "write" { print $3 / 4096 }' | sort -n | xargs) $(in_workload rekey rk_iolog /f 0 8 | grep -c ' sync ')" "1 3 5 7 4"
same "rekey: a pass's list is the same every time (fixed seed)" "$(in_workload rekey rk_iolog /f 0 64 | md5sum)" "$(in_workload rekey rk_iolog /f 0 64 | md5sum)"
