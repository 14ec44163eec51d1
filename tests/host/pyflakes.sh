#!/bin/bash
# Runs pyflakes over every Python file of the clone (reports/*.py and any
# other): unused imports and variables, undefined names, redefinitions.
# Files are the tracked and new, not ignored, files named *.py or with a
# python shebang, as shellcheck.sh picks scripts. Any finding fails, and is
# listed per file as pyflakes prints it (file:line:col: message).
#
# A control first: a file with an unused import and an undefined name must
# be reported, or the check is blind. Needs Debian's pyflakes3 (installed
# here when missing, as the Makefile's targets install their packages).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
# shellcheck source=tests/lib/host-test.sh
. "$top/tests/lib/host-test.sh"

command -v pyflakes3 >/dev/null || host_need pyflakes3
echo "== pyflakes $(pyflakes3 --version 2>&1 | awk '{ print $1; exit }')"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'import os\n\n\ndef f():\n    return undefined_name\n' >"$tmp/control.py"
if pyflakes3 "$tmp/control.py" >"$tmp/control.out" 2>&1; then
	bad "control: a file with an unused import passes pyflakes"
elif grep -q "'os' imported but unused" "$tmp/control.out" && grep -q "undefined name 'undefined_name'" "$tmp/control.out"; then
	ok "control: unused import and undefined name are reported"
else
	bad "control: not both findings in: $(cat "$tmp/control.out")"
fi

files=()
while IFS= read -r f; do
	case $f in
	*.py) files+=("$f") ;;
	*) head -n1 "$f" 2>/dev/null | grep -qE '^#!.*python' && files+=("$f") ;;
	esac
done < <(host_repo_files)
if [ "${#files[@]}" -lt 5 ]; then
	bad "found only ${#files[@]} Python files (is this a git checkout?)"
fi
echo "== ${#files[@]} Python files"
# Clean files first, then each file's findings, then one line summing them
# up (the reason tests/run-tests.sh shows), so that the end of this log,
# which the runner prints, has them. A syntax error is a finding too
# (pyflakes exits non-zero and shows the line).
flagged=()
for f in "${files[@]}"; do
	if pyflakes3 "$f" >"$tmp/out" 2>&1; then
		ok "$f"
	else
		flagged+=("$f ($(grep -c "^$f:" "$tmp/out"))")
		cat "$tmp/out" >>"$tmp/findings"
	fi
done
if [ "${#flagged[@]}" != 0 ]; then
	sed 's/^/     | /' "$tmp/findings"
	bad "pyflakes findings in ${#flagged[@]} file(s): $(printf '%s\n' "${flagged[@]}" | paste -sd, - | sed 's/,/, /g')"
fi

if [ "$fails" = 0 ]; then
	echo "pyflakes: all passed"
else
	echo "pyflakes: $fails failed"
	exit 1
fi
