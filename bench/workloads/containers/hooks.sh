# shellcheck shell=bash disable=SC2154 # bench_wl, ARM, CT_*, RESULTS: set by bench/guest/lib.sh, workload.conf and the VM
# Hooks of the containers workload (sourced by bench/guest/lib.sh, see
# there). Layout: generation G is the subvolume $MNT/genG, its tree in
# $MNT/genG/d (encrypted arms: a v2 policy set on d with fscrypt_setup, the
# key the driver added for $MNT/bench). gen0 is the base tree; genG is a
# read-write snapshot of gen(G-1), or, where the kernel refuses the
# snapshot (per-inode keys), a new subvolume with a full copy of it; then
# CT_OVERWRITE_PCT % of the tree's bytes are overwritten in random places
# of random files. What each generation cost goes to
# $RESULTS/bench/raw/$ARM/generations.tsv (the host copies raw/ back).

ct_now() { local u; read -r u _ </proc/uptime; echo "$u"; }

# Snapshots need btrfs; also find out whether a subvolume can be created
# inside the encrypted bench directory and whether it is then encrypted
# (recorded in raw/$ARM/subvol-probe.txt; the workload does not need it).
wl_probe() { # mnt
	local mnt=$1 rec sv=$1/bench/.sv-probe msg
	if [ "$(arm_fs "$ARM")" != btrfs ]; then
		echo "$(arm_fs "$ARM") has no snapshots or subvolumes (this workload snapshots container image generations)"
		return 3
	fi
	rec=$RESULTS/bench/raw/$ARM
	mkdir -p "$rec"
	{
		echo "btrfs subvolume create $sv (inside the bench directory):"
		if msg=$(btrfs subvolume create "$sv" 2>&1); then
			echo "ok: $msg"
			echo "policy of the new subvolume's root (fscrypt_setup -k):"
			fscrypt_setup -k "$mnt" "$sv" 2>&1 || echo "(none: rc $?)"
			btrfs subvolume delete "$sv" >/dev/null 2>&1 || echo "delete failed"
		else
			echo "refused: $msg"
		fi
	} >"$rec/subvol-probe.txt" 2>&1
	return 0
}

# The base tree as "path blocks" lines (4 KiB blocks), fixed seed.
ct_tree() {
	awk -v seed="$CT_SEED" -v n="$CT_SMALL" -v large="$CT_LARGE_MIB" 'BEGIN {
		srand(seed)
		for (i = 0; i < n; i++)
			printf "s/%02d/f%05d %d\n", i % 50, i, 1 + int(rand() * 16)
		k = split(large, L, " ")
		for (i = 1; i <= k; i++)
			printf "large/L%d %d\n", i, L[i] * 256
	}'
}

# Overwrites of generation G: "path first_block blocks" lines covering
# CT_OVERWRITE_PCT % of the tree's blocks, places drawn over the whole
# tree's bytes (a large file gets its share), chunks of 1-16 blocks.
ct_overwrites() { # gen
	ct_tree | awk -v seed="$((CT_SEED + $1))" -v pct="$CT_OVERWRITE_PCT" '
	{ p[NR] = $1; b[NR] = $2; T += $2; c[NR] = T }
	END {
		srand(seed)
		want = int(T * pct / 100)
		while (done < want) {
			r = int(rand() * T)
			lo = 1; hi = NR
			while (lo < hi) { m = int((lo + hi) / 2); if (c[m] > r) hi = m; else lo = m + 1 }
			n = 1 + int(rand() * 16)
			if (n > b[lo]) n = b[lo]
			o = int(rand() * (b[lo] - n + 1))
			printf "%s %d %d\n", p[lo], o, n
			done += n
		}
	}'
}

ct_policy() { # mnt dir: encrypt dir like the bench directory
	arm_encrypted "$ARM" || return 0
	fscrypt_setup "$1" "$2" >/dev/null
}

