#!/bin/bash
# The two modes of the patched `btrfs check` (build/progs/bin/btrfs, which
# `make progs` builds; this test builds nothing) must agree on encrypted
# filesystems (issue #36, item 3): on each image, `check --readonly` and
# `check --readonly --mode lowmem` give the same exit status and the same
# set of fscrypt errors (the "ERROR: root R inode I ..." lines that
# check/fscrypt.c prints for both), and on copies corrupted in targeted
# ways (checksums recomputed, every metadata mirror written) both report
# the expected error, naming the corrupted inode.
#
# Without a kernel: an image made by mkfs.btrfs -O encrypt --rootdir (plain
# files, an inline one, a directory), clean, then with an ENCRYPT flag on
# a file that has no context, an encrypted name in its unencrypted
# directory, an unknown inode flag, ENCRYPT_PER_EXTENT on a plain file, and
# encryption on a plain regular and inline extent.
#
# With encrypted items: images that VM runs left in build/ (scratch disks
# of filesystems with INCOMPAT_ENCRYPT and fscrypt context items, not
# modified in the last 15 minutes, so not in use; at most
# PROGS_LOWMEM_MAX_FOUND=3 of them, smallest first) and those named in
# PROGS_LOWMEM_IMAGES (space-separated): clean copies agree; then a context
# with an unknown version, an extent context with a nonzero reserved byte,
# an extent's encryption byte changed, an extent context under a key the
# subvolume does not record, encrypted and plaintext names in directories of
# the other kind, a key record with flags, ENCRYPT_PER_EXTENT on an encrypted
# directory. Without such an image the test ends with 77 (SKIP), after the
# kernel-free cases.
#
# Copies go to build/runs/progs-lowmem/ (removed at the end, with the
# checks' outputs kept). Cheap: no VM, a few seconds per image.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/lib/host-test.sh
. "$top/tests/lib/host-test.sh"

btrfs=$top/build/progs/bin/btrfs
mkfs=$top/build/progs/bin/mkfs.btrfs
[ -x "$btrfs" ] && [ -x "$mkfs" ] ||
	{ echo "SKIP: no $btrfs or $mkfs (make progs builds them)"; exit 77; }
"$btrfs" version | grep -q 'lowmem check' ||
	{ echo "SKIP: $btrfs predates the lowmem fscrypt checks (make progs)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3 (to corrupt copies)"; exit 77; }

work=$top/build/runs/progs-lowmem
rm -rf "$work"
mkdir -p "$work/out"
trap 'rm -f "$work"/*.img; rm -rf "$work/rootdir"' EXIT

# corrupt.py IMG UNDO OP ROOT...: one corruption OP in the first of the
# trees ROOT... that has an item for it; prints the tree and the corrupted
# inode's number, and saves what it overwrote in UNDO.
# corrupt.py IMG UNDO undo: write that back.
cat >"$work/corrupt.py" <<'EOF'
import re, struct, subprocess, sys

TAB = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    TAB.append(c)

