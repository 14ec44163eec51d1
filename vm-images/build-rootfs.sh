#!/bin/bash
# Build the guest root image: debootstrap --variant=minbase bookworm with
# vm-images/packages.txt, plus vm-images/lab-init as the guest's PID 1,
# turned into an ext4 image with mkfs.ext4 -d (no loop mount).
#
#   [PROGS_BIN=DIR] vm-images/build-rootfs.sh OUT.img
#
# PROGS_BIN (make image sets it to build/progs/bin) holds the patched btrfs
# and mkfs.btrfs (patches/progs.sh): they go to /usr/local/sbin, and Debian's
# btrfs, btrfsck and mkfs.btrfs become links to them, so that every caller
# (PATH order, absolute paths) gets the ones that know encrypted btrfs.
# Debian's stay as *.debian for comparison.
#
# The mirror is the one this machine's apt already uses, read at run time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "$1")
work=$out.d
log() { echo "[image $(date +%H:%M:%S)] $*"; }
die() { echo "build-rootfs.sh: error: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "debootstrap needs root"

# First URI of a deb source that serves bookworm main, from deb822 or
# one-line sources.
apt_mirror() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk 'BEGIN{RS="";FS="\n"}
		     /Suites:[^\n]*bookworm([ \n]|$)/ && /Components:[^\n]*main/ {
		       for (i=1;i<=NF;i++) if ($i ~ /^URIs:/) { split($i,a," "); print a[2]; exit } }' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk '$1=="deb" && $0 ~ / bookworm / && $0 ~ / main/ {
		       for (i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' "$f"
	done
}
mirror=$(apt_mirror | head -n1 || true)
[ -n "$mirror" ] || die "no bookworm 'main' source found in /etc/apt/sources.list*; configure apt first"

pkgs=$(grep -v '^[[:space:]]*\(#\|$\)' "$here/packages.txt" | paste -sd, -)
rm -rf "$work"
mkdir -p "$work"
log "debootstrap --variant=minbase bookworm from $mirror (this machine's apt source)"
log "packages: $pkgs"
start=$(date +%s)
debootstrap --variant=minbase --include="$pkgs" bookworm "$work" "$mirror" >"$out.debootstrap.log" 2>&1 ||
	{ tail -n 20 "$out.debootstrap.log" >&2; die "debootstrap failed; full log: $out.debootstrap.log"; }
log "debootstrap done in $(( $(date +%s) - start ))s"

install -m 0755 "$here/lab-init" "$work/sbin/lab-init"
if [ -n "${PROGS_BIN:-}" ]; then
	for p in btrfs mkfs.btrfs; do
		[ -x "$PROGS_BIN/$p" ] || die "PROGS_BIN=$PROGS_BIN has no $p (make progs)"
	done
	install -d "$work/usr/local/sbin"
	install -m 0755 "$PROGS_BIN/btrfs" "$PROGS_BIN/mkfs.btrfs" "$work/usr/local/sbin/"
	install -m 0644 "$PROGS_BIN/VERSION" "$work/usr/local/sbin/btrfs-progs-lab.version"
	for p in usr/bin/btrfs usr/bin/btrfsck usr/sbin/mkfs.btrfs bin/btrfs bin/btrfsck sbin/mkfs.btrfs; do
		[ -e "$work/$p" ] || [ -L "$work/$p" ] || continue
		[ -L "$work/$p" ] || mv "$work/$p" "$work/$p.debian"
		case $p in *mkfs.btrfs) t=mkfs.btrfs ;; *) t=btrfs ;; esac
		ln -sfn "/usr/local/sbin/$t" "$work/$p"
	done
	log "patched btrfs-progs installed: $(head -n 2 "$PROGS_BIN/VERSION" | paste -sd' ')"
else
	log "PROGS_BIN not set: the image keeps Debian's btrfs-progs only"
fi
echo lab >"$work/etc/hostname"
printf '/dev/vda / ext4 rw 0 1\n' >"$work/etc/fstab"
mkdir -p "$work/job" "$work/results" "$work/mnt/scratch" "$work/mnt/scratch2"
# Keep the image lean: package caches and docs are not needed in the guest.
rm -rf "$work"/var/cache/apt/archives/*.deb "$work"/var/lib/apt/lists/* \
	"$work"/usr/share/doc/* "$work"/usr/share/man/* "$work"/usr/share/locale/*

size_mb=$(( $(du -sm "$work" | cut -f1) * 13 / 10 + 256 ))
log "mkfs.ext4 -d: ${size_mb} MiB image"
rm -f "$out.tmp"
mkfs.ext4 -q -F -L labroot -d "$work" "$out.tmp" "${size_mb}M"
mv "$out.tmp" "$out"
rm -rf "$work"
log "root image ready: $out ($(( $(date +%s) - start ))s)"