# gen data_used bytes: btrfs's data in use, after a sync of the filesystem.
ct_used() { # mnt
	btrfs filesystem sync "$1" >/dev/null 2>&1
	btrfs filesystem df -b "$1" | awk -F'used=' '/^Data/ { split($2, a, ","); print a[1]; exit }'
}

ct_record() { # mnt gen method seconds overwritten_bytes note
	local du
	du=$(btrfs filesystem du -s --raw "$1/gen$2/d" 2>/dev/null | awk 'NR == 2 { print $1 "\t" $2 "\t" $3 }')
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$2" "$3" "$4" "$5" "$(ct_used "$1")" "${du:-$'-\t-\t-'}" "$6" \
		>>"$RESULTS/bench/raw/$ARM/generations.tsv"
}

wl_prep() { # mnt phases...
	local mnt=$1 g t0 t1 p n c method err bytes note
	local rec=$RESULTS/bench/raw/$ARM
	mkdir -p "$rec"
	printf 'gen\tmethod\tseconds\toverwritten_bytes\tdata_used_bytes\tdu_total\tdu_exclusive\tdu_set_shared\tnote\n' >"$rec/generations.tsv"
	t0=$(ct_now)
	btrfs -q subvolume create "$mnt/gen0" || return 1
	mkdir "$mnt/gen0/d" && ct_policy "$mnt" "$mnt/gen0/d" || return 1
	ct_tree >/tmp/ct-tree
	while read -r p n; do
		mkdir -p "$(dirname "$mnt/gen0/d/$p")"
		head -c $((n * 4096)) /dev/urandom >"$mnt/gen0/d/$p" || return 1
	done </tmp/ct-tree
	sync
	t1=$(ct_now)
	bytes=$(awk '{ s += $2 } END { print s * 4096 }' /tmp/ct-tree)
	ct_record "$mnt" 0 base "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" "$bytes" \
		"$(wc -l </tmp/ct-tree) files"
	for g in $(seq 1 "$CT_GENS"); do
		t0=$(ct_now)
		note=""
		if err=$(btrfs subvolume snapshot "$mnt/gen$((g - 1))" "$mnt/gen$g" 2>&1); then
			method=snapshot
		else
			# per-inode keys: the kernel refuses; a full copy instead
			note="snapshot refused: ${err//$'\n'/ }"
			method=copy
			btrfs -q subvolume create "$mnt/gen$g" || return 1
			mkdir "$mnt/gen$g/d" && ct_policy "$mnt" "$mnt/gen$g/d" || return 1
			cp -a --reflink=never "$mnt/gen$((g - 1))/d/." "$mnt/gen$g/d/" || return 1
			# the copy is written out before the updates, as a snapshot
			# is (else they land in its page cache: one extent a file)
			sync
		fi
		ct_overwrites "$g" >/tmp/ct-over
		while read -r p n c; do
			dd if=/dev/urandom of="$mnt/gen$g/d/$p" bs=4096 seek="$n" count="$c" conv=notrunc 2>/dev/null ||
				return 1
		done </tmp/ct-over
		sync
		t1=$(ct_now)
		bytes=$(awk '{ s += $3 } END { print s * 4096 }' /tmp/ct-over)
		ct_record "$mnt" "$g" "$method" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" \
			"$bytes" "$note"
	done
	sync
}

# The largest file of every generation: its extents and how many are
# shared (FIEMAP_EXTENT_SHARED) go to extents.tsv; no sharing promised
# (per-inode keys copy), so this records rather than checks.
wl_checks() { # mnt phases...
	local g n
	n=$(echo "$CT_LARGE_MIB" | wc -w)
	for g in $(seq 0 "$CT_GENS"); do
		echo "gen$g-L$n $1/gen$g/d/large/L$n 1 - 0"
	done
}

wl_target() { # mnt phase
	echo "$1/gen${2##*-gen}/d"
}
