#!/bin/bash
# bench/tools/devimage (PREP=once's save and restore of a prepared scratch
# device) on a loop device: a device with data at scattered offsets is
# saved; the image holds only the non-zero blocks; after the device is
# overwritten with random data, restore makes it byte for byte the saved
# state again (cmp). The same with only the listed ranges read (RANGES
# mode), and for an ext4 saved as the bench saves it (only its blocks in
# use: ext4_used_ranges of bench/guest/lib.sh). Controls: the overwritten device differs before the
# restore (cmp can see it), a ranges list that misses written data gives a
# different device, and an image of another size is refused.
# Skips (77) when no loop device can be set up (not root, no loop driver).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

tmp=$(mktemp -d)
loop=
cleanup() { [ -n "$loop" ] && losetup -d "$loop"; rm -rf "$tmp"; }
trap cleanup EXIT
make -s -C "$top/bench/tools" OUT="$tmp/tools" || { echo "FAIL cannot build bench/tools"; exit 1; }
tool=$tmp/tools/devimage
truncate -s 96M "$tmp/disk.img"
loop=$(losetup -f --show "$tmp/disk.img" 2>/dev/null) || { loop=; echo "SKIP: no loop device (needs root and the loop driver)"; exit 77; }

w() { dd if=/dev/urandom of="$loop" bs="$1" count="$2" seek="$3" conv=notrunc,fsync status=none; }
w 4k 1 0          # like a superblock
w 64k 3 5
w 4k 1 9000       # one 4 KiB block inside a 64 KiB block
w 1M 2 90         # the device's last 6 MiB start at 90 MiB
cp "$tmp/disk.img" "$tmp/want.img"

if out=$("$tool" save "$loop" "$tmp/saved.img"); then ok "save: $out"; else bad "save failed"; fi
kib=$(du -k "$tmp/saved.img" | cut -f1)
# 4k -> 64k, 3 x 64k, 4k -> 64k, 2 MiB: 64 + 192 + 64 + 2048 KiB
if [ "$kib" -le 2432 ] && [ "$kib" -ge 2368 ]; then ok "image is sparse: $kib KiB of $(( $(stat -c %s "$tmp/saved.img") / 1024 )) KiB"; else bad "image uses $kib KiB, want 2368-2432"; fi
if cmp -s "$tmp/saved.img" "$tmp/want.img"; then ok "image reads as the device"; else bad "image differs from the device"; fi

dd if=/dev/urandom of="$loop" bs=1M count=96 conv=fsync status=none
if cmp -s "$loop" "$tmp/want.img"; then bad "control: the overwritten device still equals the saved state"; else ok "control: the overwritten device differs"; fi
if out=$("$tool" restore "$tmp/saved.img" "$loop"); then ok "restore: $out"; else bad "restore failed"; fi
if cmp "$loop" "$tmp/want.img"; then ok "restored device equals the saved state byte for byte"; else bad "restored device differs"; fi

# RANGES mode: the written ranges only (and one that misses a piece)
printf '0 4096\n327680 196608\n36864000 4096\n94371840 2097152\n' >"$tmp/ranges"
"$tool" restore "$tmp/saved.img" "$loop" >/dev/null
if "$tool" save "$loop" "$tmp/ranged.img" "$tmp/ranges" >/dev/null && cmp -s "$tmp/ranged.img" "$tmp/want.img"; then
	ok "save of the listed ranges only: the same image"
else
	bad "save of the listed ranges differs"
fi
printf '0 4096\n327680 196608\n36864000 4096\n' >"$tmp/short-ranges"
"$tool" save "$loop" "$tmp/short.img" "$tmp/short-ranges" >/dev/null
if cmp -s "$tmp/short.img" "$tmp/want.img"; then bad "control: a ranges list without the last 2 MiB gives the same image"; else ok "control: a ranges list that misses data gives another image"; fi

# ext4 as the bench saves it, on a device of zeros (as a new scratch disk)
dd if=/dev/zero of="$loop" bs=1M count=96 conv=fsync status=none
if mkfs.ext4 -q -F -O encrypt "$loop" && mkdir -p "$tmp/mnt" && mount -t ext4 "$loop" "$tmp/mnt" 2>/dev/null; then
	dd if=/dev/urandom of="$tmp/mnt/a" bs=1M count=5 status=none
	for i in 1 2 3 4 5 6 7 8; do dd if=/dev/urandom of="$tmp/mnt/a" bs=4k count=1 seek=$((i * 37)) conv=notrunc,fsync status=none; done
	sum=$(sha256sum <"$tmp/mnt/a")
	umount "$tmp/mnt"
	cp "$tmp/disk.img" "$tmp/want-ext4.img"
	# shellcheck source=bench/guest/lib.sh
	. "$top/bench/guest/lib.sh"
	ext4_used_ranges "$loop" >"$tmp/ext4-ranges"
	"$tool" save "$loop" "$tmp/ext4.img" "$tmp/ext4-ranges" >/dev/null
	dd if=/dev/urandom of="$loop" bs=1M count=96 conv=fsync status=none
	"$tool" restore "$tmp/ext4.img" "$loop" >/dev/null
	if cmp "$loop" "$tmp/want-ext4.img"; then
		ok "ext4 saved (its blocks in use: $(awk '{ n += $2 } END { print n / 1024 }' "$tmp/ext4-ranges") KiB of 98304 read), restored: byte for byte"
	else
		bad "ext4 saved from its blocks in use and restored differs from the device"
	fi
	if mount -t ext4 -o ro "$loop" "$tmp/mnt"; then
		if [ "$(sha256sum <"$tmp/mnt/a")" = "$sum" ]; then ok "restored ext4 mounts; its file reads as written"; else bad "restored ext4: the file differs"; fi
		umount "$tmp/mnt"
	else
		bad "restored ext4 does not mount"
	fi
else
	echo "(no ext4 mount here: the e2image path is not checked)"
fi

truncate -s 95M "$tmp/small.img"
if "$tool" restore "$tmp/small.img" "$loop" 2>"$tmp/err"; then bad "control: an image of another size was restored"; else ok "control: refused: $(cat "$tmp/err")"; fi

if [ "$fails" = 0 ]; then echo "bench-devimage: all passed"; else echo "bench-devimage: $fails failed"; exit 1; fi