def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = TAB[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF

btrfs, img, undo, op = sys.argv[1:5]
roots = [int(r) for r in sys.argv[5:]]
if op == 'undo':
    with open(img, 'r+b') as f, open(undo, 'rb') as u:
        saved = u.read()
        while saved:
            p, n = struct.unpack_from('<QI', saved)
            f.seek(p)
            f.write(saved[12:12 + n])
            saved = saved[12 + n:]
    sys.exit(0)

def dump(*a):
    return subprocess.run([btrfs, 'inspect-internal', 'dump-tree', *a, img],
                          capture_output=True, text=True, check=True).stdout

chunks = []
for m in re.finditer(r'CHUNK_ITEM (\d+)\).*?\n\s+length (\d+).*?num_stripes \d+(.*?)(?=\n\titem|\Z)',
                     dump('-t', 'chunk'), re.S):
    offs = [int(x) for x in re.findall(r'stripe \d+ devid \d+ offset (\d+)', m.group(3))]
    chunks.append((int(m.group(1)), int(m.group(2)), offs))

def phys(logical):
    for start, length, offs in chunks:
        if start <= logical < start + length:
            return [o + logical - start for o in offs]
    sys.exit('no chunk maps %d' % logical)

f = open(img, 'r+b')
f.seek(65536 + 0x94)
nodesize = struct.unpack('<I', f.read(4))[0]
f.seek(65536 + 0xc4)
if struct.unpack('<H', f.read(2))[0] != 0:
    sys.exit('checksum type is not crc32c')

def read_block(logical):
    f.seek(phys(logical)[0])
    return bytearray(f.read(nodesize))

def write_block(logical, blk):
    with open(undo, 'wb') as u:
        for p in phys(logical):
            f.seek(p)
            u.write(struct.pack('<QI', p, nodesize) + f.read(nodesize))
    blk[0:32] = struct.pack('<I', crc32c(bytes(blk[32:]))) + bytes(28)
    for p in phys(logical):
        f.seek(p)
        f.write(blk)

def items(blk):
    for s in range(struct.unpack_from('<I', blk, 0x60)[0]):
        o, t, k, off, size = struct.unpack_from('<QBQII', blk, 101 + 25 * s)
        yield (o, t, k), 101 + off, size

ENC, PER_EXTENT, UPSTREAM_ENC = 1 << 20, 1 << 21, 1 << 12
S_IFMT, S_IFREG, S_IFDIR = 0o170000, 0o100000, 0o040000

def target(root):
    leaves = [int(x) for x in re.findall(r'^leaf (\d+) items', dump('-t', str(root)), re.M)]
    flags, mode = {}, {}
    for leaf in leaves:
        blk = read_block(leaf)
        for (o, t, k), d, size in items(blk):
            if t == 1:
                mode[o] = struct.unpack_from('<I', blk, d + 52)[0] & S_IFMT
                flags[o] = struct.unpack_from('<Q', blk, d + 64)[0]
    for leaf in leaves:
        blk = read_block(leaf)
        for (o, t, k), d, size in items(blk):
            fl = flags.get(o, 0)
            if t == 1 and o >= 256:
                if op == 'flag-no-ctx' and mode[o] == S_IFREG and not fl & ENC:
                    struct.pack_into('<Q', blk, d + 64, fl | ENC)
                elif op == 'unknown-flag':
                    struct.pack_into('<Q', blk, d + 64, fl | UPSTREAM_ENC)
                elif op == 'per-extent-plain' and mode[o] == S_IFREG and not fl & ENC:
                    struct.pack_into('<Q', blk, d + 64, fl | PER_EXTENT)
                elif op == 'per-extent-dir' and mode[o] == S_IFDIR and fl & ENC:
                    struct.pack_into('<Q', blk, d + 64, fl | PER_EXTENT)
                else:
                    continue
            elif t == 46 and op == 'ctx-version':
                blk[d] = 7
            elif t == 47 and op == 'key-flags' and size == 24:
                blk[d + 16] = 1
            elif t == 96 and o in flags and blk[d + 8] == 1:
                if op == 'enc-name' and not fl & ENC and not blk[d + 29] & 0x80:
                    blk[d + 29] |= 0x80
                elif op == 'plain-name' and fl & ENC and blk[d + 29] & 0x80:
                    blk[d + 29] &= 0x7f
                else:
                    continue
            elif t == 108 and size >= 21:
                enc, typ = blk[d + 17], blk[d + 20]
                v2ctx = typ == 1 and enc == 0x82 and size == 93 and blk[d + 53] == 2
                if op == 'extent-reserved' and v2ctx:
                    blk[d + 56] = 1
                elif op == 'enc-byte' and v2ctx:
                    blk[d + 17] = 0x81
                elif op == 'extent-key' and v2ctx:
                    blk[d + 57:d + 73] = b'\xaa' * 16
                elif (op == 'plain-enc' and typ == 1 and enc == 0 and size == 53 and
                      not fl & ENC and struct.unpack_from('<Q', blk, d + 21)[0]):
                    blk[d + 17] = 0x81
                elif op == 'inline-enc' and typ == 0 and enc == 0 and not fl & ENC:
                    blk[d + 17] = 0x81
                else:
                    continue
            else:
                continue
            write_block(leaf, blk)
            return o
    return None

for root in roots:
    ino = target(root)
    if ino is not None:
        print(root, ino)
        sys.exit(0)
sys.exit(3)
EOF

# fscrypt_errors OUT: the fscrypt error lines of a check's output, sorted.
fscrypt_errors() {
	grep -E '^ERROR: root [0-9]+ (inode|dir) [0-9]+' "$1" | sort -u
}

# both NAME IMG [PATTERN]: run both modes on IMG; they must agree on the
# exit status and the fscrypt errors; without PATTERN both must pass,
# with it both must fail with an error line matching it (extended regex).
both() {
	local name=$1 img=$2 pat=${3:-} o=$work/out/$1 rc_o rc_l
	"$btrfs" check --readonly "$img" >"$o.orig" 2>&1
	rc_o=$?
	"$btrfs" check --readonly --mode lowmem "$img" >"$o.lowmem" 2>&1
	rc_l=$?
	fscrypt_errors "$o.orig" >"$o.orig.errors"
	fscrypt_errors "$o.lowmem" >"$o.lowmem.errors"
	if [ "$rc_o" != "$rc_l" ]; then
		bad "$name: original mode exits $rc_o, lowmem $rc_l (outputs in $o.*)"
	elif ! cmp -s "$o.orig.errors" "$o.lowmem.errors"; then
		bad "$name: the modes report different fscrypt errors:"
		diff "$o.orig.errors" "$o.lowmem.errors" | sed 's/^/     | /'
	elif [ -z "$pat" ] && [ "$rc_o" != 0 ]; then
		bad "$name: both modes fail on a clean image (exit $rc_o): $(grep -m3 ERROR "$o.orig" | paste -sd' ')"
	elif [ -n "$pat" ] && [ "$rc_o" = 0 ]; then
		bad "$name: both modes pass a corrupted image"
	elif [ -n "$pat" ] && ! grep -qE "$pat" "$o.orig.errors"; then
		bad "$name: no error matching '$pat'; got: $(paste -sd' ' "$o.orig.errors")"
	else
		ok "$name: both modes exit $rc_o, $(wc -l <"$o.orig.errors") fscrypt error(s) alike"
	fi
}

# corrupt_case COPY LABEL OP PATTERN ROOT...: COPY (a copy) with OP, checked
# by both modes, then undone; PATTERN gets "root R inode I" of the
# corrupted item in front. An OP with nothing to corrupt is only noted.
corrupt_case() {
	local copy=$1 label=$2 op=$3 pat=$4 where undo=$work/out/$2-$3.undo
	shift 4
	where=$(python3 "$work/corrupt.py" "$btrfs" "$copy" "$undo" "$op" "$@" \
		2>"$work/out/$label-$op.corrupt")
	case $? in
	0) both "$label-$op" "$copy" "^ERROR: root ${where% *} (inode|dir) ${where#* }[: ].*$pat" ;;
	3) echo "note $label-$op: no item to corrupt in trees $*"; return ;;
	*) bad "$label-$op: corrupt.py failed: $(cat "$work/out/$label-$op.corrupt")"; return ;;
	esac
	python3 "$work/corrupt.py" "$btrfs" "$copy" "$undo" undo ||
		bad "$label-$op: cannot undo the corruption"
	rm -f "$undo"
}

