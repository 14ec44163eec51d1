#!/bin/bash
# btrfs-progs for the lab: Debian bookworm's source plus patches/btrfs-progs/.
#
#   patches/progs.sh tree       fetch the source (apt-get source), apply the series
#   patches/progs.sh build      build btrfs and mkfs.btrfs (static) into $BUILD/progs/bin
#   patches/progs.sh export     regenerate patches/btrfs-progs/ from the tree's history
#   patches/progs.sh hash       print the hash of the series (for make's stamp)
#
# Layout of the ignored build directory (BUILD, default build/):
#   $BUILD/btrfs-progs       git repo; first commit = pristine Debian source
#                            (tag "pristine"), then one commit per patch
#   $BUILD/progs-apt/        a private apt configuration with the deb-src
#                            line, so the machine's apt setup is left alone
#   $BUILD/progs/bin/        btrfs, mkfs.btrfs (what the image installs)
# PROGS_SRC and PROGS_OUT override the last two (e.g. a development clone
# of the tree, exported from with PROGS_SRC=... progs.sh export).
#
# The deb-src line is derived at run time from this machine's own apt
# sources (deb822 .sources or one-line .list), like build-rootfs.sh's mirror.
# Only the programs the guest needs are built: no docs, no python bindings,
# no convert; ccache when it is installed.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(realpath -m "${BUILD:-$top/build}")
SRC=$(realpath -m "${PROGS_SRC:-$BUILD/btrfs-progs}")
APTDIR=$BUILD/progs-apt
OUTDIR=$(realpath -m "${PROGS_OUT:-$BUILD/progs}")
PATCHES=$(realpath -m "${PROGS_PATCHES:-$top/patches/btrfs-progs}")
SUITE=bookworm
JOBS=${JOBS:-$(nproc)}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/fscrypt-lab/ccache}
# Paths under the build directory are hashed relative to it, and the
# compile directory is left out of the hash, so that a fresh clone (another
# path) hits what an earlier clone compiled. Only debug info's DW_AT_comp_dir
# may then name the earlier clone.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$BUILD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}

die() { echo "progs.sh: error: $*" >&2; exit 1; }
log() { echo "[progs $(date +%H:%M:%S)] $*"; }

git_src() { git -C "$SRC" -c user.name=fscrypt-lab -c user.email=fscrypt-lab@localhost "$@"; }

series_files() {
	grep -v '^[[:space:]]*\(#\|$\)' "$PATCHES/series" 2>/dev/null || true
}

series_hash() {
	# shellcheck disable=SC2046 # one patch file name per word (no spaces)
	(cd "$PATCHES" 2>/dev/null && cat series $(series_files)) 2>/dev/null | sha256sum | cut -c1-16
}

# deb-src stanzas (deb822) for every deb source of this machine that serves
# $SUITE main, with the same URIs and keyring.
derive_sources() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk -v suite="$SUITE" 'BEGIN { RS = ""; FS = "\n" }
		{
			types = uris = suites = comps = signed = ""
			for (i = 1; i <= NF; i++) {
				if ($i ~ /^Types:/) types = $i
				else if ($i ~ /^URIs:/) uris = $i
				else if ($i ~ /^Suites:/) suites = $i
				else if ($i ~ /^Components:/) comps = $i
				else if ($i ~ /^Signed-By:/) signed = $i
			}
			if (types ~ /[ \t]deb([ \t]|$)/ && (suites " ") ~ ("[ \t]" suite "[ \t]") &&
			    comps ~ /[ \t]main([ \t]|$)/ && uris != "") {
				printf "Types: deb-src\n%s\nSuites: %s\nComponents: main\n", uris, suite
				if (signed != "") print signed
				print ""
			}
		}' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk -v suite="$SUITE" '$1 == "deb" {
			opts = ""; i = 2
			if ($2 ~ /^\[/) { while (i <= NF) { opts = opts " " $i; if ($i ~ /\]$/) break; i++ }; i++ }
			uri = $i; dist = $(i + 1)
			main = 0
			for (j = i + 2; j <= NF; j++) if ($j == "main") main = 1
			if (dist == suite && main && uri ~ /^[a-z+]+:\/\//) {
				signed = ""
				if (match(opts, /signed-by=[^] ]+/)) signed = substr(opts, RSTART + 10, RLENGTH - 10)
				printf "Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\n", uri, suite
				if (signed != "") printf "Signed-By: %s\n", signed
				print ""
			}
		}' "$f"
	done
}

