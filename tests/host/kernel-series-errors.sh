#!/bin/bash
# Test of patches/kernel.sh's error paths, on a tiny fake linux-source
# tarball (no real kernel is extracted):
#   - a good series applies, and the pristine tree is the first commit;
#   - a patch that does not apply stops the run, naming the patch, the
#     linux-source version and what to do;
#   - a series that names a missing file says so;
#   - the config assertion names every fragment option that is not set,
#     and passes a config that has them all.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
ks=$top/patches/kernel.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

# A fake source tree, and patches made against it with git.
mkdir -p "$tmp/src/linux-source-6.1"
printf 'VERSION = 6\nPATCHLEVEL = 1\n' >"$tmp/src/linux-source-6.1/Makefile"
printf 'line one\nline two\n' >"$tmp/src/linux-source-6.1/README"
tar -cJf "$tmp/fake.tar.xz" -C "$tmp/src" linux-source-6.1
git -C "$tmp/src/linux-source-6.1" init -q
g() { git -C "$tmp/src/linux-source-6.1" -c user.name=t -c user.email=t@t "$@"; }
g add -A && g commit -q -m base
echo 'line three' >>"$tmp/src/linux-source-6.1/README"
g commit -q -am "good: add a line"
mkdir -p "$tmp/p"
g format-patch -q -o "$tmp/p" HEAD~1
sed 's/^ line two$/ line TWO (not in the tree)/' "$tmp/p"/0001-*.patch >"$tmp/p/0002-bad.patch"
sed -i 's/^Subject: .*/Subject: [PATCH] bad: context does not match/' "$tmp/p/0002-bad.patch"
cp -r "$top/patches/config" "$tmp/p/config"

run_tree() { # series-lines...
	printf '%s\n' "# test series" "$@" >"$tmp/p/series"
	rm -rf "$tmp/build"
	BUILD=$tmp/build PATCHES=$tmp/p LINUX_SOURCE_TARBALL=$tmp/fake.tar.xz \
		"$ks" tree >"$tmp/out" 2>&1
}

if run_tree 0001-good-add-a-line.patch && grep -q 'line three' "$tmp/build/linux/README" &&
   [ "$(git -C "$tmp/build/linux" log --reverse --format=%s | head -n1)" = "linux-source-6.1 $(dpkg-query -W -f='${Version}' linux-source-6.1 2>/dev/null || echo unknown) (pristine)" ]; then
	ok "good series applies on a pristine first commit"
else
	bad "good series: $(cat "$tmp/out")"
fi

run_tree 0001-good-add-a-line.patch 0002-bad.patch
rc=$?
if [ $rc != 0 ] && grep -q 'patch 2/2 does not apply: .*0002-bad.patch' "$tmp/out" &&
   grep -q 'linux-source-6.1 found:' "$tmp/out" && grep -q 'What to do' "$tmp/out"; then
	ok "failing patch: exit $rc, names the patch, the version and what to do"
else
	bad "failing patch: exit $rc, output: $(cat "$tmp/out")"
fi

run_tree 0003-missing.patch
rc=$?
if [ $rc != 0 ] && grep -q 'names 0003-missing.patch, but .* does not exist' "$tmp/out"; then
	ok "missing patch file: exit $rc, named"
else
	bad "missing patch file: exit $rc, output: $(cat "$tmp/out")"
fi

# Config assertion: a config with every fragment option passes; dropping two
# options fails and names both.
{ grep -h '^CONFIG_' "$top/patches/config/base.config" "$top/patches/config/debug.config"; } >"$tmp/full.config"
if "$ks" assert-config "$tmp/full.config" debug >"$tmp/out" 2>&1; then
	ok "assert-config passes a complete config"
else
	bad "assert-config on a complete config: $(cat "$tmp/out")"
fi
grep -v -e '^CONFIG_BTRFS_FS=' -e '^CONFIG_KASAN=' "$tmp/full.config" >"$tmp/partial.config"
echo 'CONFIG_PROVE_LOCKING=n' >>"$tmp/partial.config"
if ! "$ks" assert-config "$tmp/partial.config" debug >"$tmp/out" 2>&1 &&
   grep -q 'CONFIG_BTRFS_FS=y (got: not set)' "$tmp/out" && grep -q 'CONFIG_KASAN=y (got: not set)' "$tmp/out"; then
	ok "assert-config names the missing options"
else
	bad "assert-config on a partial config: $(cat "$tmp/out")"
fi
# The perf fragment's "is not set" lines are asserted too.
{ grep -h '^CONFIG_' "$top/patches/config/base.config"; echo CONFIG_KASAN=y; } >"$tmp/perf.config"
if ! "$ks" assert-config "$tmp/perf.config" perf >"$tmp/out" 2>&1 && grep -q 'CONFIG_KASAN=n (got: y)' "$tmp/out"; then
	ok "assert-config refuses a debug option in the perf flavor"
else
	bad "assert-config perf: $(cat "$tmp/out")"
fi
[ "$fails" = 0 ]