# Without a kernel: mkfs -O encrypt with files from a directory.
mkdir -p "$work/rootdir/dir"
printf 'inline\n' >"$work/rootdir/small"
head -c 65536 /dev/urandom >"$work/rootdir/dir/big"
printf 'x\n' >"$work/rootdir/dir/other"
plain=$work/mkfs-encrypt.img
truncate -s 256M "$plain"
if ! "$mkfs" -q -f -O encrypt --rootdir "$work/rootdir" "$plain" >"$work/out/mkfs" 2>&1; then
	bad "mkfs.btrfs -O encrypt --rootdir: $(cat "$work/out/mkfs")"
else
	both mkfs-clean "$plain"
	corrupt_case "$plain" mkfs flag-no-ctx 'encrypted inode \(flag ENCRYPT\) has no fscrypt context item' 5
	corrupt_case "$plain" mkfs enc-name 'unencrypted directory has 1 entries with encrypted names' 5
	corrupt_case "$plain" mkfs unknown-flag 'unknown inode flags 0x1000' 5
	corrupt_case "$plain" mkfs per-extent-plain 'flag ENCRYPT_PER_EXTENT on an inode that is not an encrypted regular file' 5
	corrupt_case "$plain" mkfs plain-enc 'encryption 129, but the inode needs 0' 5
	corrupt_case "$plain" mkfs inline-enc 'inline extent with encryption 129' 5
