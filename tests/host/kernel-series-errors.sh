#!/bin/bash
# Test of patches/kernel.sh's error paths, on a tiny fake linux-source
# tarball (no real kernel is extracted):
#   - a good series applies, and the pristine tree is the first commit;
#   - a patch that does not apply stops the run, naming the patch, the
#     linux-source version and what to do;
#   - a series that names a missing file says so;
#   - the config assertion names every fragment option that is not set,
#     and passes a config that has them all;
#   - BASE=6.1, retired, is refused with where the 6.1 series is;
#   - a series of series (patches/series lists directories)
#     applies each directory's patches in order, ends each with an empty
#     "lab: end of series DIR" commit that carries the cover letter, and
#     export splits the history back into the same directories, patches
#     and cover letter, with the developer's identity as author.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
ks=$top/patches/kernel.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

# A fake source tree, and patches made against it with git.
mkdir -p "$tmp/src/linux-source-6.12"
printf 'VERSION = 6\nPATCHLEVEL = 12\n' >"$tmp/src/linux-source-6.12/Makefile"
printf 'line one\nline two\n' >"$tmp/src/linux-source-6.12/README"
tar -cJf "$tmp/fake.tar.xz" -C "$tmp/src" linux-source-6.12
git -C "$tmp/src/linux-source-6.12" init -q
g() { git -C "$tmp/src/linux-source-6.12" -c user.name=t -c user.email=t@t "$@"; }
# the lab's placeholder identity in the tree, which export replaces
gl() { git -C "$tmp/src/linux-source-6.12" -c user.name=fscrypt-lab -c user.email=fscrypt-lab@localhost "$@"; }
g add -A && g commit -q -m base
echo 'line three' >>"$tmp/src/linux-source-6.12/README"
gl commit -q -s -am "good: add a line"
mkdir -p "$tmp/p"
g format-patch -q --no-signature -o "$tmp/p" HEAD~1
sed 's/^ line two$/ line TWO (not in the tree)/' "$tmp/p"/0001-*.patch >"$tmp/p/0002-bad.patch"
sed -i 's/^Subject: .*/Subject: [PATCH] bad: context does not match/' "$tmp/p/0002-bad.patch"
cp -r "$top/patches/config" "$tmp/p/config"

run_tree() { # series-lines...
	printf '%s\n' "# test series" "$@" >"$tmp/p/series"
	rm -rf "$tmp/build"
	BUILD=$tmp/build PATCHES=$tmp/p LINUX_SOURCE_TARBALL=$tmp/fake.tar.xz \
		"$ks" tree >"$tmp/out" 2>&1
}

if run_tree 0001-good-add-a-line.patch && grep -q 'line three' "$tmp/build/linux-6.12/README" &&
   [ "$(git -C "$tmp/build/linux-6.12" log --reverse --format=%s | head -n1)" = "linux-source-6.12 $(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null || echo unknown) (pristine)" ]; then
	ok "good series applies on a pristine first commit"
else
	bad "good series: $(cat "$tmp/out")"
fi

run_tree 0001-good-add-a-line.patch 0002-bad.patch
rc=$?
if [ $rc != 0 ] && grep -q 'patch 2/2 does not apply: .*0002-bad.patch' "$tmp/out" &&
   grep -q 'linux-source-6.12 found:' "$tmp/out" && grep -q 'What to do' "$tmp/out"; then
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

BUILD=$tmp/build PATCHES=$tmp/p LINUX_SOURCE_TARBALL=$tmp/fake.tar.xz BASE=6.1 \
	"$ks" tree >"$tmp/out" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q 'BASE=6.1 is retired.*git history has the 6.1 series' "$tmp/out"; then
	ok "BASE=6.1: refused (exit 2), retired, where its series is"
else
	bad "BASE=6.1: exit $rc, output: $(cat "$tmp/out")"
fi

