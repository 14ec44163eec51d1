# shellcheck shell=bash disable=SC2154 # bench_wl, bench_out, ARM, FILE, COMP_*: set by bench/guest/lib.sh and workload.conf
# Hooks of the compressible workload (sourced by bench/guest/lib.sh, see
# there and workload.conf): btrfs arms only; after the preparation, the
# file's bytes on disk go to raw/<arm>/disk-bytes.tsv, and a mount with
# compression must have compressed it.

# prep.fio and the phases' job files read these from the environment
export COMP_PIECE COMP_PERCENT

# Bytes on disk are read from btrfs's file extent items; ext4 does not
# compress.
wl_probe() { # mnt
	[ "$(arm_fs "$ARM")" = btrfs ] && return 0
	echo "$ARM is $(arm_fs "$ARM"): this workload measures btrfs compression (bytes on disk from btrfs's file extent items), which $(arm_fs "$ARM") does not have"
	return 3
}

# The options /proc/mounts shows for a mount point, and its device
# (PROC_MOUNTS: another file, for the host's tests).
cz_mount_field() { # mnt field (1: device, 4: options)
	awk -v m="$1" -v f="$2" '$2 == m { o = $f } END { print o }' "${PROC_MOUNTS:-/proc/mounts}"
}

# The compression a mount gives new data, as /proc/mounts shows it
# (compress=zstd:3 or compress-force=zstd:3 -> zstd:3), "none" without.
cz_mount_compress() { # mnt
	local o
	o=$(cz_mount_field "$1" 4 | tr ',' '\n' | sed -n 's/^compress\(-force\)\{0,1\}=//p' | head -n 1)
	echo "${o:-none}"
}

# The bytes of one inode's file extent items in the output of
# `btrfs inspect-internal dump-tree` (stdin), as "name<TAB>value" lines:
# referenced_bytes (the file's extent items cover: num_bytes), then per
# extent on disk counted once (by disk bytenr, as compsize counts):
# uncompressed_bytes (ram_bytes) and disk_bytes (disk_num_bytes), extents,
# and those of them compressed (compression type not 0); inline extents
# (their data in the item); holes (disk bytenr 0) count nothing. The
# lines are those btrfs-progs prints for an EXTENT_DATA item ("extent data
# disk byte B nr D", "extent data offset O nr N ram R", "extent compression
# C", "inline extent data size S ram_bytes R compression C"); the lab's
# btrfs-progs prints an encrypted extent's context after them.
cz_tree_bytes() { # ino
	awk -v ino="$1" '
		$1 == "item" && $3 == "key" { cur = ($4 == "(" ino && $5 == "EXTENT_DATA"); bytenr = ""; next }
		!cur { next }
		$1 == "extent" && $2 == "data" && $3 == "disk" && $4 == "byte" { bytenr = $5; dnr = $7; next }
		$1 == "extent" && $2 == "data" && $3 == "offset" { nr = $6; ram = $8; next }
		$1 == "extent" && $2 == "compression" && bytenr != "" {
			if (bytenr != 0) {
				refd += nr; refs++
				if (!(bytenr in seen)) {
					seen[bytenr] = 1
					disk += dnr; uncomp += ram; extents++
					if ($3 != 0) { cext++; cdisk += dnr; cuncomp += ram }
				}
			}
			bytenr = ""
			next
		}
		$1 == "inline" && $2 == "extent" {
			inl++; disk += $5; uncomp += $7; refd += $7
			if ($9 != 0) cinl++
		}
		END {
			printf "referenced_bytes\t%d\nuncompressed_bytes\t%d\ndisk_bytes\t%d\n", refd, uncomp, disk
			printf "extents\t%d\nextent_refs\t%d\ncompressed_extents\t%d\n", extents, refs, cext
			printf "compressed_disk_bytes\t%d\ncompressed_uncompressed_bytes\t%d\n", cdisk, cuncomp
			printf "inline_extents\t%d\ncompressed_inline_extents\t%d\n", inl, cinl
		}'
}

# compsize -b's TOTAL line (stdin) as "name<TAB>value" lines: its disk,
# uncompressed and referenced bytes; nothing without one.
cz_compsize_bytes() {
	awk '$1 == "TOTAL" && NF == 5 {
		printf "compsize_disk_bytes\t%s\ncompsize_uncompressed_bytes\t%s\ncompsize_referenced_bytes\t%s\n", $3, $4, $5
	}'
}

