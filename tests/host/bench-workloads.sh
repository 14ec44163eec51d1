#!/bin/bash
# Host-side test of the benchmark workloads (bench/workloads/*), without a
# VM: each workload's configuration and hooks are loaded the way
# bench/guest-bench.sh loads them, and checked:
#   - every workload has phases, and every phase has a fio job file
#     (PHASE.fio or KIND.fio), as has prep;
#   - its FIEMAP promises are well-formed lines (label path min max shared);
#   - known answers: the scaling points for a few budgets, the phases and
#     profile phase they give, the files the shared workload's phases read,
#     and what each promises.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
same() { # name got want
	if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: got '$2', want '$3'"; fi
}

# Load a workload as guest-bench.sh does (its default hooks, then the
# workload's), in a subshell, and run "$@" there.
in_workload() { # workload command...
	local w=$1
	shift
	(
		# shellcheck disable=SC2034 # read by the guest-bench.sh code eval'ed below
		WORKLOAD=$w
		eval "$(sed -n '/^# ---- workload hooks/,/^# ---- bookkeeping/p' "$top/bench/guest-bench.sh" |
			sed '/^\[ -f "\$wl\/hooks.sh" \]/d; /^if \[ "\${1:-}" = --phase \]/,/^fi$/d')"
		wl=$top/bench/workloads/$w
		. "$wl/workload.conf"
		FILE=${FILE:-frag}
		MIN_EXTENTS=${MIN_EXTENTS:-1}
		MAX_EXTENTS=${MAX_EXTENTS:-}
		PROFILE_PHASE=${PROFILE_PHASE:-randread}
		# shellcheck disable=SC1091
		[ -f "$wl/hooks.sh" ] && . "$wl/hooks.sh"
		"$@"
	)
}

