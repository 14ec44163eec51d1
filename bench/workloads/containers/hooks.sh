# shellcheck shell=bash disable=SC2154 # wl, out, ARM, SMALL_FILES, ...: set by guest-bench.sh and workload.conf
# Hooks of the containers workload (sourced by bench/guest-bench.sh, see
# there and workload.conf). Generation K is the subvolume
# MNT/containers/genK, its files under genK/tree.

# Snapshots need btrfs; per-inode keys get copies instead (see wl_prep).
wl_probe() { # mnt
	if [ "$(arm_fs "$ARM")" != btrfs ]; then
		echo "$(arm_fs "$ARM") has no snapshots (this workload makes each generation of a container image a snapshot of the one before)"
		return 3
	fi
	btrfs -q subvolume create "$1/.probe" || { echo "cannot create a subvolume"; return 1; }
	btrfs -q subvolume delete "$1/.probe" >/dev/null || return 1
}

gen_dir() { echo "$1/containers/gen$2"; } # mnt k

# The prep's record, one line per fact: prep number (the Nth preparation of
# this arm in the run), generation, key, value. The host copies raw/.
prep_log() { printf '%s\t%s\t%s\t%s\n' "$prep_no" "$@" >>"$prep_tsv"; }

now_ms() { date +%s%3N; }

# Space of a generation: the tree's files (bytes), btrfs filesystem du
# (total, exclusive, shared with other generations) and df of the mount.
log_space() { # mnt k
	local d line
	d=$(gen_dir "$1" "$2")
	prep_log "$2" tree_bytes "$(find "$d/tree" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')"
	line=$(btrfs filesystem du -s --raw "$d" | awk 'NR == 2 { print $1, $2, $3 }')
	prep_log "$2" du_total "${line%% *}"
	line=${line#* }
	prep_log "$2" du_exclusive "${line%% *}"
	prep_log "$2" du_set_shared "${line#* }"
	prep_log "$2" df_used_kib "$(df -Pk "$1" | awk 'NR == 2 { print $3 }')"
}

# The base tree: SMALL_FILES files of 4-64 KiB (in 4 KiB steps, fixed seed)
# spread over 16 directories, and LARGE_FILES files of LARGE_SIZE.
make_base() { # tree
	local t=$1 dirs="" i
	for i in $(seq 0 15); do mkdir -p "$t/d$i" && dirs+="${dirs:+:}$t/d$i"; done
	mkdir -p "$t/large"
	fio --output=/tmp/prep.out --name=small --directory="$dirs" --nrfiles="$SMALL_FILES" \
		--filesize=4k-64k --bs=4k --rw=write --ioengine=psync --fallocate=none \
		--file_service_type=sequential --openfiles=8 --randrepeat=1 --randseed="$SEED" ||
		{ cat /tmp/prep.out; return 1; }
	fio --output=/tmp/prep.out --name=large --directory="$t/large" --nrfiles="$LARGE_FILES" \
		--filesize="$LARGE_SIZE" --bs=1m --rw=write --ioengine=psync --fallocate=none \
		--file_service_type=sequential --openfiles=8 ||
		{ cat /tmp/prep.out; return 1; }
}

# Overwrite OVERWRITE_PCT % of a tree's bytes at random places: a place is a
# random 4 KiB block of the whole tree (so files are hit in proportion to
# their size), the write 4-64 KiB, cut at the file's end; seed SEED + k.
overwrite() { # tree k
	local t=$1 k=$2 path off len n=0 bytes=0
	find "$t" -type f -printf '%s %p\n' | LC_ALL=C sort -k2 >/tmp/files
	awk -v seed="$((SEED + k))" -v pct="$OVERWRITE_PCT" '
		{ size[NR] = $1; path[NR] = $2; blocks[NR] = int($1 / 4096); total += blocks[NR] }
		END {
			srand(seed)
			want = total * pct / 100
			while (done < want) {
				b = int(rand() * total)
				for (i = 1; b >= blocks[i]; i++) b -= blocks[i]
				len = 1 + int(rand() * 16)
				if (b + len > blocks[i]) len = blocks[i] - b
				printf "%s %d %d\n", path[i], b, len
				done += len
			}
		}' /tmp/files >/tmp/plan
	while read -r path off len; do
		dd if=/dev/urandom of="$path" bs=4k seek="$off" count="$len" conv=notrunc status=none || return 1
		n=$((n + 1)) bytes=$((bytes + len * 4096))
	done </tmp/plan
	prep_log "$k" overwrite_writes "$n"
	prep_log "$k" overwrite_bytes "$bytes"
}

# gen0, then each generation from the one before: a snapshot, or on
# per-inode keys (snapshots refused) a new subvolume with a new encrypted
# tree and a full copy, no reflinks; then the overwrites. Times (guest
# ms, sync included) and space go to raw/<arm>/containers-prep.tsv.
wl_prep() { # mnt phases...
	local mnt=$1 k d prev t0 kind enc=0 mode
	mode=$(arm_key_mode "$ARM")
	arm_encrypted "$ARM" && enc=1
	mkdir -p "$out/raw/$ARM" "$mnt/containers"
	prep_tsv=$out/raw/$ARM/containers-prep.tsv
	prep_no=$(( $(cut -f1 "$prep_tsv" 2>/dev/null | sort -u | wc -l) + 1 ))
	for k in $(seq 0 $((GENERATIONS - 1))); do
		d=$(gen_dir "$mnt" "$k")
		t0=$(now_ms)
		if [ "$k" = 0 ] || [ "$mode" = per-inode ]; then
			btrfs -q subvolume create "$d" || return 1
			mkdir "$d/tree" || return 1
			if [ "$enc" = 1 ]; then
				fscrypt_setup "$mnt" "$d/tree" >/dev/null || return 1
			fi
		fi
		if [ "$k" = 0 ]; then
			kind=base
			make_base "$d/tree" || return 1
		elif [ "$mode" = per-inode ]; then
			kind=copy
			prev=$(gen_dir "$mnt" $((k - 1)))
			cp -a --reflink=never "$prev/tree/." "$d/tree/" || return 1
		else
			kind=snapshot
			prev=$(gen_dir "$mnt" $((k - 1)))
			btrfs -q subvolume snapshot "$prev" "$d" || return 1
		fi
		sync
		prep_log "$k" make "$kind"
		prep_log "$k" make_ms $(( $(now_ms) - t0 ))
		if [ "$k" -gt 0 ]; then
			t0=$(now_ms)
			overwrite "$d/tree" "$k" || return 1
			sync
			prep_log "$k" overwrite_ms $(( $(now_ms) - t0 ))
		fi
	done
	for k in $(seq 0 $((GENERATIONS - 1))); do log_space "$mnt" "$k"; done
}

# FIEMAP promises: the first large file of gen0 and of the newest
# generation (fio names them large.0.N); on snapshots the newest one still shares extents with the
# generations before (at least 1: most of it was not overwritten).
wl_checks() { # mnt phases...
	local last=$((GENERATIONS - 1)) shared=1 f=large.0.0
	# (fiemap_check does not pass ARM; its own arm is in scope)
	[ "$(arm_key_mode "${ARM:-${arm:-}}")" = per-inode ] && shared=0
	echo "gen0 $(gen_dir "$1" 0)/tree/large/$f 1 - 0"
	echo "gen$last $(gen_dir "$1" "$last")/tree/large/$f 1 - $shared"
}

wl_target() { # mnt phase
	case $2 in
	readall) echo "$1/containers" ;;
	*) echo "$(gen_dir "$1" $((GENERATIONS - 1)))/tree" ;;
	esac
}
