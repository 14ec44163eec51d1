#!/bin/bash
# Host-side test of the benchmark workloads (bench/workloads/*), without a
# VM: each workload's configuration and hooks are loaded the way
# bench/guest/lib.sh loads them, and checked:
#   - every workload has phases, and every phase has a fio job file
#     (PHASE.fio or KIND.fio), as has prep;
#   - its FIEMAP promises are well-formed lines (label path min max shared);
#   - known answers: the scaling points for a few budgets, the phases and
#     profile phase they give, the files the shared workload's phases read,
#     and what each promises; the groupsweep points, phases, count phases,
#     files, and which mounts it remounts per point; the compressible
#     workload's arms, compression of a mount, bytes on disk from a made-up
#     dump-tree and compsize output, and the checks of those bytes;
#   - the key mode the guest derives from /proc/mounts and the policy, the
#     arms as bench/arms.sh reads them, and the fscrypt event counts of the
#     count passes from a made-up tracefs.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
same() { # name got want
	if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: got '$2', want '$3'"; fi
}

# Load a workload as bench/guest/lib.sh does (its default hooks, then the
# workload's), in a subshell, and run "$@" there.
in_workload() { # workload command...
	local w=$1
	shift
	(
		# shellcheck disable=SC2034 # read by bench_load_workload
		WORKLOAD=$w
		# shellcheck source=bench/guest/lib.sh
		. "$top/bench/guest/lib.sh"
		bench_load_workload "$top/bench/workloads/$w"
		"$@"
	)
}

