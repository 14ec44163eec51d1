#!/bin/bash
# bench/tools/devimage (PREP=once's save and restore of a prepared scratch
# device) on a loop device: a device with data at scattered offsets is
# saved; the image holds only the non-zero blocks; after the device is
# overwritten with random data, restore makes it byte for byte the saved
# state again (cmp). Controls: the overwritten device differs before the
# restore (cmp can see it), and an image of another size is refused.
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

truncate -s 95M "$tmp/small.img"
if "$tool" restore "$tmp/small.img" "$loop" 2>"$tmp/err"; then bad "control: an image of another size was restored"; else ok "control: refused: $(cat "$tmp/err")"; fi

if [ "$fails" = 0 ]; then echo "bench-devimage: all passed"; else echo "bench-devimage: $fails failed"; exit 1; fi