# A series of series, from the same fake tarball.
mkdir -p "$tmp/n/feature" "$tmp/n/lab"
cp "$tmp/p"/0001-*.patch "$tmp/n/feature/"
printf '%s\n' "# feature" "$(basename "$tmp/p"/0001-*.patch)" >"$tmp/n/feature/series"
printf '%s\n' "# lab: none yet" >"$tmp/n/lab/series"
printf '%s\n' "# test" feature lab >"$tmp/n/series"
cat >"$tmp/n/feature/0000-cover-letter.patch" <<'EOT'
From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: t <t@t>
Date: Sat, 5 Dec 2026 00:00:00 +0000
Subject: [PATCH 0/1] a test cover letter

The blurb of the test, two lines
of it.

t (1):
  good: add a line
EOT
nb() { BUILD=$tmp/nbuild PATCHES=$tmp/n BASE=6.12 LINUX_SOURCE_TARBALL=$tmp/fake.tar.xz \
	GIT_CONFIG_GLOBAL=$tmp/gitconfig "$ks" "$@" >"$tmp/out" 2>&1; }
printf '[user]\n\tname = A Developer\n\temail = dev@example.org\n' >"$tmp/gitconfig"
if nb tree && [ -d "$tmp/nbuild/linux-6.12/.git" ] &&
   [ "$(git -C "$tmp/nbuild/linux-6.12" log --reverse --format=%s pristine..HEAD | xargs)" = "good: add a line lab: end of series feature lab: end of series lab" ] &&
   git -C "$tmp/nbuild/linux-6.12" log -1 --format=%B HEAD~1 | grep -q '^Cover-Subject: a test cover letter$' &&
   git -C "$tmp/nbuild/linux-6.12" log -1 --format=%B HEAD~1 | grep -q '^of it\.$'; then
	ok "series of series: applied in order into linux-6.12, an end commit per series, the cover letter in it"
else
	bad "series of series: $(cat "$tmp/out"; git -C "$tmp/nbuild/linux-6.12" log --format=%s 2>&1)"
fi
cp -r "$tmp/n" "$tmp/n.orig"
if nb export && [ "$(grep -v '^#' "$tmp/n/series" | xargs)" = "feature lab" ] &&
   [ "$(grep -v '^#' "$tmp/n/feature/series" | xargs)" = "$(grep -v '^#' "$tmp/n.orig/feature/series" | xargs)" ] &&
   ! grep -qv '^#' "$tmp/n/lab/series" &&
   grep -q '^From: A Developer <dev@example.org>$' "$tmp/n/feature/0001-"*.patch &&
   grep -q '^Signed-off-by: A Developer <dev@example.org>$' "$tmp/n/feature/0001-"*.patch &&
   ! grep -q 'fscrypt-lab@localhost' "$tmp/n/feature/0001-"*.patch &&
   grep -q '^Subject: \[PATCH 0/1\] a test cover letter$' "$tmp/n/feature/0000-cover-letter.patch" &&
   grep -q '^From: A Developer <dev@example.org>$' "$tmp/n/feature/0000-cover-letter.patch" &&
   grep -q '^The blurb of the test, two lines$' "$tmp/n/feature/0000-cover-letter.patch" &&
   grep -q '^Date: Sat, 5 Dec 2026' "$tmp/n/feature/0000-cover-letter.patch" &&
   diff <(sed '1,/^Subject: /d; /^Signed-off-by: /d' "$tmp/n.orig/feature/0001-"*.patch) \
	<(sed '1,/^Subject: /d; /^Signed-off-by: /d' "$tmp/n/feature/0001-"*.patch); then
	ok "series of series: export gives back the directories, the patch, the cover letter, the developer as author"
else
	bad "series of series export: $(cat "$tmp/out"; ls -R "$tmp/n"; cat "$tmp/n/feature/0000-cover-letter.patch" 2>&1)"
fi
if ! BUILD=$tmp/nbuild PATCHES=$tmp/n BASE=6.12 GIT_CONFIG_GLOBAL=/dev/null "$ks" export >"$tmp/out" 2>&1 &&
   grep -q 'no git user.name/user.email' "$tmp/out"; then
	ok "export without an identity refuses, saying so"
else
	bad "export without identity: $(cat "$tmp/out")"
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