echo "== every workload"
for d in "$top"/bench/workloads/*/; do
	w=$(basename "$d")
	[ -f "$d/workload.conf" ] || continue
	phases=$(in_workload "$w" wl_phases)
	if [ -n "$phases" ]; then ok "$w: phases: $phases"; else bad "$w: no phases"; fi
	# the default wl_prep runs prep.fio; a workload that prepares in its
	# own wl_prep (containers) needs none
	if [ -f "$d/prep.fio" ]; then
		ok "$w: prep.fio"
	elif [ -f "$d/hooks.sh" ] && grep -q '^wl_prep()' "$d/hooks.sh"; then
		ok "$w: prepares in its own wl_prep (no prep.fio)"
	else
		bad "$w: no prep.fio and no wl_prep in hooks.sh"
	fi
	# a command phase (bench/README.md, "Command phases") runs the
	# workload's wl_command, not fio: no job file
	cmds=" $(in_workload "$w" wl_command_phases) "
	for p in $phases $(in_workload "$w" wl_profile_phase); do
		case $cmds in *" $p "*) continue ;; esac
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

echo "== shared"
same "shared: targets" "$(for p in seqread-orig randread-reflink seqread-snapshot; do in_workload shared wl_target /m $p; done | xargs)" \
	"/m/bench/orig /m/bench/reflink /m/snap/bench/orig"
same "shared: every side promises 8192 extents, all shared" "$(in_workload shared wl_checks /m | awk '{print $1, $3, $4, $5}' | xargs)" \
	"orig 8192 - 8192 reflink 8192 - 8192 snapshot 8192 - 8192"

echo "== groupsweep"
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

echo "== rekey and rekeytime"
same "rekey: phases" "$(in_workload rekey wl_phases | xargs)" "seqread-onekey seqread-twokeys randread-onekey randread-twokeys"
same "rekey: every read is counted, none is a command" "$(in_workload rekey wl_count_phases | xargs)|$(in_workload rekey wl_command_phases | xargs)" "seqread-onekey seqread-twokeys randread-onekey randread-twokeys|"
same "rekey: both files in the subvolume, each promised MIN_EXTENTS" "$(in_workload rekey wl_checks /m)" "twokeys /m/sv/bench/twokeys 16384 - 0
onekey /m/sv/bench/onekey 16384 - 0"
same "rekey: targets" "$(in_workload rekey wl_target /m seqread-twokeys) $(in_workload rekey wl_target /m randread-onekey)" "/m/sv/bench/twokeys /m/sv/bench/onekey"
same "rekey: a pass's list: every other block once, each write synced" "$(in_workload rekey rk_iolog /f 1 8 | awk '$2 == "write" { print $3 / 4096 }' | sort -n | xargs) $(in_workload rekey rk_iolog /f 0 8 | grep -c ' sync ')" "1 3 5 7 4"
same "rekey: a pass's list is the same every time (fixed seed)" "$(in_workload rekey rk_iolog /f 0 64 | md5sum)" "$(in_workload rekey rk_iolog /f 0 64 | md5sum)"
same "rekeytime: default points, all command phases" "$(in_workload rekeytime wl_phases | xargs)|$(in_workload rekeytime wl_command_phases | xargs)" "rekey-n1000 rekey-n10000 rekey-n100000|rekey-n1000 rekey-n10000 rekey-n100000"
same "rekeytime: REKEY_NAMES override, profile phase the last point" "$(REKEY_NAMES="5000 20" in_workload rekeytime wl_phases | xargs) $(REKEY_NAMES="5000 20" in_workload rekeytime wl_profile_phase)" "rekey-n5000 rekey-n20 rekey-n20"
same "rekeytime: a point that is not a number, or twice, gives no phases" "$(REKEY_NAMES="1 x" in_workload rekeytime wl_phases 2>/dev/null)$(REKEY_NAMES="4 04" in_workload rekeytime wl_phases 2>/dev/null)" ""
same "rekeytime: each point's last file, promised empty" "$(REKEY_NAMES="10 2500" in_workload rekeytime wl_checks /m rekey-n10 rekey-n2500)" "n10 /m/rk-n10/d/dir-0000/file-000009 0 0 0
n2500 /m/rk-n2500/d/dir-0002/file-002499 0 0 0"
same "rekeytime: its parameters are recorded" "$(in_workload rekeytime bench_params | xargs)" "REKEY_NAMES=1000 10000 100000 REKEY_DIR_NAMES=1000"

echo "== compressible"
same "compressible: phases, file and promise" "$(in_workload compressible wl_phases | xargs) $(in_workload compressible wl_checks /m)" \
	"seqread randread randwrite comp /m/bench/comp 960 - 0"
same "compressible: 1024 pieces of 64 KiB, 65% compressible" "$(in_workload compressible sh -c 'echo $FILE_SIZE $COMP_PIECE $COMP_PERCENT') $(in_workload compressible bench_params | xargs)" \
	"65536k 64k 65 COMP_PIECE=64k COMP_PIECES=1024 COMP_PERCENT=65"
# the arms a run without ARMS makes: the workload's own (bench/run-bench.sh)
same "compressible: its arms (WORKLOAD_ARMS), known arms" "$(. "$top/bench/workloads/compressible/workload.conf"; . "$top/bench/arms.sh"; for a in $WORKLOAD_ARMS; do valid_arm "$a" && echo "$a"; done | xargs)" \
	"btrfs-extent-zstd btrfs-plain-zstd"
same "the other workloads name no arms of their own" "$(for d in "$top"/bench/workloads/*/; do [ "$(basename "$d")" = compressible ] || [ ! -f "$d/workload.conf" ] && continue; (. "$d/workload.conf"; echo "${WORKLOAD_ARMS:-}"); done | xargs)" ""
probe_arm() { # arm: wl_probe's status and reason
	# shellcheck source=bench/arms.sh
	. "$top/bench/arms.sh"
	ARM=$1 wl_probe /m
	echo "rc=$?"
}
same "compressible: btrfs arms run, ext4 arms are skipped" "$(in_workload compressible probe_arm btrfs-plain-zstd) | $(in_workload compressible probe_arm ext4-plain)" \
	"rc=0 | ext4-plain is ext4: this workload measures btrfs compression (bytes on disk from btrfs's file extent items), which ext4 does not have
rc=3"
mounts=$(mktemp)
printf '%s\n' "/dev/vdd /x btrfs rw,relatime,compress=zstd:3,space_cache=v2,fscrypt_per_extent_keys,subvolid=5,subvol=/ 0 0" \
	"/dev/vde /y btrfs rw,relatime,compress-force=zstd:3,space_cache=v2,subvolid=5,subvol=/ 0 0" \
	"/dev/vdf /z btrfs rw,relatime,space_cache=v2,subvolid=5,subvol=/ 0 0" >"$mounts"
