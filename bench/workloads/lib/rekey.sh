# shellcheck shell=bash
# Helpers of the workloads that rekey a subvolume (rekey, rekeytime),
# sourced by their hooks.sh: code that more than one workload needs lives
# here, not in the generic guest library (bench/guest/lib.sh).

# rekey_probe MNT: wl_probe of the workloads that rekey a subvolume (rekey,
# rekeytime): per-extent keys on btrfs only, and the kernel must have the
# rekey ioctl: a small subvolume is rekeyed from K1 to K2 for real, then
# deleted.
rekey_probe() { # mnt
	local mnt=$1 mode fs err rc sv=$1/.rekey-probe
	mode=$(arm_key_mode "$ARM") fs=$(arm_fs "$ARM")
	case $fs:$mode in
	btrfs:per-extent | btrfs:per-extent-key) ;;
	*:none)
		echo "$ARM is unencrypted: nothing to rekey (BTRFS_IOC_FSCRYPT_REKEY moves an encrypted btrfs subvolume to another master key)"
		return 3 ;;
	btrfs:per-inode)
		echo "$ARM cannot rekey: the kernel refuses a subvolume holding per-inode-key files (EOPNOTSUPP: they cannot write new extents under another key); only per-extent keys can"
		return 3 ;;
	*)
		echo "$fs has neither subvolumes nor a rekey ioctl (BTRFS_IOC_FSCRYPT_REKEY is btrfs's; $ARM is $mode on $fs)"
		return 3 ;;
	esac
	btrfs -q subvolume create "$sv" || return 1
	mkdir "$sv/d" && fscrypt_setup "$mnt" "$sv/d" >/dev/null && echo probe >"$sv/d/f" || return 1
	sync
	err=$(fscrypt_setup rekey "$sv" "$sv/d" 1 2 2>&1)
	rc=$?
	btrfs -q subvolume delete "$sv" >/dev/null 2>&1
	case $rc in
	0) return 0 ;;
	3) echo "this kernel cannot rekey a subvolume: ${err//$'\n'/ }"; return 3 ;;
	*) echo "the probe's rekey failed: ${err//$'\n'/ }"; return 1 ;;
	esac
}
