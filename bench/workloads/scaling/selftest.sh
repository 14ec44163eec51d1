# shellcheck shell=bash disable=SC2154 # top: set by the test that sources this
# The scaling workload's own checks, known answers of its hooks. Sourced by
# tests/host/bench-workloads.sh, which finds every
# bench/workloads/*/selftest.sh and defines what this uses: top, ok, bad,
# same (name got want) and in_workload (workload command...: the command in
# a subshell with the workload loaded as bench/guest/lib.sh loads it).
same "scaling: default points" "$(in_workload scaling scale_points | paste -sd' ' -)" "4096 16384 65536 262144 1048576"
same "scaling: the smallest file is SCALE_STEP times the read" "$(SCALE_STEP=2 SCALE_MIN=512 in_workload scaling scale_points | head -n 1)" "1024"
same "scaling: SCALE_BUDGET=86016" "$(SCALE_BUDGET=86016 in_workload scaling scale_points | paste -sd' ' -)" "4096 16384 65536"
same "scaling: SCALE_FROM=1024 SCALE_STEP=2 SCALE_BUDGET=3072" "$(SCALE_FROM=1024 SCALE_STEP=2 SCALE_BUDGET=3072 in_workload scaling scale_points | paste -sd' ' -)" "1024 2048"
same "scaling: budget below one point gives no phases" "$(SCALE_BUDGET=4000 in_workload scaling wl_phases 2>/dev/null)" ""
same "scaling: phases" "$(SCALE_BUDGET=20480 in_workload scaling wl_phases | xargs)" \
	"seqread-e4096 seqread-e16384 randread-e4096 randread-e16384"
same "scaling: profile phase is the largest file's sequential read" "$(in_workload scaling wl_profile_phase)" "seqread-e1048576"
same "scaling: profiled prep checks only that file" "$(in_workload scaling wl_checks /m seqread-e1048576)" "e1048576 /m/bench/frag-e1048576 1048576 - 0"
same "scaling: target" "$(in_workload scaling wl_target /m randread-e4096)" "/m/bench/frag-e4096"
same "scaling: every point reads SCALE_MIN blocks" "$(in_workload scaling sh -c 'echo $READ_SIZE')" "4096k"
same "scaling: its parameters are recorded" "$(in_workload scaling bench_params | xargs)" \
	"SCALE_MIN=1024 SCALE_FROM=4096 SCALE_STEP=4 SCALE_BUDGET=1396736 READ_SIZE=4096k"