same "compressible: the compression of a mount" "$(for m in /x /y /z; do PROC_MOUNTS=$mounts in_workload compressible cz_mount_compress $m; done | xargs) $(PROC_MOUNTS=$mounts in_workload compressible cz_mount_field /y 1)" \
	"zstd:3 zstd:3 none /dev/vde"
rm -f "$mounts"
# A made-up dump-tree of inode 257: two compressed extents of 64 KiB
# (16 KiB and 20 KiB on disk, the second with the lab's extent context
# after its item), one uncompressed extent referenced twice (two items of
# 32 KiB of one 64 KiB extent), a hole; inode 258 and other items count
# nothing.
tree=$(mktemp)
cat >"$tree" <<'TREE'
fs tree key (FS_TREE ROOT_ITEM 0)
leaf 30408704 items 12 free space 15000 generation 9 owner FS_TREE
	item 0 key (257 INODE_ITEM 0) itemoff 16123 itemsize 160
		generation 7 transid 9 size 262144 nbytes 262144
	item 1 key (257 EXTENT_DATA 0) itemoff 16070 itemsize 53
		generation 8 type 1 (regular)
		extent data disk byte 13631488 nr 16384
		extent data offset 0 nr 65536 ram 65536
		extent compression 3 (zstd)
	item 2 key (257 EXTENT_DATA 65536) itemoff 15977 itemsize 93
		generation 8 type 1 (regular)
		extent data disk byte 13647872 nr 20480
		extent data offset 0 nr 65536 ram 65536
		extent compression 3 (zstd)
		extent encryption 130 (per-extent key)
		extent context version 2 size 40 contents_mode 1 (AES-256-XTS)
leaf 30425088 items 4 free space 15800 generation 9 owner FS_TREE
	item 0 key (257 EXTENT_DATA 131072) itemoff 16230 itemsize 53
		generation 8 type 1 (regular)
		extent data disk byte 13668352 nr 65536
		extent data offset 0 nr 32768 ram 65536
		extent compression 0 (none)
	item 1 key (257 EXTENT_DATA 163840) itemoff 16177 itemsize 53
		generation 8 type 1 (regular)
		extent data disk byte 13668352 nr 65536
		extent data offset 32768 nr 32768 ram 65536
		extent compression 0 (none)
	item 2 key (257 EXTENT_DATA 196608) itemoff 16124 itemsize 53
		generation 8 type 1 (regular)
		extent data disk byte 0 nr 0
		extent data offset 0 nr 65536 ram 65536
		extent compression 0 (none)
	item 3 key (258 EXTENT_DATA 0) itemoff 16071 itemsize 53
		generation 8 type 1 (regular)
		extent data disk byte 13733888 nr 4096
		extent data offset 0 nr 65536 ram 65536
		extent compression 3 (zstd)
TREE
same "compressible: bytes of an inode's file extent items (known answer)" "$(in_workload compressible cz_tree_bytes 257 <"$tree" | tr '\t' ' ' | xargs)" \
	"referenced_bytes 196608 uncompressed_bytes 196608 disk_bytes 102400 extents 3 extent_refs 4 compressed_extents 2 compressed_disk_bytes 36864 compressed_uncompressed_bytes 131072 inline_extents 0 compressed_inline_extents 0"
same "compressible: an inline extent" "$(printf '%s\n' '	item 1 key (260 EXTENT_DATA 0) itemoff 16000 itemsize 40' '		generation 8 type 0 (inline)' \
	'		inline extent data size 19 ram_bytes 3000 compression 3 (zstd)' | in_workload compressible cz_tree_bytes 260 | awk -F'\t' '$1 ~ /^(disk|referenced)_bytes$|inline/ { printf "%s=%s ", $1, $2 }')" \
	"referenced_bytes=3000 disk_bytes=19 inline_extents=1 compressed_inline_extents=1 "
rm -f "$tree"
same "compressible: compsize -b's TOTAL line" "$(printf '%s\n' 'Type       Perc     Disk Usage   Uncompressed Referenced' \
	'TOTAL       38%      25690112     67108864     67108864' 'zstd        38%      25690112     67108864     67108864' |
	in_workload compressible cz_compsize_bytes | tr '\t' ' ' | xargs)" \
	"compsize_disk_bytes 25690112 compsize_uncompressed_bytes 67108864 compsize_referenced_bytes 67108864"