apt_private() {
	apt-get -o Dir::Etc::SourceList=/dev/null \
		-o Dir::Etc::SourceParts="$APTDIR/sources.list.d" \
		-o Dir::State::Lists="$APTDIR/lists" \
		-o Dir::Cache::Archives="$APTDIR/archives" \
		-o Dir::Cache::pkgcache="" -o Dir::Cache::srcpkgcache="" "$@"
}

fetch_pristine() {
	command -v dpkg-source >/dev/null || die "dpkg-source missing (apt-get install dpkg-dev)"
	rm -rf "$APTDIR"
	mkdir -p "$APTDIR/sources.list.d" "$APTDIR/lists/partial" "$APTDIR/archives/partial"
	derive_sources >"$APTDIR/sources.list.d/lab-src.sources"
	[ -s "$APTDIR/sources.list.d/lab-src.sources" ] ||
		die "no deb source for '$SUITE main' in /etc/apt/sources.list*; configure apt first"
	log "deb-src derived from this machine's apt sources: $(grep -h '^URIs:' "$APTDIR/sources.list.d/lab-src.sources" | sed 's/^URIs: *//' | paste -sd' ')"
	apt_private update -qq >"$APTDIR/update.log" 2>&1 ||
		{ cat "$APTDIR/update.log" >&2; die "apt-get update (deb-src) failed"; }
	rm -rf "$BUILD/progs-src.tmp"
	mkdir -p "$BUILD/progs-src.tmp"
	log "apt-get source btrfs-progs ($SUITE)"
	(cd "$BUILD/progs-src.tmp" && apt_private source -qq "btrfs-progs/$SUITE") \
		>"$BUILD/progs-src.tmp.log" 2>&1 ||
		{ cat "$BUILD/progs-src.tmp.log" >&2; die "apt-get source btrfs-progs failed"; }
	local dir
	dir=$(find "$BUILD/progs-src.tmp" -mindepth 1 -maxdepth 1 -type d -name 'btrfs-progs-*' | head -n1)
	[ -n "$dir" ] || die "apt-get source left no btrfs-progs-* directory"
	local ver
	ver=$(cd "$dir" && dpkg-parsechangelog -S Version 2>/dev/null || basename "$dir")
	# The tree is the upstream source with Debian's patches applied and its
	# build system regenerated by autogen.sh, as Debian's build does
	# (dh_autoreconf): the shipped configure is stale.  debian/ stays.
	(cd "$dir" && ./autogen.sh) >"$BUILD/progs-autogen.log" 2>&1 ||
		{ tail -n 20 "$BUILD/progs-autogen.log" >&2; die "autogen.sh failed (autoconf, automake installed?)"; }
	rm -rf "$dir/autom4te.cache"	# autoconf's cache, not source
	git -C "$dir" init -q -b lab
	git -C "$dir" config gc.auto 0
	git -C "$dir" add -A -f .
	git -C "$dir" -c user.name=fscrypt-lab -c user.email=fscrypt-lab@localhost \
		commit -q -m "btrfs-progs $ver from Debian $SUITE (pristine: Debian patches applied, autogen.sh run)"
	git -C "$dir" tag pristine
	echo "$ver" >"$dir/.git/lab-source-version"
	rm -rf "$SRC"
	mv "$dir" "$SRC"
	rm -rf "$BUILD/progs-src.tmp" "$BUILD/progs-src.tmp.log"
	log "pristine btrfs-progs $ver in $SRC (tag 'pristine')"
}

apply_series() {
	git_src checkout -q -f -B lab pristine
	git_src clean -q -fdx
	local p n=0 total
	total=$(series_files | wc -l)
	for p in $(series_files); do
		n=$((n + 1))
		[ -f "$PATCHES/$p" ] || die "$PATCHES/series names $p, but it does not exist"
		if ! git_src am -q "$PATCHES/$p" >"$BUILD/progs-am.log" 2>&1; then
			git_src am --abort >/dev/null 2>&1 || true
			cat "$BUILD/progs-am.log" >&2
			die "patch $n/$total does not apply: $PATCHES/$p (source $(cat "$SRC/.git/lab-source-version"))"
		fi
	done
	printf '%s %s\n' "$(series_hash)" "$(git_src rev-parse HEAD)" >"$SRC/.git/lab-series-applied"
	log "btrfs-progs tree at $(git_src rev-parse --short HEAD): $total patch(es)"
}

