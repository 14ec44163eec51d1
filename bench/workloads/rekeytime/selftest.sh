# shellcheck shell=bash disable=SC2154 # top: set by the test that sources this
# The rekeytime workload's own checks, known answers of its hooks. Sourced by
# tests/host/bench-workloads.sh, which finds every
# bench/workloads/*/selftest.sh and defines what this uses: top, ok, bad,
# same (name got want) and in_workload (workload command...: the command in
# a subshell with the workload loaded as bench/guest/lib.sh loads it).
same "rekeytime: default points, all command phases" "$(in_workload rekeytime wl_phases | xargs)|$(in_workload rekeytime wl_command_phases | xargs)" "rekey-n1000 rekey-n10000 rekey-n100000|rekey-n1000 rekey-n10000 rekey-n100000"
same "rekeytime: REKEY_NAMES override, profile phase the last point" "$(REKEY_NAMES="5000 20" in_workload rekeytime wl_phases | xargs) $(REKEY_NAMES="5000 20" in_workload rekeytime wl_profile_phase)" "rekey-n5000 rekey-n20 rekey-n20"
same "rekeytime: a point that is not a number, or twice, gives no phases" "$(REKEY_NAMES="1 x" in_workload rekeytime wl_phases 2>/dev/null)$(REKEY_NAMES="4 04" in_workload rekeytime wl_phases 2>/dev/null)" ""
same "rekeytime: each point's last file, promised empty" "$(REKEY_NAMES="10 2500" in_workload rekeytime wl_checks /m rekey-n10 rekey-n2500)" "n10 /m/rk-n10/d/dir-0000/file-000009 0 0 0
n2500 /m/rk-n2500/d/dir-0002/file-002499 0 0 0"
same "rekeytime: its parameters are recorded" "$(in_workload rekeytime bench_params | xargs)" "REKEY_NAMES=1000 10000 100000 REKEY_DIR_NAMES=1000"