cz_tsv=$(mktemp)
cz_checked() { # mount_compress disk compressed_extents referenced [compsize disk]: cz_check of such a record
	{
		printf 'file_bytes\t67108864\nmount_compress\t%s\nreferenced_bytes\t%s\n' "$1" "$4"
		printf 'disk_bytes\t%s\ncompressed_extents\t%s\n' "$2" "$3"
		[ -z "${5:-}" ] || printf 'compsize_disk_bytes\t%s\ncompsize_referenced_bytes\t%s\n' "$5" "$4"
		[ -n "${5:-}" ] || printf 'compsize_error\tRegular extent'"'"'s header not 53 bytes (93) long?!?\n'
	} >"$cz_tsv"
	in_workload compressible cz_check "$cz_tsv"
	echo "rc=$?"
}
same "compressible: a compressed file passes" "$(cz_checked zstd:3 25690112 1024 67108864 25690112 | xargs)" "rc=0"
same "compressible: without compsize's numbers (an encrypted file) too" "$(cz_checked zstd:3 25690112 1024 67108864 | xargs)" "rc=0"
same "compressible: uncompressed under compress=zstd fails" "$(cz_checked zstd:3 67108864 0 67108864 | xargs)" \
	"mounted with compression zstd:3, but the file is stored uncompressed: 67108864 bytes on disk for 67108864, 0 compressed extents rc=1"
same "compressible: an uncompressed mount may store it uncompressed" "$(cz_checked none 67108864 0 67108864 67108864 | xargs)" "rc=0"
same "compressible: compsize disagreeing fails" "$(cz_checked zstd:3 25690112 1024 67108864 25694208 | xargs)" \
	"compsize counts 25694208 bytes on disk and 67108864 referenced, the file extent items 25690112 and 67108864 rc=1"
same "compressible: a hole in the file fails" "$(cz_checked zstd:3 25690112 1024 67043328 | tr '\n' ' ')" \
	"the file's extent items cover 67043328 bytes of its 67108864 rc=1 "
rm -f "$cz_tsv"

echo "== sequential and fragmented"
same "sequential: at most 64 extents" "$(in_workload sequential wl_checks /m)" "seq /m/bench/seq 1 64 0"
same "fragmented: at least 16384 extents" "$(in_workload fragmented wl_checks /m)" "frag /m/bench/frag 16384 - 0"
same "fragmented: MIN_EXTENTS override" "$(MIN_EXTENTS=100 in_workload fragmented wl_checks /m)" "frag /m/bench/frag 100 - 0"

echo "== the guest library (bench/guest/lib.sh): sourcing it does nothing"
libtmp=$(mktemp -d)
got=$(cd "$libtmp" && RESULTS=$libtmp bash -c '. "$1"; echo "[$(type -t bench_init) $(type -t wl_after_phase)]"' - "$top/bench/guest/lib.sh" 2>&1; ls -A "$libtmp")
same "sourcing defines functions, prints and writes nothing" "$got" "[function function]"
same "default wl_after_phase: nothing, success" "$(in_workload fragmented wl_after_phase a 1 seqread /m "$libtmp"; echo "rc=$?"; ls -A "$libtmp")" "rc=0"
rm -rf "$libtmp"

echo "== key mode the guest records (kernel_key_mode of bench/guest/lib.sh)"
key_mode() { # mount-options policy
	(
		# shellcheck source=bench/guest/lib.sh
		. "$top/bench/guest/lib.sh"
		kernel_key_mode "$@"
	)
}
tab=$'\t'
same "key mode: btrfs per-extent from /proc/mounts" "$(key_mode rw,relatime,space_cache=v2,fscrypt_per_extent_keys,subvolid=5 'policy v2 contents=1 filenames=4 flags=0x2 keys=per-file')" \
	"per-extent$tab/proc/mounts: fscrypt_per_extent_keys"
same "key mode: btrfs one key per extent from /proc/mounts" "$(key_mode rw,space_cache=v2,fscrypt_per_extent_keys,fscrypt_extents_per_key=1,subvolid=5 'policy v2 contents=1 filenames=4 flags=0x2 keys=per-file')" \
	"per-extent-key$tab/proc/mounts: fscrypt_per_extent_keys,fscrypt_extents_per_key=1"
