# shellcheck shell=bash disable=SC2154 # bench_wl, bench_out, ARM, FILE_SIZE, MIN_EXTENTS, REKEY_*: set by bench/guest/lib.sh and workload.conf
# Hooks of the rekey workload (sourced by bench/guest/lib.sh, see there and
# workload.conf). Layout: subvolume MNT/sv, its encrypted directory
# MNT/sv/bench (policy under K1, the key of seed 1, which the driver adds
# for MNT/bench), files twokeys and onekey in it. K2 is the key of seed 2
# (fscrypt_setup key). What the preparation's rekey moved goes to
# raw/<arm>/prep-rekey.tsv.
# shellcheck source=bench/workloads/lib/rekey.sh
. "$bench_wl/../lib/rekey.sh"

rk_dir() { echo "$1/sv/bench"; }

# Every mount, fresh or restored: K2 as well, whose key the files' newer
# extents and (after the rekey) the directory's names are under.
wl_after_mount() { # mnt
	arm_encrypted "$ARM" || return 0
	fscrypt_setup key "$1" 2 >/dev/null
}

# Per-extent keys on btrfs only, and the kernel must have the rekey ioctl
# (bench/workloads/lib/rekey.sh rekey_probe).
wl_probe() { # mnt
	rekey_probe "$1"
}

# fio's list of one pass over FILE (fio iolog version 2): the 4 KiB blocks
# of PARITY (0: even, 1: odd) below BLOCKS, each once, shuffled with awk's
# srand(REKEY_SEED + PARITY) (Fisher-Yates), each write followed by a sync.
rk_iolog() { # file parity blocks
	awk -v f="$1" -v p="$2" -v n="$3" -v seed="$REKEY_SEED" 'BEGIN {
		srand(seed + p)
		k = 0
		for (b = p; b < n; b += 2) blk[k++] = b
		for (i = k - 1; i > 0; i--) {
			j = int(rand() * (i + 1))
			t = blk[i]; blk[i] = blk[j]; blk[j] = t
		}
		print "fio version 2 iolog"
		print f " add"
		print f " open"
		for (i = 0; i < k; i++) {
			print f " write " blk[i] * 4096 " 4096"
			print f " sync " blk[i] * 4096 " 0"
		}
		print f " close"
	}'
}

# One pass over FILE: the blocks of PARITY written in a random order, each
# fsynced (prep.fio replays rk_iolog). The file gets its full size first
# (a hole), so that both passes write inside it.
rk_write() { # file parity
	[ -e "$1" ] || truncate -s "$FILE_SIZE" "$1" || return 1
	rk_iolog "$1" "$2" "$REKEY_BLOCKS" >/tmp/rekey-prep.iolog || return 1
	IOLOG=/tmp/rekey-prep.iolog fio --output=/tmp/prep.out "$bench_wl/prep.fio" ||
		{ cat /tmp/prep.out; return 1; }
}

# twokeys' even blocks under K1; the rekey of sv to K2 (nothing of it open,
# written out first: a file with dirty pages would be in use); twokeys' odd
# blocks, now under K2; then onekey, both passes in the same orders, all
# under K2.
wl_prep() { # mnt phases...
	local mnt=$1 d
	d=$(rk_dir "$mnt")
	btrfs -q subvolume create "$mnt/sv" && mkdir "$d" &&
		fscrypt_setup "$mnt" "$d" >/dev/null || return 1
	rk_write "$d/twokeys" 0 || return 1
	sync
	mkdir -p "$bench_out/raw/$ARM"
	fscrypt_setup rekey "$mnt/sv" "$d" 1 2 >"$bench_out/raw/$ARM/prep-rekey.tsv" ||
		{ echo "the rekey of $mnt/sv from K1 to K2 failed"; return 1; }
	rk_write "$d/twokeys" 1 && rk_write "$d/onekey" 0 && rk_write "$d/onekey" 1
}

wl_checks() { # mnt phases...
	local d
	d=$(rk_dir "$1")
	echo "twokeys $d/twokeys $MIN_EXTENTS - 0"
	echo "onekey $d/onekey $MIN_EXTENTS - 0"
}

wl_target() { echo "$(rk_dir "$1")/${2#*-}"; }
