#!/bin/bash
# Runs shellcheck over every shell script of the clone, at 0 warnings (severity
# warning and error; -x follows sourced files where their path is known).
# Scripts are the tracked and new, not ignored, files named *.sh or with a
# sh/bash shebang. A finding may only be silenced in the script itself, one
# "# shellcheck disable=SCnnnn # reason" directive per case.
#
# A control first: a script with a known warning must fail, or the check is
# blind. Needs Debian's shellcheck (installed here when missing, as the
# Makefile's targets install their packages).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
# shellcheck source=tests/lib/host-test.sh
. "$top/tests/lib/host-test.sh"

command -v shellcheck >/dev/null || host_need shellcheck
echo "== $(shellcheck --version | sed -n 's/^version: /shellcheck /p')"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2016 # the control script's text, not expanded here
printf '#!/bin/bash\ncd /nonexistent\necho $1\n' >"$tmp/control.sh"
if shellcheck -S warning "$tmp/control.sh" >"$tmp/control.out" 2>&1; then
	bad "control: a script with 'cd' unchecked passes shellcheck"
else
	grep -q SC2164 "$tmp/control.out" && ok "control: unchecked cd is a warning (SC2164)" ||
		bad "control: no SC2164 in: $(cat "$tmp/control.out")"
fi

scripts=()
while IFS= read -r f; do
	case $f in
	*.sh | *.bash) scripts+=("$f") ;;
	*) head -n1 "$f" 2>/dev/null | grep -qE '^#!(/usr)?/bin/(env )?(ba)?sh\b' && scripts+=("$f") ;;
	esac
done < <(host_repo_files)
if [ "${#scripts[@]}" -lt 10 ]; then
	bad "found only ${#scripts[@]} scripts (is this a git checkout?)"
fi
echo "== ${#scripts[@]} scripts"
for f in "${scripts[@]}"; do
	if out=$(shellcheck -x -S warning -f gcc "$f" 2>&1); then
		ok "$f"
	else
		bad "$f: $(echo "$out" | wc -l) finding(s)"
		echo "$out" | sed 's/^/     | /'
	fi
done

if [ "$fails" = 0 ]; then
	echo "shellcheck: all passed"
else
	echo "shellcheck: $fails failed"
	exit 1
fi