same "key mode: btrfs groups of at most 16 extents" "$(key_mode rw,fscrypt_per_extent_keys,fscrypt_extents_per_key=16,subvolid=5 'policy v2 keys=per-file' | cut -f1)" "per-extent-max-16"
same "key mode: btrfs groups of at most 10 extents are not one key per extent" "$(key_mode rw,fscrypt_per_extent_keys,fscrypt_extents_per_key=10 'policy v2 keys=per-file' | cut -f1)" "per-extent-max-10"
same "key mode: btrfs per-inode from /proc/mounts" "$(key_mode rw,fscrypt_per_inode_keys,subvolid=5 'policy v2 contents=1 filenames=4 flags=0x2 keys=per-file')" \
	"per-inode$tab/proc/mounts: fscrypt_per_inode_keys"
same "key mode: ext4 from the policy read back" "$(key_mode rw,relatime 'policy v2 contents=1 filenames=4 flags=0x2 keys=per-file')" \
	"per-inode${tab}policy read back: policy v2 contents=1 filenames=4 flags=0x2 keys=per-file"
same "key mode: a DIRECT_KEY policy is not per-inode" "$(key_mode rw 'policy v2 contents=9 filenames=9 flags=0x6 keys=direct' | cut -f1)" "direct"
same "key mode: unencrypted" "$(key_mode rw,relatime '')" "none${tab}no encryption policy"
same "key mode: unencrypted btrfs (the option is shown on every mount)" "$(key_mode rw,fscrypt_per_extent_keys,subvolid=5 '')" "none${tab}no encryption policy"
same "arm key modes" "$(. "$top/bench/arms.sh"; for a in $ALL_ARMS; do arm_key_mode "$a"; done | xargs)" \
	"per-extent per-extent-key per-inode none per-inode none per-extent per-extent none"
same "arms a run makes without ARMS: all but the DEFAULT=0 prototype and compressed arms" "$(. "$top/bench/arms.sh"; echo "$DEFAULT_ARMS")" \
	"btrfs-extent btrfs-extent-key btrfs-inode btrfs-plain ext4-inode ext4-plain"

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
same "arms on a kernel with per-extent keys" "$(arm_all "$feat")" "btrfs-extent|btrfs|mkfs.btrfs -q -f|fscrypt_extents_per_key=0|enc|per-extent|
btrfs-extent-key|btrfs|mkfs.btrfs -q -f|fscrypt_extents_per_key=1|enc|per-extent-key|
btrfs-inode|btrfs|mkfs.btrfs -q -f|fscrypt_per_inode_keys|enc|per-inode|
btrfs-plain|btrfs|mkfs.btrfs -q -f||plain|none|
ext4-inode|ext4|mkfs.ext4 -q -F -O encrypt||enc|per-inode|echo 1000000 > /sys/fs/ext4/vdq/mb_stream_req
ext4-plain|ext4|mkfs.ext4 -q -F||plain|none|echo 1000000 > /sys/fs/ext4/vdq/mb_stream_req
btrfs-extent-ctxitem|btrfs|mkfs.btrfs -q -f|fscrypt_extents_per_key=0,lab_fscrypt_ctx_items|enc|per-extent|
btrfs-extent-ctxitem unsupported: the layout prototype (mount option lab_fscrypt_ctx_items) was a lab patch of the retired 6.1 series; git history has it (patches/0028-*)
btrfs-extent-zstd|btrfs|mkfs.btrfs -q -f|fscrypt_extents_per_key=0,compress=zstd|enc|per-extent|
btrfs-extent-zstd unsupported: btrfs on this kernel does not compress encrypted files (no /sys/fs/btrfs/features/encrypt_compress): they would be stored uncompressed
btrfs-plain-zstd|btrfs|mkfs.btrfs -q -f|compress=zstd|plain|none|
valid_arm ok"
touch "$feat/sys/fs/btrfs/features/encrypt_compress"
same "arms on a kernel that compresses encrypted files (btrfs-extent-zstd not skipped)" "$(arm_all "$feat" | grep -c '^btrfs-extent-zstd')" "1"
rm -f "$feat/sys/fs/btrfs/features/encrypt_extent_keys" "$feat/sys/fs/btrfs/features/encrypt_compress"
same "arms on a kernel without (btrfs-extent and btrfs-extent-key skipped, btrfs-inode without the option)" "$(arm_all "$feat" | grep -E '^btrfs-(extent|inode)' | grep -Ev '^btrfs-extent-(ctxitem|zstd)')" \
	"btrfs-extent|btrfs|mkfs.btrfs -q -f|fscrypt_extents_per_key=0|enc|per-extent|
