# shellcheck shell=bash
# Benchmark arms: how each one makes, mounts and encrypts its filesystem.
# Sourced by bench/guest-bench.sh (in the guest) and bench/run-bench.sh
# (for the arm names only: what an arm did is recorded by the guest).
#
#   btrfs-extent  btrfs, fscrypt with per-extent keys (the default for new
#                 encrypted files, patch 0017)
#   btrfs-inode   btrfs, fscrypt with per-inode keys, selected by the mount
#                 option below
#   btrfs-plain   btrfs, unencrypted
#   ext4-inode    ext4, upstream fscrypt (per-inode keys)
#   ext4-plain    ext4, unencrypted
ALL_ARMS="btrfs-extent btrfs-inode btrfs-plain ext4-inode ext4-plain"

# A kernel with per-extent keys for btrfs advertises them in sysfs, and then
# needs the mount option for per-inode keys. On a kernel without that file
# (the series up to 0016) btrfs has per-inode keys only: btrfs-inode needs
# no option and btrfs-extent is skipped, since measuring per-inode keys
# under the btrfs-extent label would be a fake result.
BTRFS_EXTENT_KEYS_FEATURE=/sys/fs/btrfs/features/encrypt_extent_keys
BTRFS_PER_INODE_KEYS_OPT=fscrypt_per_inode_keys

arm_fs() { echo "${1%%-*}"; }

arm_encrypted() {
	case $1 in *-plain) return 1 ;; *) return 0 ;; esac
}

arm_mkfs() {
	case $1 in
	btrfs-*) echo "mkfs.btrfs -q -f" ;;
	ext4-inode) echo "mkfs.ext4 -q -F -O encrypt" ;;
	ext4-*) echo "mkfs.ext4 -q -F" ;;
	esac
}

arm_mount_opts() {
	case $1 in
	btrfs-inode) [ -e "$BTRFS_EXTENT_KEYS_FEATURE" ] && echo "$BTRFS_PER_INODE_KEYS_OPT" ;;
	*) echo "" ;;
	esac
}

# The key mode the arm measures; the guest checks that the kernel reports
# it (/proc/mounts, the policy read back) and fails the run otherwise.
arm_key_mode() {
	case $1 in
	btrfs-extent) echo per-extent ;;
	*-plain) echo none ;;
	*) echo per-inode ;;
	esac
}

# Prints why this kernel cannot run the arm, and fails if it can.
arm_unsupported() {
	case $1 in
	btrfs-extent)
		[ -e "$BTRFS_EXTENT_KEYS_FEATURE" ] && return 1
		echo "btrfs on this kernel encrypts with per-inode keys only (no $BTRFS_EXTENT_KEYS_FEATURE)" ;;
	*) return 1 ;;
	esac
}

valid_arm() {
	case " $ALL_ARMS " in *" $1 "*) return 0 ;; *) return 1 ;; esac
}

# Tuning after mount, recorded in the report with the mkfs and mount options.
# ext4's inode preallocation lays a large file's blocks out by logical
# offset, so random writes would still give a few long extents. Treating
# every request as small makes ext4 allocate blocks in the order they are
# written (locality-group preallocation), so the file really fragments.
arm_tuning() { # arm [dev]
	case $1 in
	ext4-*) echo "echo 1000000 > /sys/fs/ext4/${2:-<dev>}/mb_stream_req" ;;
	*) echo "" ;;
	esac
}
