# shellcheck shell=bash
# Sourced by the host tests (tests/host/*.sh) that install what they need:
# the verdict helpers and the install of missing Debian packages, done as
# the Makefile's targets do it.  The sourcing script has set -u and counts
# its failures in $fails.
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

# host_need PKG...: install the packages that are missing, after an
# apt-get update; on failure print FAIL and exit 1 (the test cannot run).
host_need() {
	local missing p
	missing=$(for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed' || echo "$p"
	done | paste -sd' ' -)
	[ -n "$missing" ] || return 0
	echo "apt: installing $missing"
	# shellcheck disable=SC2086 # one package name per word
	if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends $missing >/dev/null; }; then
		echo "FAIL apt-get could not install: $missing (run as root, with working apt sources)"
		exit 1
	fi
}

# host_repo_files: the clone's files that git tracks or would track (new,
# not ignored), outside build/, that exist; one per line, sorted.  Run from
# the top of the clone.
host_repo_files() {
	local f
	git ls-files --cached --others --exclude-standard 2>/dev/null | sort -u |
		while IFS= read -r f; do
			[ -f "$f" ] || continue
			case $f in build/*) continue ;; esac
			echo "$f"
		done
}