fi

# With encrypted items: images of VM runs, and PROGS_LOWMEM_IMAGES.
incompat_encrypt() {
	local fl
	fl=$("$btrfs" inspect-internal dump-super "$1" 2>/dev/null | awk '/^incompat_flags/ { print $2 }')
	[ -n "$fl" ] && [ $(( fl >> 40 & 1 )) = 1 ]
}
found=()
while IFS= read -r f; do
	[ "${#found[@]}" -lt "${PROGS_LOWMEM_MAX_FOUND:-3}" ] || break
	incompat_encrypt "$f" || continue
	"$btrfs" inspect-internal dump-tree "$f" 2>/dev/null | grep -q FSCRYPT_INODE_CTX || continue
	found+=("$f")
done < <(find "$top/build" -path "$work" -prune -o -name 'scratch*.img' -size +1M -mmin +15 \
	-printf '%s %p\n' 2>/dev/null | sort -n | cut -d' ' -f2-)
read -r -a named <<<"${PROGS_LOWMEM_IMAGES:-}"
n=0
for img in "${named[@]}" "${found[@]}"; do
	[ -f "$img" ] || { bad "no image $img (PROGS_LOWMEM_IMAGES)"; continue; }
	n=$((n + 1))
	label=enc$n
	echo "== $label: $img"
	copy=$work/$label.img
	cp --sparse=always "$img" "$copy" || { bad "$label: cannot copy $img"; continue; }
	both "$label-clean" "$copy"
	# the subvolume trees: 5 and every subvolume or snapshot
	mapfile -t roots < <("$btrfs" inspect-internal dump-tree -t root "$copy" 2>/dev/null |
		sed -n 's/^\titem [0-9]* key (\([0-9]*\) ROOT_ITEM .*/\1/p' | awk '$1 >= 256')
	roots=(5 "${roots[@]}")
	corrupt_case "$copy" "$label" ctx-version 'bad fscrypt context item \(size [0-9]+, version 7\)' "${roots[@]}"
	corrupt_case "$copy" "$label" extent-reserved 'bad extent context \(version 2\): nonzero reserved byte' "${roots[@]}"
	corrupt_case "$copy" "$label" enc-byte 'item size 93 does not match encryption 129' "${roots[@]}"
	corrupt_case "$copy" "$label" extent-key "master key is neither the policy's nor recorded by the subvolume" "${roots[@]}"
	corrupt_case "$copy" "$label" flag-no-ctx 'encrypted inode \(flag ENCRYPT\) has no fscrypt context item' "${roots[@]}"
	corrupt_case "$copy" "$label" enc-name 'unencrypted directory has 1 entries with encrypted names' "${roots[@]}"
	corrupt_case "$copy" "$label" plain-name 'encrypted directory has 1 entries with plaintext names' "${roots[@]}"
	corrupt_case "$copy" "$label" key-flags 'bad fscrypt key record .*: unknown flags' "${roots[@]}"
	corrupt_case "$copy" "$label" per-extent-dir 'flag ENCRYPT_PER_EXTENT on an inode that is not an encrypted regular file' "${roots[@]}"
	rm -f "$copy"
done

if [ "$fails" != 0 ]; then
	echo "progs-lowmem: $fails failed (outputs in $work/out)"
	exit 1
fi
if [ "$n" = 0 ]; then
	echo "SKIP: the kernel-free cases passed, but no image with fscrypt items: none in build/ (scratch*.img of a VM run with INCOMPAT_ENCRYPT and context items, untouched for 15 minutes) nor in PROGS_LOWMEM_IMAGES"
	exit 77
fi
echo "progs-lowmem: all passed ($n image(s) with fscrypt items)"