btrfs-extent unsupported: btrfs on this kernel encrypts with per-inode keys only (no /sys/fs/btrfs/features/encrypt_extent_keys)
btrfs-extent-key|btrfs|mkfs.btrfs -q -f|fscrypt_extents_per_key=1|enc|per-extent-key|
btrfs-extent-key unsupported: btrfs on this kernel encrypts with per-inode keys only (no /sys/fs/btrfs/features/encrypt_extent_keys)
btrfs-inode|btrfs|mkfs.btrfs -q -f||enc|per-inode|"
rm -rf "$feat"

echo "== fscrypt event counts of a count pass (trace_start, trace_counts of bench/guest/lib.sh)"
# A made-up tracefs: the counts come from its trace and per-CPU stats; the
# events it has are enabled, those it lacks (fscrypt_extent_group_start
# here, as on a kernel before key groups) are left out.
ftfs=$(mktemp -d)
mkdir -p "$ftfs/per_cpu/cpu0" "$ftfs/per_cpu/cpu1"
for e in fscrypt_extent_lookup fscrypt_extent_key_setup fscrypt_derive_key fscrypt_key_slot_program fscrypt_key_slot_evict; do
	mkdir -p "$ftfs/events/fscrypt/$e" && echo 0 >"$ftfs/events/fscrypt/$e/enable"
done
echo 1408 >"$ftfs/buffer_size_kb"
traced() { # tfs command...: run a function of bench/guest/lib.sh against the made-up tracefs
	(
		# shellcheck source=bench/guest/lib.sh
		. "$top/bench/guest/lib.sh"
		# shellcheck disable=SC2034 # read by the library's functions
		tfs=$1
		shift
		"$@"
	)
}
traced "$ftfs" trace_start
same "trace_start: buffer and events" "$(cat "$ftfs/buffer_size_kb" "$ftfs/tracing_on" "$ftfs/events/fscrypt/fscrypt_derive_key/enable"; [ -e "$ftfs/events/fscrypt/fscrypt_extent_group_start" ] || echo absent)" \
	"16384
1
1
absent"
cat >"$ftfs/trace" <<'TRACE'
# tracer: nop
#
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
             fio-300     [001] .....    12.000001: fscrypt_extent_lookup: dev=254:48 ino=257 lblk=0 offset=0 nr_blocks=1 derived=1 key_id=7 extent_nr=0 ret=0 duration_ns=900
             fio-300     [001] .....    12.000002: fscrypt_extent_key_setup: dev=254:48 id=7 cached=0 ret=0 duration_ns=800
             fio-300     [001] .....    12.000003: fscrypt_derive_key: context=9 info_len=16 key_len=64 ret=0 duration_ns=700
             fio-300     [001] .....    12.000004: fscrypt_extent_lookup: dev=254:48 ino=257 lblk=1 offset=0 nr_blocks=1 derived=0 key_id=7 extent_nr=1 ret=0 duration_ns=90
             fio-300     [001] .....    12.000005: fscrypt_extent_key_setup: dev=254:48 id=7 cached=1 ret=0 duration_ns=80
             fio-300     [001] .....    12.000006: fscrypt_extent_key_setup: dev=254:48 id=8 cached=0 ret=-12 duration_ns=80
  kworker/u4:1-40    [000] .....    12.000007: fscrypt_key_slot_program: dev=254:48 slot=0 evicted_id=0 id=7 ret=0 duration_ns=300
  kworker/u4:1-40    [000] .....    12.000008: fscrypt_key_slot_evict: slot=0 id=7
             fio-300     [001] .....    12.000009: fscrypt_derive_key: context=2 info_len=16 key_len=64 ret=0 duration_ns=700
             fio-300     [001] .....    12.000010: fscrypt_extent_group_start: dev=254:48 ino=257 key_id=9 reason=extents prev_extents=4 prev_units=4
             fio-300     [001] .....    12.000011: fscrypt_extent_group_start: dev=254:48 ino=258 key_id=10 reason=new prev_extents=0 prev_units=0
