#!/bin/bash
# Kernel tree, series, config and build for the lab.
#
#   patches/kernel.sh tree              extract linux-source-$BASE, apply its series
#   patches/kernel.sh build FLAVOR      config + build bzImage for FLAVOR (debug|perf)
#   patches/kernel.sh export            regenerate patches/ from the tree's history
#   patches/kernel.sh check-series [FLAVOR]  build every prefix of the series
#
# BASE is the Debian linux-source the series applies to: 6.12 (bookworm's
# security archive), the only one since the move from 6.1 (issue #23; git
# history keeps the 6.1 series). Everything a build makes carries the base
# in its name, so that trees and kernels of another base never mix.
#
# Layout of the ignored build directory (BUILD, default build/):
#   $BUILD/linux-$BASE    git repo; first commit = pristine linux-source (tag "pristine")
#   $BUILD/obj-$BASE-$FLAVOR   out-of-tree objects, one per flavor (incremental)
#   $BUILD/bzImage-$BASE-$FLAVOR, .info   the kernel and its provenance
#   .git/lab-series-applied   hash of the series the tree was made from,
#                         and the commit it produced; used to notice local work.
#
# A series file lists patch files, or (patches/series) directories that
# each hold a series of their own, applied in the listed order: the feature
# series, prerequisites, generic fixes, the lab's test-only knobs. In the
# tree, each such series ends with an empty commit "lab: end of series DIR",
# which export uses to split the history back into the directories; the end
# commit of a series whose directory has a cover letter
# (0000-cover-letter.patch) carries the letter's text.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(realpath -m "${BUILD:-$top/build}")
BASE=${BASE:-6.12}
case $BASE in
6.12) ;;
6.1) echo "kernel.sh: error: BASE=6.1 is retired: the series moved to linux-source-6.12 (issue #23); git history has the 6.1 series (git log -- patches/0001-fscrypt-add-tracepoints.patch)" >&2; exit 2 ;;
*) echo "kernel.sh: error: unknown BASE '$BASE' (the series applies to 6.12)" >&2; exit 2 ;;
esac
TAG="-$BASE"
SRC=$BUILD/linux$TAG
TARBALL=${LINUX_SOURCE_TARBALL:-/usr/src/linux-source-$BASE.tar.xz}
PATCHES=$(realpath -m "${PATCHES:-$top/patches}")	# series (of series)
CONFIGS=$(realpath -m "${CONFIGS:-$top/patches/config}")	# fragments, every BASE
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/fscrypt-lab/ccache}
# Paths under the build directory are hashed relative to it, and the
# compile directory is left out of the hash, so that a fresh clone (another
# path) hits what an earlier clone compiled. Only debug info's DW_AT_comp_dir
# may then name the earlier clone.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$BUILD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
JOBS=${JOBS:-$(nproc)}

die() { echo "kernel.sh: error: $*" >&2; exit 1; }
log() { echo "[kernel $(date +%H:%M:%S)] $*"; }

# The entries of DIR/series (default $PATCHES): patch files or directories.
series_entries() {
	grep -v '^[[:space:]]*\(#\|$\)' "${1:-$PATCHES}/series" 2>/dev/null || true
}

# Whether $PATCHES/series lists series directories rather than patches.
nested() {
	local first
	first=$(series_entries | head -n 1)
	[ -n "$first" ] && [ -d "$PATCHES/$first" ]
}

# Every patch file to apply, relative to $PATCHES, in order.
series_files() {
	local d
	if nested; then
		for d in $(series_entries); do
			series_entries "$PATCHES/$d" | sed "s|^|$d/|"
		done
	else
		series_entries
	fi
}

# Hash of everything that determines the patched tree.
series_hash() {
	local d
	# shellcheck disable=SC2046 # one patch file name per word (no spaces)
	(cd "$PATCHES" && cat series $(nested && for d in $(series_entries); do
		echo "$d/series"; [ ! -f "$d/0000-cover-letter.patch" ] || echo "$d/0000-cover-letter.patch"
	done) $(series_files)) 2>/dev/null | sha256sum | cut -c1-16
}

