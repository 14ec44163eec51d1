#!/bin/bash
# Kernel tree, series, config and build for the lab.
#
#   patches/kernel.sh tree              extract linux-source-6.1, apply patches/series
#   patches/kernel.sh build FLAVOR      config + build bzImage for FLAVOR (debug|perf)
#   patches/kernel.sh export            regenerate patches/ from the tree's history
#   patches/kernel.sh check-series [FLAVOR]  build every prefix of the series
#
# Layout of the ignored build directory (BUILD, default build/):
#   $BUILD/linux          git repo; first commit = pristine linux-source (tag "pristine")
#   $BUILD/obj-$FLAVOR    out-of-tree objects, one per flavor (incremental)
#   $BUILD/linux/.lab-series-applied   hash of the series the tree was made from,
#                         and the commit it produced; used to notice local work.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(realpath -m "${BUILD:-$top/build}")
SRC=$BUILD/linux
TARBALL=${LINUX_SOURCE_TARBALL:-/usr/src/linux-source-6.1.tar.xz}
PATCHES=$(realpath -m "${PATCHES:-$top/patches}")	# series, *.patch, config/
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/fscrypt-lab/ccache}
# Paths under the build directory are hashed relative to it, and the
# compile directory is left out of the hash, so that a fresh clone (another
# path) hits what an earlier clone compiled. Only debug info's DW_AT_comp_dir
# may then name the earlier clone.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$BUILD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
JOBS=${JOBS:-$(nproc)}

die() { echo "kernel.sh: error: $*" >&2; exit 1; }
log() { echo "[kernel $(date +%H:%M:%S)] $*"; }

series_files() {
	grep -v '^[[:space:]]*\(#\|$\)' "$PATCHES/series" 2>/dev/null || true
}

# Hash of everything that determines the patched tree.
series_hash() {
	# shellcheck disable=SC2046 # one patch file name per word (no spaces)
	(cd "$PATCHES" && cat series $(series_files)) 2>/dev/null | sha256sum | cut -c1-16
}

source_version() {
	dpkg-query -W -f='${Version}' linux-source-6.1 2>/dev/null || echo unknown
}

git_src() { git -C "$SRC" -c user.name=lab -c user.email=lab@localhost "$@"; }

extract_pristine() {
	[ -f "$TARBALL" ] || die "$TARBALL not found; install it with: apt-get install linux-source-6.1"
	log "extracting $TARBALL (linux-source $(source_version)) into $SRC"
	rm -rf "$SRC.tmp"
	mkdir -p "$SRC.tmp"
	tar -xf "$TARBALL" -C "$SRC.tmp" --strip-components=1
	git -C "$SRC.tmp" init -q -b lab
	git -C "$SRC.tmp" config core.autocrlf false
	git -C "$SRC.tmp" config gc.auto 0
	log "committing the pristine tree (first commit, tag 'pristine')"
	git -C "$SRC.tmp" add -A -f . >/dev/null
	git -C "$SRC.tmp" -c user.name=lab -c user.email=lab@localhost \
		commit -q -m "linux-source-6.1 $(source_version) (pristine)"
	git -C "$SRC.tmp" tag pristine
	mv "$SRC.tmp" "$SRC"
}