# What the file holds on disk, "name<TAB>value" lines (raw/<arm>/
# disk-bytes.tsv): its size, the mount's compression, the bytes of its
# file extent items (cz_tree_bytes of `btrfs inspect-internal dump-tree`
# of the top-level subvolume's tree, read from the device after sync and
# dropped caches, so that no stale block of the device's page cache is
# read) and, beside it, compsize's, or why compsize could not read them
# (compsize 1.5 refuses a file extent item longer than 53 bytes, and this
# series appends an extent's fscrypt context to its item).
cz_disk_bytes() { # mnt file
	local mnt=$1 f=$2 dev ino err
	dev=$(cz_mount_field "$mnt" 1)
	ino=$(stat -c %i "$f") || return 1
	printf 'file_bytes\t%s\nmount_compress\t%s\nbytes_source\t%s\n' "$(stat -c %s "$f")" \
		"$(cz_mount_compress "$mnt")" "btrfs inspect-internal dump-tree -t 5 (file extent items of inode $ino)"
	drop_caches
	btrfs inspect-internal dump-tree -t 5 "$dev" >/tmp/comp-tree.txt 2>/tmp/comp-tree.err ||
		{ echo "btrfs inspect-internal dump-tree -t 5 $dev failed: $(head -c 300 /tmp/comp-tree.err)" >&2; return 1; }
	cz_tree_bytes "$ino" </tmp/comp-tree.txt
	if err=$(compsize -b "$f" 2>&1); then
		echo "$err" | cz_compsize_bytes
	else
		printf 'compsize_error\t%s\n' "$(echo "$err" | head -n 1 | tr '\t' ' ')"
	fi
}

# The value of NAME in "name<TAB>value" lines (FILE), "" if none.
cz_get() { # file name
	awk -F'\t' -v n="$2" '$1 == n { v = $2 } END { print v }' "$1"
}

# The checks of a disk-bytes.tsv: the extent items cover the whole file
# (no hole: every piece was written); with compression, some extents are
# compressed and the bytes on disk are below the file's size (a kernel
# that stored the file uncompressed under a compressing mount would
# otherwise be measured under the wrong label); compsize, where it read
# the file, agrees with the items. Prints what is wrong and fails.
cz_check() { # disk-bytes.tsv
	local t=$1 size refd disk cext comp cs
	size=$(cz_get "$t" file_bytes) refd=$(cz_get "$t" referenced_bytes)
	disk=$(cz_get "$t" disk_bytes) cext=$(cz_get "$t" compressed_extents)
	comp=$(cz_get "$t" mount_compress)
	if [ -z "$size" ] || [ -z "$disk" ]; then
		echo "no file size or bytes on disk recorded"
		return 1
	fi
	if [ "$refd" != "$size" ]; then
		echo "the file's extent items cover $refd bytes of its $size"
		return 1
	fi
	if [ "$comp" != none ] && { [ "${cext:-0}" = 0 ] || [ "$disk" -ge "$size" ]; }; then
		echo "mounted with compression $comp, but the file is stored uncompressed: $disk bytes on disk for $size, ${cext:-0} compressed extents"
		return 1
	fi
	cs=$(cz_get "$t" compsize_disk_bytes)
	if [ -n "$cs" ] && { [ "$cs" != "$disk" ] || [ "$(cz_get "$t" compsize_referenced_bytes)" != "$refd" ]; }; then
		echo "compsize counts $cs bytes on disk and $(cz_get "$t" compsize_referenced_bytes) referenced, the file extent items $disk and $refd"
		return 1
	fi
	return 0
}

# prep.fio, then the bytes on disk of the prepared file, checked.
wl_prep() { # mnt phases...
	local mnt=$1 t=$bench_out/raw/$ARM/disk-bytes.tsv why
	BENCH_DIR=$mnt/bench TARGET=$mnt/bench/$FILE fio --output=/tmp/prep.out "$bench_wl/prep.fio" ||
		{ cat /tmp/prep.out; return 1; }
	mkdir -p "$bench_out/raw/$ARM"
	cz_disk_bytes "$mnt" "$mnt/bench/$FILE" >"$t" || return 1
	why=$(cz_check "$t") || {
		echo "bench: FAIL: $ARM: $why ($t)" >/dev/console
		echo "$ARM: $why"
		return 1
	}
}
