#!/bin/bash
# The feature series (patches/feature/) encrypts with per-extent keys only,
# as upstream's does: it has no per-inode key mode and no knob that only
# serves comparisons; the lab's series (patches/lab/) carries those, so
# that the benchmark arms that use them keep working (issue #33, item 3).
#
# Reads the patches' added lines only; no kernel tree is needed.
#   - no feature patch adds a module parameter, the mount options
#     fscrypt_per_inode_keys, fscrypt_per_extent_keys or
#     fscrypt_extents_per_key, the per-inode extent encryption value
#     (BTRFS_ENCRYPTION_FSCRYPT_INODE) or the per-inode root flag
#     (BTRFS_ROOT_SUBVOL_FSCRYPT_INODE_KEYS);
#   - the lab series adds each of those mount options and the module
#     parameters fscrypto.extent_group_max_units and extent_key_slots;
#   - every fscrypt_* mount option a benchmark arm or test names is one
#     the lab series adds.
#
#   PATCHES=dir   the patches directory (default patches/), e.g. an old
#                 version of it to show that the check fails there
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
patches=${PATCHES:-$top/patches}
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

[ -d "$patches/feature" ] && [ -d "$patches/lab" ] ||
	{ echo "no $patches/feature or $patches/lab"; exit 2; }

# The lines a series adds (not the +++ headers), prefixed with the patch name.
added() { # dir
	local p
	for p in "$patches/$1"/[0-9]*.patch; do
		grep -E '^\+' "$p" | grep -v '^+++ ' | sed "s|^|$(basename "$p"): |"
	done
}
feature=$(added feature)
lab=$(added lab)

forbid() { # regex what
	local hits
	hits=$(grep -E -- "$1" <<<"$feature")
	if [ -n "$hits" ]; then
		bad "the feature series adds $2:"
		sed 's/^/       /' <<<"$hits" | head -n 5
	else
		ok "the feature series adds no $2"
	fi
}
forbid 'module_param(_named)?\(' "module parameter"
forbid 'fsparam_[a-z0-9]+\("fscrypt_(per_inode_keys|per_extent_keys|extents_per_key)"' \
	"key-mode or extents-per-key mount option"
forbid '#define[[:space:]]+BTRFS_ENCRYPTION_FSCRYPT_INODE[[:space:]]' \
	"per-inode extent encryption value"
forbid '#define[[:space:]]+BTRFS_ROOT_SUBVOL_FSCRYPT_INODE_KEYS' "per-inode root flag"
forbid 'BTRFS_MOUNT_FSCRYPT_PER_INODE_KEYS' "per-inode mount flag"

need() { # regex what
	if grep -qE -- "$1" <<<"$lab"; then
		ok "the lab series adds $2"
	else
		bad "the lab series does not add $2"
	fi
}
for opt in fscrypt_per_inode_keys fscrypt_per_extent_keys fscrypt_extents_per_key; do
	need "fsparam_[a-z0-9]+\\(\"$opt\"" "mount option $opt"
done
need 'module_param\(extent_group_max_units,' "module parameter fscrypto.extent_group_max_units"
need 'module_param\(extent_key_slots,' "module parameter fscrypto.extent_key_slots"

# Every fscrypt_* mount option the bench arms and the tests use exists.
used=$(grep -rhoE 'fscrypt_(per_inode_keys|per_extent_keys|extents_per_key)' \
	"$top/bench/arms" "$top/bench/workloads" "$top/tests"/*.c 2>/dev/null | sort -u)
for opt in $used; do
	if grep -qE "fsparam_[a-z0-9]+\\(\"$opt\"" <<<"$lab$feature"; then
		ok "mount option $opt, used by the lab, exists"
	else
		bad "mount option $opt is used by bench/ or tests/ but no series adds it"
	fi
done

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