source_version() {
	dpkg-query -W -f='${Version}' "linux-source-$BASE" 2>/dev/null || echo unknown
}

git_src() { git -C "$SRC" -c user.name=lab -c user.email=lab@localhost "$@"; }

extract_pristine() {
	[ -f "$TARBALL" ] || die "$TARBALL not found; install it with: apt-get install linux-source-$BASE"
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
		commit -q -m "linux-source-$BASE $(source_version) (pristine)"
	git -C "$SRC.tmp" tag pristine
	mv "$SRC.tmp" "$SRC"
}

# The end commit of series DIR: empty, subject "lab: end of series DIR",
# with the text of DIR's cover letter (subject and blurb) when it has one.
end_marker() { # dir
	local d=$1 letter=$PATCHES/$1/0000-cover-letter.patch
	{
		echo "lab: end of series $d"
		if [ -f "$letter" ]; then
			echo
			# the letter's subject (without "[PATCH 0/N] "), then its body
			# up to the shortlog (the first "Name (N):" line)
			sed -n '/^Subject: /{s/^Subject: \(\[[^]]*\] \)\{0,1\}/Cover-Subject: /;p;q}' "$letter"
			echo
			awk 'body && /^[^ ].* \([0-9]+\):$/ { exit } body { print } /^$/ && !body { body = 1 }' "$letter"
		fi
	} | if [ -f "$letter" ]; then
		# the letter's date, so that export gives the same letter back
		GIT_AUTHOR_DATE=$(sed -n 's/^Date: //p;/^$/q' "$letter") git_src commit -q --allow-empty -F -
	else
		git_src commit -q --allow-empty -F -
	fi
}

apply_patch() { # n total patch
	local n=$1 total=$2 p=$3
	[ -f "$PATCHES/$p" ] || die "$PATCHES/series names $p, but $PATCHES/$p does not exist"
	log "applying [$n/$total] $p"
	git_src am -q --keep-cr "$PATCHES/$p" >"$BUILD/git-am$TAG.log" 2>&1 && return 0
	git_src am --abort >/dev/null 2>&1 || true
	cat "$BUILD/git-am$TAG.log" >&2
	cat >&2 <<EOT

kernel.sh: error: patch $n/$total does not apply: $PATCHES/$p
  linux-source-$BASE found: $(source_version) ($TARBALL)
  What to do: the series was made for a different linux-source. Rebase it:
    cd $SRC && git checkout -B lab pristine
    git am -3 <each patch of the series>   # resolve each conflict, git am --continue
    cd $top && make export-series   # rewrites the series from the tree
  (patches/README.md, "Moving the series to another linux-source", has the details.)
EOT
	exit 1
}

apply_series() {
	git_src checkout -q -f -B lab pristine
	git_src clean -q -fdx
	local p d n=0 total
	total=$(series_files | wc -l)
	if nested; then
		for d in $(series_entries); do
			for p in $(series_entries "$PATCHES/$d"); do
				n=$((n + 1))
				apply_patch "$n" "$total" "$d/$p"
			done
			end_marker "$d"
		done
	else
		for p in $(series_files); do
			n=$((n + 1))
			apply_patch "$n" "$total" "$p"
		done
	fi
	printf '%s %s\n' "$(series_hash)" "$(git_src rev-parse HEAD)" >"$SRC/.git/lab-series-applied"
	log "tree at $(git_src rev-parse --short HEAD): $total patch(es) on linux-source-$BASE $(source_version)"
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
	echo "$CONFIGS/base.config"
	echo "$CONFIGS/$1.config"
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
		echo "  Usually a missing dependency: find it with 'make menuconfig O=$BUILD/obj$TAG-$flavor' (search with /)." >&2
		exit 1
	fi
}

config_hash() {
	# shellcheck disable=SC2046 # one config fragment path per word (no spaces)
	(cat $(fragments "$1"); echo "$1") | sha256sum | cut -c1-16
}

