# shellcheck shell=bash disable=SC2154 # top: set by the test that sources this
# The groupsweep workload's own checks, known answers of its hooks. Sourced by
# tests/host/bench-workloads.sh, which finds every
# bench/workloads/*/selftest.sh and defines what this uses: top, ok, bad,
# same (name got want) and in_workload (workload command...: the command in
# a subshell with the workload loaded as bench/guest/lib.sh loads it).
same "groupsweep: default phases" "$(in_workload groupsweep wl_phases | xargs)" \
	"seqread-g1 seqread-g4 seqread-g16 seqread-g64 seqread-g256 seqread-g4096 seqread-g0"
same "groupsweep: GROUP_SIZES override" "$(GROUP_SIZES="16 1 0" in_workload groupsweep wl_phases | xargs)" "seqread-g16 seqread-g1 seqread-g0"
same "groupsweep: a point that is not a number gives no phases" "$(GROUP_SIZES="1 x" in_workload groupsweep wl_phases 2>/dev/null)" ""
same "groupsweep: a point twice gives no phases" "$(GROUP_SIZES="4 1 04" in_workload groupsweep wl_phases 2>/dev/null)" ""
same "groupsweep: profile phase is the last point (no bound)" "$(in_workload groupsweep wl_profile_phase)" "seqread-g0"
same "groupsweep: every point's read is counted" "$(GROUP_SIZES="1 64" in_workload groupsweep wl_count_phases | xargs)" "seqread-g1 seqread-g64"
mounts=$(mktemp)
printf '%s\n' "/dev/vdd /x btrfs rw,relatime,space_cache=v2,fscrypt_per_extent_keys,subvolid=5,subvol=/ 0 0" \
	"/dev/vde /y btrfs rw,relatime,space_cache=v2,fscrypt_per_inode_keys,subvolid=5,subvol=/ 0 0" >"$mounts"
same "groupsweep: which mounts remount per point (per-extent keys)" \
	"$(for m in /x /y /z; do PROC_MOUNTS=$mounts in_workload groupsweep per_extent_mount $m && echo "$m"; done | xargs)" "/x"
rm -f "$mounts"
same "groupsweep: a file per point, each checked once" "$(in_workload groupsweep wl_checks /x seqread-g1 seqread-g0 seqread-g1)" \
	"g1 /x/bench/frag-g1 16384 - 0
g0 /x/bench/frag-g0 16384 - 0"
same "groupsweep: targets" "$(in_workload groupsweep wl_target /y seqread-g4096)" "/y/bench/frag-g4096"