echo "== every workload"
for d in "$top"/bench/workloads/*/; do
	w=$(basename "$d")
	[ -f "$d/workload.conf" ] || continue
	phases=$(in_workload "$w" wl_phases)
	if [ -n "$phases" ]; then ok "$w: phases: $phases"; else bad "$w: no phases"; fi
	[ -f "$d/prep.fio" ] && ok "$w: prep.fio" || bad "$w: no prep.fio"
	for p in $phases $(in_workload "$w" wl_profile_phase); do
		if [ -f "$d/$p.fio" ] || [ -f "$d/${p%%-*}.fio" ]; then :; else bad "$w: phase $p has no job file"; fi
	done
	# shellcheck disable=SC2086
	checks=$(in_workload "$w" wl_checks /m $phases)
	if [ -n "$checks" ] && echo "$checks" | awk 'NF != 5 || $3 !~ /^[0-9]+$/ || ($4 != "-" && $4 !~ /^[0-9]+$/) || $5 !~ /^[0-9]+$/ { exit 1 }'; then
		ok "$w: FIEMAP promises well-formed ($(echo "$checks" | wc -l) files)"
	else
		bad "$w: FIEMAP promises: '$checks'"
	fi
done

echo "== scaling"
same "scaling: default points" "$(in_workload scaling scale_points | paste -sd' ' -)" "1024 2048 4096 8192"
same "scaling: SCALE_BUDGET=32768" "$(SCALE_BUDGET=32768 in_workload scaling scale_points | paste -sd' ' -)" "1024 2048 4096 8192 16384"
same "scaling: SCALE_BUDGET=3072" "$(SCALE_BUDGET=3072 in_workload scaling scale_points | paste -sd' ' -)" "1024 2048"
same "scaling: budget below one point gives no phases" "$(SCALE_BUDGET=1000 in_workload scaling wl_phases 2>/dev/null)" ""
same "scaling: phases" "$(SCALE_BUDGET=3072 in_workload scaling wl_phases | xargs)" \
	"seqread-e1024 seqread-e2048 randread-e1024 randread-e2048"
same "scaling: profile phase is the largest file's sequential read" "$(in_workload scaling wl_profile_phase)" "seqread-e8192"
same "scaling: profiled prep checks only that file" "$(in_workload scaling wl_checks /m seqread-e8192)" "e8192 /m/bench/frag-e8192 8192 - 0"
same "scaling: target" "$(in_workload scaling wl_target /m randread-e4096)" "/m/bench/frag-e4096"
# one file size at every point (8192 x 17/16 blocks), chunks of 8192/N blocks
same "scaling: layout of the fewest-extents point" "$(in_workload scaling point_layout 1024)" "34816k 32k"
same "scaling: layout of the largest point" "$(in_workload scaling point_layout 8192)" "34816k 4k"
same "scaling: layout with SCALE_BUDGET=3072" "$(SCALE_BUDGET=3072 in_workload scaling point_layout 1024)" "8704k 8k"

echo "== shared"
same "shared: targets" "$(for p in seqread-orig randread-reflink seqread-snapshot; do in_workload shared wl_target /m $p; done | xargs)" \
	"/m/bench/orig /m/bench/reflink /m/snap/bench/orig"
same "shared: every side promises 8192 extents, all shared" "$(in_workload shared wl_checks /m | awk '{print $1, $3, $4, $5}' | xargs)" \
	"orig 8192 - 8192 reflink 8192 - 8192 snapshot 8192 - 8192"

echo "== sequential and fragmented"
same "sequential: at most 64 extents" "$(in_workload sequential wl_checks /m)" "seq /m/bench/seq 1 64 0"
same "fragmented: at least 16384 extents" "$(in_workload fragmented wl_checks /m)" "frag /m/bench/frag 16384 - 0"
same "fragmented: MIN_EXTENTS override" "$(MIN_EXTENTS=100 in_workload fragmented wl_checks /m)" "frag /m/bench/frag 100 - 0"

echo "== key mode the guest records (kernel_key_mode of guest-bench.sh)"
key_mode() { # mount-options policy
	(
		eval "$(sed -n '/^kernel_key_mode() {/,/^}/p' "$top/bench/guest-bench.sh")"
		kernel_key_mode "$@"
	)
}
tab=$'\t'
same "key mode: btrfs per-extent from /proc/mounts" "$(key_mode rw,relatime,space_cache=v2,fscrypt_per_extent_keys,subvolid=5 'policy v2 contents=1 filenames=4 flags=0x2 keys=per-file')" \
	"per-extent$tab/proc/mounts: fscrypt_per_extent_keys"
same "key mode: btrfs per-inode from /proc/mounts" "$(key_mode rw,fscrypt_per_inode_keys,subvolid=5 'policy v2 contents=1 filenames=4 flags=0x2 keys=per-file')" \
	"per-inode$tab/proc/mounts: fscrypt_per_inode_keys"
same "key mode: ext4 from the policy read back" "$(key_mode rw,relatime 'policy v2 contents=1 filenames=4 flags=0x2 keys=per-file')" \
	"per-inode${tab}policy read back: policy v2 contents=1 filenames=4 flags=0x2 keys=per-file"
same "key mode: a DIRECT_KEY policy is not per-inode" "$(key_mode rw 'policy v2 contents=9 filenames=9 flags=0x6 keys=direct' | cut -f1)" "direct"
same "key mode: unencrypted" "$(key_mode rw,relatime '')" "none${tab}no encryption policy"
same "key mode: unencrypted btrfs (the option is shown on every mount)" "$(key_mode rw,fscrypt_per_extent_keys,subvolid=5 '')" "none${tab}no encryption policy"
same "arm key modes" "$(. "$top/bench/arms.sh"; for a in $ALL_ARMS; do arm_key_mode "$a"; done | xargs)" \
	"per-extent per-inode none per-inode none"

echo "== arms (bench/arms/*.conf through bench/arms.sh), known answers"
arm_all() { # feature-root: every arm's fs, mkfs, mount options, encrypted, key mode, unsupported, tuning
	(
		ARM_FEATURE_ROOT=$1
		# shellcheck source=bench/arms.sh
		. "$top/bench/arms.sh"
		for a in $ALL_ARMS; do
			printf '%s|%s|%s|%s|%s|%s|%s\n' "$a" "$(arm_fs "$a")" "$(arm_mkfs "$a")" "$(arm_mount_opts "$a")" \
				"$(arm_encrypted "$a" && echo enc || echo plain)" "$(arm_key_mode "$a")" "$(arm_tuning "$a" vdq)"
			why=$(arm_unsupported "$a") && echo "$a unsupported: $why"
		done
		valid_arm btrfs-inode && ! valid_arm btrfs-nope && echo "valid_arm ok"
	)
}
feat=$(mktemp -d)
mkdir -p "$feat/sys/fs/btrfs/features"
touch "$feat/sys/fs/btrfs/features/encrypt_extent_keys"
same "arms on a kernel with per-extent keys" "$(arm_all "$feat")" "btrfs-extent|btrfs|mkfs.btrfs -q -f||enc|per-extent|
btrfs-inode|btrfs|mkfs.btrfs -q -f|fscrypt_per_inode_keys|enc|per-inode|
btrfs-plain|btrfs|mkfs.btrfs -q -f||plain|none|
ext4-inode|ext4|mkfs.ext4 -q -F -O encrypt||enc|per-inode|echo 1000000 > /sys/fs/ext4/vdq/mb_stream_req
ext4-plain|ext4|mkfs.ext4 -q -F||plain|none|echo 1000000 > /sys/fs/ext4/vdq/mb_stream_req
valid_arm ok"
rm -f "$feat/sys/fs/btrfs/features/encrypt_extent_keys"
same "arms on a kernel without (btrfs-extent skipped, btrfs-inode without the option)" "$(arm_all "$feat" | grep -E '^btrfs-(extent|inode)')" \
	"btrfs-extent|btrfs|mkfs.btrfs -q -f||enc|per-extent|
btrfs-extent unsupported: btrfs on this kernel encrypts with per-inode keys only (no /sys/fs/btrfs/features/encrypt_extent_keys)
btrfs-inode|btrfs|mkfs.btrfs -q -f||enc|per-inode|"
rm -rf "$feat"

if [ "$fails" = 0 ]; then
	echo "bench-workloads: all passed"
else
	echo "bench-workloads: $fails failed"
	exit 1
fi