apply_series() {
	git_src checkout -q -f -B lab pristine
	git_src clean -q -fdx
	local p n=0 total
	total=$(series_files | wc -l)
	for p in $(series_files); do
		n=$((n + 1))
		[ -f "$PATCHES/$p" ] || die "$PATCHES/series names $p, but $PATCHES/$p does not exist"
		log "applying [$n/$total] $p"
		if ! git_src am -q --keep-cr "$PATCHES/$p" >"$BUILD/git-am.log" 2>&1; then
			git_src am --abort >/dev/null 2>&1 || true
			cat "$BUILD/git-am.log" >&2
			cat >&2 <<EOF

kernel.sh: error: patch $n/$total does not apply: $PATCHES/$p
  linux-source-6.1 found: $(source_version) ($TARBALL)
  What to do: the series was made for a different linux-source. Rebase it:
    cd $SRC && git checkout -B lab pristine
    git am -3 $PATCHES/*.patch      # resolve each conflict, git am --continue
    cd $top && make export-series       # rewrites patches/ from the tree
  (patches/README.md, "Moving the series to another linux-source", has the details.)
EOF
			exit 1
		fi
	done
	printf '%s %s\n' "$(series_hash)" "$(git_src rev-parse HEAD)" >"$SRC/.git/lab-series-applied"
	log "tree at $(git_src rev-parse --short HEAD): $total patch(es) on linux-source $(source_version)"
}

# Make $SRC match patches/series, unless it holds local work that would be lost.
cmd_tree() {
	local p
	for p in $(series_files); do
		[ -f "$PATCHES/$p" ] || die "$PATCHES/series names $p, but $PATCHES/$p does not exist"
	done
	mkdir -p "$BUILD"
	[ -d "$SRC/.git" ] || extract_pristine
	local want rec_hash rec_head
	want=$(series_hash)
	rec_hash='' rec_head=''
	[ ! -f "$SRC/.git/lab-series-applied" ] || read -r rec_hash rec_head <"$SRC/.git/lab-series-applied"
	if [ "${rec_hash:-}" = "$want" ]; then
		return 0
	fi
	if [ -n "${rec_head:-}" ] && [ "${FORCE:-0}" != 1 ]; then
		if [ "$(git_src rev-parse HEAD)" != "$rec_head" ] ||
		   [ -n "$(git_src status --porcelain --untracked-files=no)" ]; then
			cat >&2 <<EOF
kernel.sh: error: patches/ changed, but $SRC has local commits or edits
  that are not in patches/. Re-applying the series would discard them.
  Either export them first:   make export-series
  or discard them:            make kernel FORCE=1
EOF
			exit 1
		fi
	fi
	apply_series
}

# The fragments a flavor is made of, in merge order.
fragments() {
	echo "$PATCHES/config/base.config"
	echo "$PATCHES/config/$1.config"
}

# Every CONFIG_X=y / "# CONFIG_X is not set" line of the fragments must hold.
assert_config() {
	local cfg=$1 flavor=$2 missing=() line opt val got
	# shellcheck disable=SC2046 # one config fragment path per word (no spaces)
	while IFS= read -r line; do
		case "$line" in
		CONFIG_*=*) opt=${line%%=*}; val=${line#*=} ;;
		"# CONFIG_"*" is not set") opt=${line#\# }; opt=${opt%% *}; val=n ;;
		*) continue ;;
		esac
		got=$(grep -E "^$opt=|^# $opt is not set" "$cfg" | head -n1 || true)
		case "$got" in
		"$opt=$val") ;;
		"# $opt is not set"|"") [ "$val" = n ] || missing+=("$opt=$val (got: not set)") ;;
		*) missing+=("$opt=$val (got: ${got#*=})") ;;
		esac
	done < <(cat $(fragments "$flavor"))
	if [ ${#missing[@]} -gt 0 ]; then
		echo "kernel.sh: error: config for FLAVOR=$flavor lacks options its fragments ask for:" >&2
		printf '  %s\n' "${missing[@]}" >&2
		echo "  Usually a missing dependency: find it with 'make menuconfig O=$BUILD/obj-$flavor' (search with /)." >&2
		exit 1
	fi
}

config_hash() {
	# shellcheck disable=SC2046 # one config fragment path per word (no spaces)
	(cat $(fragments "$1"); echo "$1") | sha256sum | cut -c1-16
}

cmd_config() {
	local flavor=$1 obj=$BUILD/obj-$1
	mkdir -p "$obj"
	if [ -f "$obj/.config" ] && [ "$(cat "$obj/.lab-config-hash" 2>/dev/null)" = "$(config_hash "$flavor")" ]; then
		return 0
	fi
	log "configuring FLAVOR=$flavor: tinyconfig + $(fragments "$flavor" | xargs -n1 basename | xargs)"
	make -s -C "$SRC" O="$obj" ARCH=x86_64 tinyconfig >/dev/null 2>&1
	# shellcheck disable=SC2046 # one config fragment path per word (no spaces)
	(cd "$obj" && "$SRC/scripts/kconfig/merge_config.sh" -m -O "$obj" .config $(fragments "$flavor") >"$obj/merge_config.log" 2>&1)
	make -s -C "$SRC" O="$obj" ARCH=x86_64 olddefconfig >/dev/null
	assert_config "$obj/.config" "$flavor"
	config_hash "$flavor" >"$obj/.lab-config-hash"
	log "config asserted: every fragment option is set"
}

cmd_build() {
	local flavor=${1:-debug} obj start
	case "$flavor" in debug|perf) ;; *) die "unknown FLAVOR '$flavor' (use debug or perf)" ;; esac
	obj=$BUILD/obj-$flavor
	cmd_tree
	cmd_config "$flavor"
	mkdir -p "$CCACHE_DIR"
	start=$(date +%s)
	touch "$obj/.lab-build-start"
	log "building bzImage FLAVOR=$flavor with $JOBS jobs (ccache: $CCACHE_DIR); log: $obj/build.log"
	# Progress: one line per minute with the number of objects built so far.
	(while sleep 60; do
		log "  ... $(( ($(date +%s) - start) / 60 )) min, $(find "$obj" -name '*.o' -newer "$obj/.lab-build-start" 2>/dev/null | wc -l) objects (re)built"
	done) &
	local ticker=$!
	trap 'kill $ticker 2>/dev/null' EXIT
	if ! make -C "$SRC" O="$obj" ARCH=x86_64 -j"$JOBS" CC="ccache gcc" \
		KBUILD_BUILD_TIMESTAMP="lab" KBUILD_BUILD_USER=lab KBUILD_BUILD_HOST=lab \
		bzImage >"$obj/build.log" 2>&1; then
		kill $ticker 2>/dev/null
		grep -E 'error|Error' "$obj/build.log" | head -n 30 >&2
		die "kernel build failed (FLAVOR=$flavor); full log: $obj/build.log"
	fi
	kill $ticker 2>/dev/null
	trap - EXIT
	# Replace it atomically: a VM booting the old one may be reading it.
	cmp -s "$obj/arch/x86/boot/bzImage" "$BUILD/bzImage-$flavor" || {
		cp "$obj/arch/x86/boot/bzImage" "$BUILD/bzImage-$flavor.new" &&
		mv -f "$BUILD/bzImage-$flavor.new" "$BUILD/bzImage-$flavor"
	}
	# Provenance for reports: kernel release, series hash, config hash.
	{
		echo "flavor=$flavor"
		echo "release=$(cat "$obj/include/config/kernel.release")"
		echo "linux_source=$(source_version)"
		echo "series_hash=$(series_hash)"
		echo "tree_head=$(git_src rev-parse HEAD)"
		echo "config_sha256=$(sha256sum "$obj/.config" | cut -c1-16)"
	} >"$BUILD/bzImage-$flavor.info"
	log "built $BUILD/bzImage-$flavor in $(( $(date +%s) - start ))s"
}

cmd_export() {
	[ -d "$SRC/.git" ] || die "no kernel tree at $SRC; run 'make kernel' first"
	[ -z "$(git_src status --porcelain --untracked-files=no)" ] ||
		die "$SRC has uncommitted changes; commit them in the tree first"
	local n
	n=$(git_src rev-list --count pristine..HEAD)
	rm -f "$PATCHES"/*.patch
	git_src format-patch -q --no-signature --zero-commit -o "$PATCHES" pristine..HEAD
	{ echo "# Applied in order by patches/kernel.sh with git am, on linux-source-6.1."
	  echo "# Generated by 'make export-series' from the tree's history; do not edit by hand."
	  (cd "$PATCHES" && ls -1 -- *.patch 2>/dev/null || true); } >"$PATCHES/series"
	printf '%s %s\n' "$(series_hash)" "$(git_src rev-parse HEAD)" >"$SRC/.git/lab-series-applied"
	log "exported $n patch(es) to patches/"
}

# Build every prefix of the series, one commit at a time, in a separate
# worktree so the working tree and its objects are untouched.
cmd_check_series() {
	local flavor=${1:-perf} wt=$BUILD/check-series obj=$BUILD/obj-check-series c n=0 total
	cmd_tree
	cmd_config "$flavor"
	git_src worktree remove -f "$wt" >/dev/null 2>&1 || rm -rf "$wt"
	git_src worktree prune
	git_src worktree add -q --detach "$wt" pristine
	mkdir -p "$obj"
	cp "$BUILD/obj-$flavor/.config" "$obj/.config"
	total=$(git_src rev-list --count pristine..HEAD)
	for c in $(git_src rev-list --reverse pristine..HEAD); do
		n=$((n + 1))
		git -C "$wt" checkout -q --detach "$c"
		log "check-series [$n/$total] $(git -C "$wt" log -1 --format=%s)"
		make -s -C "$wt" O="$obj" ARCH=x86_64 olddefconfig >/dev/null
		if ! make -C "$wt" O="$obj" ARCH=x86_64 -j"$JOBS" CC="ccache gcc" W=1 bzImage >"$obj/build.log" 2>&1; then
			grep -E 'error|warning' "$obj/build.log" | head -n 20 >&2
			die "prefix $n/$total does not build: $(git -C "$wt" log -1 --format='%h %s'); log: $obj/build.log"
		fi
	done
	git_src worktree remove -f "$wt"
	log "all $total prefixes of the series build (FLAVOR=$flavor)"
}

# Refuse (non-zero) if the tree holds work that is not in patches/.
cmd_tree_is_exported() {
	[ -d "$SRC/.git" ] || return 0
	local rec_hash='' rec_head=''
	[ ! -f "$SRC/.git/lab-series-applied" ] || read -r rec_hash rec_head <"$SRC/.git/lab-series-applied"
	if [ "$(git_src rev-parse HEAD)" != "${rec_head:-}" ] ||
	   [ -n "$(git_src status --porcelain --untracked-files=no)" ]; then
		[ "${FORCE:-0}" = 1 ] && return 0
		die "$SRC has commits or edits not exported to patches/ (make export-series, or FORCE=1 to discard them)"
	fi
}

case "${1:-}" in
tree) cmd_tree ;;
tree-is-exported) cmd_tree_is_exported ;;
assert-config) assert_config "${2:?.config file}" "${3:?flavor}" ;;
build) cmd_build "${2:-debug}" ;;
export) cmd_export ;;
check-series) cmd_check_series "${2:-perf}" ;;
*) echo "usage: $0 tree | tree-is-exported | assert-config FILE FLAVOR | build debug|perf | export | check-series [debug|perf]" >&2; exit 2 ;;
esac
