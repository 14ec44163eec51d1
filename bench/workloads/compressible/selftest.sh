# shellcheck shell=bash disable=SC2154 # top: set by the test that sources this
# The compressible workload's own checks, known answers of its hooks. Sourced by
# tests/host/bench-workloads.sh, which finds every
# bench/workloads/*/selftest.sh and defines what this uses: top, ok, bad,
# same (name got want) and in_workload (workload command...: the command in
# a subshell with the workload loaded as bench/guest/lib.sh loads it).
same "compressible: phases, file and promise" "$(in_workload compressible wl_phases | xargs) $(in_workload compressible wl_checks /m)" \
	"seqread randread randwrite comp /m/bench/comp 960 - 0"
same "compressible: 1024 pieces of 64 KiB, 65% compressible" "$(in_workload compressible sh -c 'echo $FILE_SIZE $COMP_PIECE $COMP_PERCENT') $(in_workload compressible bench_params | xargs)" \
	"65536k 64k 65 COMP_PIECE=64k COMP_PIECES=1024 COMP_PERCENT=65"
# the arms a run without ARMS makes: the workload's own (bench/run-bench.sh)
same "compressible: its arms (WORKLOAD_ARMS), known arms" "$(. "$top/bench/workloads/compressible/workload.conf"; . "$top/bench/arms.sh"; for a in $WORKLOAD_ARMS; do valid_arm "$a" && echo "$a"; done | xargs)" \
	"btrfs-extent-zstd btrfs-plain-zstd"
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