cmd_config() {
	local flavor=$1 obj=$BUILD/obj$TAG-$1
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
	obj=$BUILD/obj$TAG-$flavor
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
	cmp -s "$obj/arch/x86/boot/bzImage" "$BUILD/bzImage$TAG-$flavor" || {
		cp "$obj/arch/x86/boot/bzImage" "$BUILD/bzImage$TAG-$flavor.new" &&
		mv -f "$BUILD/bzImage$TAG-$flavor.new" "$BUILD/bzImage$TAG-$flavor"
	}
	# Provenance for reports: kernel release, series hash, config hash.
	{
		echo "flavor=$flavor"
		echo "release=$(cat "$obj/include/config/kernel.release")"
		echo "linux_source=$(source_version)"
		echo "series_hash=$(series_hash)"
		echo "tree_head=$(git_src rev-parse HEAD)"
		echo "config_sha256=$(sha256sum "$obj/.config" | cut -c1-16)"
	} >"$BUILD/bzImage$TAG-$flavor.info"
	log "built $BUILD/bzImage$TAG-$flavor in $(( $(date +%s) - start ))s"
}

# The identity exported patches carry (From:, Signed-off-by:) where the tree
# has its placeholder TREE_IDENTITY: the lab repository's git user.name and
# user.email, i.e. the developer's (README.md names the repository's own as
# a placeholder).
TREE_IDENTITY="fscrypt-lab <fscrypt-lab@localhost>"
export_identity() {
	local name email
	name=$(git -C "$top" config user.name || true)
	email=$(git -C "$top" config user.email || true)
	if [ -z "$name" ] || [ -z "$email" ]; then
		die "no git user.name/user.email for $top: set yours (git config user.name ...), exported patches carry it"
	fi
	echo "$name <$email>"
}

# Patches of FROM..TO into $PATCHES/DIR, with DIR/series; a cover letter
# from the end commit MARKER when it carries one (Cover-Subject:).
export_range() { # from to dir marker identity
	local from=$1 to=$2 dir=$3 marker=$4 who=$5 out=$PATCHES/$3 cover=() subj f
	mkdir -p "$out"
	rm -f "$out"/*.patch
	subj=$(git_src log -1 --format=%B "$marker" | sed -n 's/^Cover-Subject: //p' | head -n 1)
	[ -z "$subj" ] || cover=(--cover-letter)
	if [ "$(git_src rev-list --count "$from..$to")" -gt 0 ]; then
		git_src format-patch -q --no-signature --zero-commit "${cover[@]}" -o "$out" "$from..$to"
	fi
	if [ -n "$subj" ]; then
		# the blurb: the end commit's message after its Cover-Subject line
		git_src log -1 --format=%B "$marker" |
			awk 'go && /^$/ { blank++; next } go { while (blank) { print ""; blank-- } print }
			     /^Cover-Subject: / { go = 1; getline }' >"$BUILD/cover-blurb$TAG"
		awk -v subj="$subj" -v who="$who" -v blurb="$BUILD/cover-blurb$TAG" -v date="$(git_src log -1 --format=%aD "$marker")" '
			/^From: / && !done_from { print "From: " who; done_from = 1; next }
			/^Date: / && !done_date { print "Date: " date; done_date = 1; next }
			/\*\*\* SUBJECT HERE \*\*\*/ { sub(/\*\*\* SUBJECT HERE \*\*\*/, subj) }
			/^\*\*\* BLURB HERE \*\*\*$/ { while ((getline l < blurb) > 0) print l; next }
			{ print }' "$out/0000-cover-letter.patch" >"$out/0000-cover-letter.patch.new"
		mv "$out/0000-cover-letter.patch.new" "$out/0000-cover-letter.patch"
	fi
	# the lab's identity in the tree (TREE_IDENTITY) is a placeholder: the
	# developer who exports is the author and signs off; other authors and
	# sign-offs are kept
	sed -i -e "0,/^From: /s|^From: $TREE_IDENTITY\$|From: $who|" \
		-e "s|^Signed-off-by: $TREE_IDENTITY\$|Signed-off-by: $who|" \
		"$out"/*.patch 2>/dev/null || true
	{ echo "# The series '$dir', applied in order by patches/kernel.sh with git am (patches/README.md)."
	  echo "# Generated by 'make export-series' from the tree's history; do not edit by hand."
	  for f in "$out"/[0-9]*.patch; do
		case $f in */0000-cover-letter.patch | *"/[0-9]*.patch") ;; *) basename "$f" ;; esac
	  done; } >"$out/series"
}