TRACE
printf 'entries: 5\noverrun: 0\ndropped events: 0\n' >"$ftfs/per_cpu/cpu0/stats"
printf 'entries: 9\noverrun: 3\ndropped events: 1\n' >"$ftfs/per_cpu/cpu1/stats"
same "trace_counts: known counts" "$(traced "$ftfs" trace_counts seqread-g4 | tr '\t' ' ')" "seqread-g4 derivations 2
seqread-g4 derivations_context_2 1
seqread-g4 derivations_context_9 1
seqread-g4 group_starts 2
seqread-g4 group_starts_extents 1
seqread-g4 group_starts_new 1
seqread-g4 key_setups_cached 1
seqread-g4 key_setups_derived 1
seqread-g4 lookups 2
seqread-g4 lookups_derived 1
seqread-g4 lost_events 4
seqread-g4 slot_evicts 1
seqread-g4 slot_programs 1"
same "trace_counts: tracing and events off again" "$(cat "$ftfs/tracing_on" "$ftfs/events/fscrypt/fscrypt_derive_key/enable")" "0
0"
rm -rf "$ftfs"

echo "== CPU time of a phase (cpu_now of bench/guest/lib.sh)"
# user+nice+system+irq+softirq of /proc/stat's cpu line; nothing (never a
# failure) when the line is missing, short or not numbers
cpu_ticks_of() { # content of a made-up /proc/stat ("-": no such file) [source]
	(
		# shellcheck source=bench/guest/lib.sh
		. "$top/bench/guest/lib.sh"
		f=$(mktemp)
		if [ "$1" = - ]; then rm -f "$f"; else printf '%b' "$1" >"$f"; fi
		# shellcheck disable=SC2034 # cpu_source: read by cpu_now
		cpu_source=${2:-stat}
		PROC_STAT=$f PROC_SCHEDSTAT=$f cpu_now
		rc=$?
		rm -f "$f"
		# shellcheck disable=SC2154 # cpu_ticks: set by cpu_now, eval'ed above
		echo "rc=$rc ticks=$cpu_ticks"
	)
}
same "cpu_now: known answer" "$(cpu_ticks_of 'cpu  10 2 30 999 50 4 5 7 0 0\ncpu0 1 1 1 1 1 1 1 0 0 0\n')" "rc=0 ticks=51"
same "cpu_now: short cpu line" "$(cpu_ticks_of 'cpu  10 2 30\n')" "rc=0 ticks="
same "cpu_now: no cpu line" "$(cpu_ticks_of 'intr 1 2 3\n')" "rc=0 ticks="
same "cpu_now: not numbers" "$(cpu_ticks_of 'cpu  10 x 30 999 50 4 5\n')" "rc=0 ticks="
same "cpu_now: no /proc/stat" "$(cpu_ticks_of -)" "rc=0 ticks="
# /proc/schedstat: rq_cpu_time (7th number after cpuN) summed, ns; domain
# lines and the header skipped
ss='version 15\ntimestamp 4295\ncpu0 0 0 10 2 8 3 1000000007 55 9\ndomain0 3 1 2 3\ncpu1 0 0 10 2 8 3 2000000000 66 9\n'
same "cpu_now: schedstat known answer" "$(cpu_ticks_of "$ss" schedstat)" "rc=0 ticks=3000000007"
same "cpu_now: schedstat short cpu line" "$(cpu_ticks_of 'cpu0 0 0 10 2\n' schedstat)" "rc=0 ticks="
same "cpu_now: schedstat no cpu line" "$(cpu_ticks_of 'version 15\n' schedstat)" "rc=0 ticks="
same "cpu_now: no /proc/schedstat" "$(cpu_ticks_of - schedstat)" "rc=0 ticks="

