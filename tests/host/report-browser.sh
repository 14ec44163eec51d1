#!/bin/bash
# The report as a reader sees it: index.html of synthetic runs (made-up fio
# output, profiles and flame graphs: reports/lab/synthrun.py) loaded in headless
# Chromium (Debian's chromium) by reports/lab/browsercheck.py, at 1280x800:
# every image and link resolves, no console errors, the main verdict is in
# the first screen. Also the one-rep report (its verdict "not conclusive")
# and the reports/ index page.
#
# Controls, each of which must fail its own check: a report with a missing
# plot, with a link to a missing file, with a console error, and with the
# verdicts pushed below the first screen.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
py=/usr/bin/python3
# shellcheck source=tests/lib/host-test.sh
. "$top/tests/lib/host-test.sh"

host_need chromium python3-numpy python3-scipy python3-matplotlib

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$py -m reports.lab.synthrun "$tmp/run" --extras || { bad "synthetic run"; exit 1; }
$py -m reports.lab.synthrun "$tmp/one" --reps 1 || { bad "synthetic one-rep run"; exit 1; }
mkdir -p "$tmp/reports"
for r in run one; do
	$py -m reports.lab.generate "$tmp/$r" "$tmp/reports/$r" >"$tmp/gen-$r.out" 2>&1 ||
		{ bad "generate $r: $(tail -n 3 "$tmp/gen-$r.out")"; exit 1; }
done
$py -m reports.lab.index "$tmp/reports" >/dev/null || bad "reports.lab.index"

browse() { # name page want-rc [regex of a line that must be there] [option]
	local name=$1 page=$2 want=$3 re=${4:-} rc
	$py -m reports.lab.browsercheck "$page" ${5:+"$5"} >"$tmp/$name.out" 2>&1
	rc=$?
	sed 's/^/     | /' "$tmp/$name.out"
	if [ "$rc" != "$want" ]; then
		bad "$name: exit $rc, want $want"
	elif [ -n "$re" ] && ! grep -Eq -- "$re" "$tmp/$name.out"; then
		bad "$name: no line /$re/"
	else
		ok "$name: exit $rc${re:+, /$re/}"
	fi
}

echo "== the reports"
browse report "$tmp/reports/run/index.html" 0 '^ok   main verdict in the first screen'
if grep -Eq '^ok   images: 13 of 13 loaded' "$tmp/report.out" &&
	grep -Eq '^ok   links: [1-9][0-9]* of [0-9]+ resolve' "$tmp/report.out"; then
	ok "report: its 13 images and its links were checked"
else
	bad "report: not every image and link was checked"
fi
browse report-one-rep "$tmp/reports/one/index.html" 0 '^ok   main verdict in the first screen .*not conclusive \(n = 1\)'
browse index "$tmp/reports/index.html" 0 '^ok   links: 4 of 4 resolve' --no-verdict

echo "== controls (each must fail its check)"
control() { # name sed-script
	rm -rf "$tmp/c"
	cp -r "$tmp/reports/run" "$tmp/c"
	sed -i "$2" "$tmp/c/index.html"
}
control missing-image 's|<img src="throughput.png"|<img src="no-such-plot.png"|'
browse control-missing-image "$tmp/c/index.html" 1 '^FAIL images: .*no-such-plot\.png'
control missing-link 's|<a href="flame-diff-btrfs-extent-vs-btrfs-inode.svg">|<a href="no-such-flame.svg">|'
browse control-missing-link "$tmp/c/index.html" 1 '^FAIL links: .*no-such-flame\.svg'
control console-error 's|</body>|<script>console.error("lab control error")</script></body>|'
browse control-console-error "$tmp/c/index.html" 1 '^FAIL console: .*lab control error'
control verdict-below 's|<h2 id="verdicts">|<div style="height:900px"></div>&|'
browse control-verdict-below "$tmp/c/index.html" 1 '^FAIL main verdict NOT in the first screen'

if [ "$fails" = 0 ]; then
	echo "report-browser: all passed"
else
	echo "report-browser: $fails failed"
	exit 1
fi