cmd_export_nested() {
	local c subj start=pristine dirs=() n who
	who=$(export_identity)
	for c in $(git_src rev-list --reverse pristine..HEAD); do
		subj=$(git_src log -1 --format=%s "$c")
		case $subj in
		"lab: end of series "*)
			dirs+=("${subj#lab: end of series }")
			export_range "$start" "$c^" "${dirs[-1]}" "$c" "$who"
			start=$c ;;
		esac
	done
	n=$(git_src rev-list --count "$start..HEAD")
	[ "$n" = 0 ] || die "$n commit(s) after the last 'lab: end of series' commit: move them into a series (git rebase -i pristine)"
	{ echo "# The series applied on linux-source-$BASE, in order: each line a directory with its own series file."
	  echo "# Generated by 'make export-series'; the end of each series is an empty commit in the tree."
	  printf '%s\n' "${dirs[@]}"; } >"$PATCHES/series"
	printf '%s %s\n' "$(series_hash)" "$(git_src rev-parse HEAD)" >"$SRC/.git/lab-series-applied"
	log "exported $(series_files | wc -l) patch(es) in ${#dirs[@]} series to $PATCHES"
}

cmd_export() {
	[ -d "$SRC/.git" ] || die "no kernel tree at $SRC; run 'make kernel' first"
	[ -z "$(git_src status --porcelain --untracked-files=no)" ] ||
		die "$SRC has uncommitted changes; commit them in the tree first"
	cmd_export_nested
}

# Build every prefix of the series, one commit at a time, in a separate
# worktree so the working tree and its objects are untouched.
cmd_check_series() {
	local flavor=${1:-perf} wt=$BUILD/check-series$TAG obj=$BUILD/obj$TAG-check-series c n=0 total
	cmd_tree
	cmd_config "$flavor"
	git_src worktree remove -f "$wt" >/dev/null 2>&1 || rm -rf "$wt"
	git_src worktree prune
	git_src worktree add -q --detach "$wt" pristine
	mkdir -p "$obj"
	cp "$BUILD/obj$TAG-$flavor/.config" "$obj/.config"
	total=$(git_src rev-list --count pristine..HEAD)
	# FROM=N: start at prefix N, for prefixes 1..N-1 that an earlier
	# check-series built and that have not changed since (say so where
	# you report it).
	case ${FROM:-1} in ''|*[!0-9]*) die "FROM must be a prefix number (1-$total)" ;; esac
	if [ "${FROM:-1}" -lt 1 ] || [ "${FROM:-1}" -gt "$total" ]; then
		die "FROM=${FROM} is not a prefix number (1-$total)"
	fi
	for c in $(git_src rev-list --reverse pristine..HEAD); do
		n=$((n + 1))
		if [ "$n" -lt "${FROM:-1}" ]; then
			log "check-series [$n/$total] skipped (FROM=$FROM): $(git_src log -1 --format=%s "$c")"
			continue
		fi
		git -C "$wt" checkout -q --detach "$c"
		log "check-series [$n/$total] $(git -C "$wt" log -1 --format=%s)"
		make -s -C "$wt" O="$obj" ARCH=x86_64 olddefconfig >/dev/null
		if ! make -C "$wt" O="$obj" ARCH=x86_64 -j"$JOBS" CC="ccache gcc" W=1 bzImage >"$obj/build.log" 2>&1; then
			grep -E 'error|warning' "$obj/build.log" | head -n 20 >&2
			die "prefix $n/$total does not build: $(git -C "$wt" log -1 --format='%h %s'); log: $obj/build.log"
		fi
	done
	git_src worktree remove -f "$wt"
	if [ "${FROM:-1}" -gt 1 ]; then
		log "prefixes $FROM to $total of the series build (FLAVOR=$flavor; 1 to $((FROM - 1)) not built: FROM=$FROM)"
	else
		log "all $total prefixes of the series build (FLAVOR=$flavor)"
	fi
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