echo "== arm order, write windows, forwarded variables"
tmp_wl=$(mktemp -d)
trap 'rm -rf "$tmp_wl"' EXIT
# bench_arm_order: rotate alternates two arms and rotates three; random is
# a permutation that repeats with its seed; fixed is ARMS
order_of() { # rule seed arms rep
	(
		# shellcheck source=bench/guest/lib.sh
		. "$top/bench/guest/lib.sh"
		BENCH_ORDER=$1 BENCH_ORDER_SEED=$2 ARMS=$3 bench_arm_order "$4"
	)
}
same "order: rotate, rep 1" "$(order_of rotate 0 "a b" 1)" "a b"
same "order: rotate, rep 2" "$(order_of rotate 0 "a b" 2)" "b a"
same "order: rotate, 3 arms, rep 3" "$(order_of rotate 0 "a b c" 3)" "c a b"
same "order: fixed, rep 2" "$(order_of fixed 0 "a b" 2)" "a b"
r1=$(order_of random 7 "a b c d" 3)
same "order: random repeats with its seed" "$(order_of random 7 "a b c d" 3)" "$r1"
same "order: random is a permutation" "$(echo "$r1" | tr ' ' '\n' | sort | xargs)" "a b c d"
# phase_writes: the write phases end their CPU window after a sync
for w in fragmented compressible; do
	(. "$top/bench/guest/lib.sh"; phase_writes "$top/bench/workloads/$w/randwrite.fio") &&
		ok "$w: randwrite's window ends after a sync" || bad "$w: randwrite not seen as writing"
	(. "$top/bench/guest/lib.sh"; phase_writes "$top/bench/workloads/$w/seqread.fio") &&
		bad "$w: seqread seen as writing" || ok "$w: seqread's window has no sync"
done
# a random read has a seed of its own, not its preparation's (with the
# preparation's, fio reads the blocks in the order they were written)
for d in "$top"/bench/workloads/*/; do
	[ -f "$d/randread.fio" ] && [ -f "$d/prep.fio" ] || continue
	ps=$(sed -n 's/^randseed=//p' "$d/prep.fio")
	rs=$(sed -n 's/^randseed=//p' "$d/randread.fio")
	if [ -n "$ps" ] && [ "$ps" = "$rs" ]; then
		bad "$(basename "$d"): randread uses its preparation's seed $ps"
	else
		ok "$(basename "$d"): randread seed ${rs:-none}, prep ${ps:-none}"
	fi
done
# run-bench forwards the workload's declared variables and refuses others
touch "$tmp_wl/bzImage"
if MAKEFLAGS="s -- WORKLOAD=containers CT_GENS=8" KERNEL=$tmp_wl/bzImage BENCH_DRY_RUN=1 \
	RUN_DIR=$tmp_wl/dry CT_GENS=8 "$top/bench/run-bench.sh" containers >/dev/null 2>&1; then
	same "containers: CT_GENS=8 forwarded" "$(grep '^CT_GENS=' "$tmp_wl/dry/job/bench.env")" "CT_GENS=8"
	same "containers: its phases with CT_GENS=8" \
		"$(cd "$top" && /usr/bin/python3 -c 'import sys; from reports import runmodel as M; print(M.shell_vars(sys.argv[1], sys.argv[2])["PHASES"])' \
			"$tmp_wl/dry/job/bench/workloads/containers/workload.conf" "$tmp_wl/dry/job/bench.env")" \
		"treeread-gen0 treeread-gen8"
else
	bad "containers: dry run with CT_GENS=8 failed"
fi
out=$(MAKEFLAGS="s -- WORKLOAD=fragmented CT_GENS=8" KERNEL=$tmp_wl/bzImage BENCH_DRY_RUN=1 \
	RUN_DIR=$tmp_wl/dry2 "$top/bench/run-bench.sh" fragmented 2>&1)
rc=$?
if [ $rc = 2 ] && echo "$out" | grep -q "'CT_GENS' is neither"; then
	ok "fragmented: an undeclared CT_GENS=8 is refused"
else
	bad "fragmented with CT_GENS=8: exit $rc: $out"
fi

if [ "$fails" = 0 ]; then
	echo "bench-workloads: all passed"
else
	echo "bench-workloads: $fails failed"
	exit 1
fi