cmd_tree() {
	mkdir -p "$BUILD"
	[ -d "$SRC/.git" ] || fetch_pristine
	local rec_hash='' rec_head=''
	[ ! -f "$SRC/.git/lab-series-applied" ] || read -r rec_hash rec_head <"$SRC/.git/lab-series-applied"
	[ "$rec_hash" != "$(series_hash)" ] || return 0
	if [ -n "$rec_head" ] && [ "${FORCE:-0}" != 1 ] &&
	   { [ "$(git_src rev-parse HEAD)" != "$rec_head" ] ||
	     [ -n "$(git_src status --porcelain --untracked-files=no)" ]; }; then
		die "patches/btrfs-progs changed, but $SRC has work not in it; 'make progs-export' first, or FORCE=1 to discard it"
	fi
	apply_series
}

cmd_build() {
	[ "${PROGS_NO_TREE:-0}" = 1 ] || cmd_tree
	local cc=gcc start
	start=$(date +%s)
	command -v ccache >/dev/null && cc="ccache gcc"
	if [ ! -f "$SRC/include/config.h" ] || [ ! -f "$SRC/Makefile.inc" ] || [ "$SRC/configure.ac" -nt "$SRC/include/config.h" ]; then
		log "configure (static; no docs, convert, python, libudev)"
		(cd "$SRC" && ./configure CC="$cc" --disable-documentation --disable-convert \
			--disable-python --disable-libudev --disable-backtrace) \
			>"$BUILD/progs-configure.log" 2>&1 ||
			{ tail -n 30 "$BUILD/progs-configure.log" >&2; die "configure failed; log: $BUILD/progs-configure.log"; }
	fi
	# btrfs-progs 6.2's Makefile writes its .deps without the objects as
	# targets, so a changed header rebuilds nothing: when any header
	# differs from the last build's, rebuild all objects (cheap with ccache).
	local hdrs
	hdrs=$(cd "$SRC" && git ls-files -z -- '*.h' | xargs -0 cat | sha256sum | cut -c1-16)
	if [ "$(cat "$SRC/.git/lab-headers-built" 2>/dev/null)" != "$hdrs" ]; then
		log "headers changed since the last build: make clean first"
		make -C "$SRC" clean >/dev/null 2>&1 || true
	fi
	log "make btrfs.static mkfs.btrfs.static (-j$JOBS)"
	make -C "$SRC" -j"$JOBS" V=0 btrfs.static mkfs.btrfs.static >"$BUILD/progs-build.log" 2>&1 ||
		{ grep -E 'error|Error' "$BUILD/progs-build.log" | head -n 30 >&2; die "build failed; log: $BUILD/progs-build.log"; }
	echo "$hdrs" >"$SRC/.git/lab-headers-built"
	mkdir -p "$OUTDIR/bin"
	install -m 0755 "$SRC/btrfs.static" "$OUTDIR/bin/btrfs.tmp"
	install -m 0755 "$SRC/mkfs.btrfs.static" "$OUTDIR/bin/mkfs.btrfs.tmp"
	mv "$OUTDIR/bin/btrfs.tmp" "$OUTDIR/bin/btrfs"
	mv "$OUTDIR/bin/mkfs.btrfs.tmp" "$OUTDIR/bin/mkfs.btrfs"
	{ echo "source $(cat "$SRC/.git/lab-source-version")"
	  echo "series $(series_hash) ($(series_files | wc -l) patches)"
	  echo "head $(git_src rev-parse HEAD)"; } >"$OUTDIR/bin/VERSION"
	log "built $OUTDIR/bin/{btrfs,mkfs.btrfs} in $(( $(date +%s) - start ))s"
}

cmd_export() {
	[ -d "$SRC/.git" ] || die "no btrfs-progs tree at $SRC; run 'make progs' first"
	[ -z "$(git_src status --porcelain --untracked-files=no)" ] ||
		die "$SRC has uncommitted changes; commit them in the tree first"
	local n
	mkdir -p "$PATCHES"
	n=$(git_src rev-list --count pristine..HEAD)
	rm -f "$PATCHES"/*.patch
	git_src format-patch -q --no-signature --zero-commit -o "$PATCHES" pristine..HEAD
	{ echo "# Applied in order by patches/progs.sh with git am, on Debian $SUITE's btrfs-progs source."
	  echo "# Generated by 'make progs-export' from the tree's history; do not edit by hand."
	  (cd "$PATCHES" && ls -1 -- *.patch 2>/dev/null || true); } >"$PATCHES/series"
	printf '%s %s\n' "$(series_hash)" "$(git_src rev-parse HEAD)" >"$SRC/.git/lab-series-applied"
	log "exported $n patch(es) to patches/btrfs-progs/"
}

case "${1:-}" in
tree) cmd_tree ;;
build) cmd_build ;;
export) cmd_export ;;
hash) series_hash ;;
*) echo "usage: $0 tree | build | export | hash" >&2; exit 2 ;;
esac
