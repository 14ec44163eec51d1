#!/bin/bash
# Key removal under load (issue #14, part 3), the long run.
#
# One boot of the debug kernel runs tests/btrfs_fscrypt_key_removal_writeback.c
# alone (the test `make test` runs with 30 s and 20 s of load), through the
# usual harness (vm-images/run-vm.sh, tests/guest-run.sh in the job), with
# KEYLOAD_SECONDS of load per key mode (per-extent, then per-inode keys):
# writers with fsync, a creator and reader, a cache dropper, while key A is
# removed and re-added in a loop, and (per-extent keys) key B now and then,
# while files of key A that hold its extents pin it.
#
#   tests/run-keyload.sh
#   KEYLOAD_SECONDS=60 tests/run-keyload.sh
#
# Writes <out>/ (KEYLOAD_OUT, default build/reliability/keyload-<date>-<time>):
#
#   figures.tsv   the test's figures, summed over the key modes, one
#                 "key<TAB>value" line each: cycles, removals_busy,
#                 removals_complete, enokey_seen, fsynced_bytes_checked,
#                 bytes_lost, duration_s, b_removals, b_removals_pinned,
#                 pinned_reads, pinned_reads_enokey (key B removed while
#                 files of key A holding its extents are open); then splats
#                 (kernel splats on the console, vm-images/console-check.sh)
#   summary.md    the table, each key mode's figures, the sub-cases the test
#                 skipped and why, the splats, the verdict; also printed
#   test.log      the test's output
#   vm/           the boot's run directory (console.log, results/, verdict)
#   job/          the job the guest ran
#
# Environment:
#   KEYLOAD_SECONDS   seconds of load per key mode (default 300)
#   KEYLOAD_PROGRESS  a progress line every N seconds of load (default 60)
#   KEYLOAD_OUT       the report directory (default as above)
#   KERNEL, ROOT      default build/bzImage-6.12-debug, build/root.img
#   KEYLOAD_BIN       default build/tests/bin/btrfs_fscrypt_key_removal_writeback
#   TIMEOUT           the boot's limit (default 2 x KEYLOAD_SECONDS + 2400 s)
#
# Exit status: 0 when the test passed, no fsynced byte was lost and the
# console is clean; 1 otherwise; 2 on a usage or setup error.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
name=btrfs_fscrypt_key_removal_writeback
die() { echo "run-keyload.sh: $*" >&2; exit 2; }

secs=${KEYLOAD_SECONDS:-300}
progress=${KEYLOAD_PROGRESS:-60}
kernel=${KERNEL:-$build/bzImage-6.12-debug}
root=${ROOT:-$build/root.img}
bin=${KEYLOAD_BIN:-$build/tests/bin/$name}
out=${KEYLOAD_OUT:-$build/reliability/keyload-$(date +%Y-%m-%d-%H%M%S)}

case $secs in '' | *[!0-9]*) die "KEYLOAD_SECONDS=$secs: give a whole number of seconds (e.g. 300)" ;; esac
[ "$secs" -ge 1 ] || die "KEYLOAD_SECONDS must be at least 1"
case $progress in '' | *[!0-9]*) die "KEYLOAD_PROGRESS=$progress: give a whole number of seconds (0: no progress lines)" ;; esac
timeout=${TIMEOUT:-$((2 * secs + 2400))}
case $timeout in '' | *[!0-9]*) die "TIMEOUT=$timeout: give a whole number of seconds" ;; esac
[ -x "$bin" ] || die "$bin is not built: run 'make tests-bin' (or 'make -C tests')"
[ -f "$kernel" ] || die "no kernel $kernel: run 'make kernel FLAVOR=debug'"
[ -f "$root" ] || die "no root image $root: run 'make image'"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is not installed (make test installs it)"

mkdir -p "$out/job/tests/bin" || die "cannot create $out"
out=$(cd "$out" && pwd)
rm -rf "$out/vm" "$out/figures.tsv" "$out/summary.md" "$out/test.log"
cp "$bin" "$out/job/tests/bin/" || die "cannot copy $bin into the job"
install -m 0755 "$top/tests/guest-run.sh" "$out/job/guest-run.sh" || die "cannot install the guest harness"
{
	echo '#!/bin/bash'
	echo '# written by tests/run-keyload.sh'
	echo "export KEYLOAD_SECONDS=$secs KEYLOAD_PROGRESS=$progress"
	# the test's own limit, inside the boot's
	echo "export TEST_TIMEOUT=$((timeout - 600))"
	echo 'exec /job/guest-run.sh'
} >"$out/job/run"
chmod 0755 "$out/job/run"

echo "== key removal under load: $secs s per key mode, debug kernel, one boot"
echo "   report: $out"
start=$(date +%s)
"$top/vm-images/run-vm.sh" --kernel "$kernel" --root "$root" --job "$out/job" \
	--out "$out/vm" --scratch 1G --scratch 1G --timeout "$timeout" --lab-args "$name"
vm_rc=$?
wall=$(($(date +%s) - start))
[ "$vm_rc" = 5 ] && die "the VM runner could not start the boot: $(cat "$out/vm/verdict" 2>/dev/null)"
echo "== boot ended after ${wall}s: $(cat "$out/vm/verdict" 2>/dev/null)"

# ---- the results -------------------------------------------------------------

ok=1
problems=()
vm=$out/vm
cp "$vm/results/tests/$name.log" "$out/test.log" 2>/dev/null
status=$(awk -F'\t' -v n="$name" '$1 == n { print $2 }' "$vm/results/tests.tsv" 2>/dev/null)
if [ "$status" != PASS ]; then
	ok=0
	problems+=("the test's result: ${status:-none (it did not finish)}")
fi
if [ -f "$vm/results/keyload-figures.tsv" ]; then
	cp "$vm/results/keyload-figures.tsv" "$out/figures.tsv"
else
	: >"$out/figures.tsv"
	ok=0
	problems+=("no figures came back from the guest")
fi
get() { awk -F'\t' -v k="$1" '$1 == k { print $2 }' "$out/figures.tsv"; }
for k in cycles removals_busy removals_complete enokey_seen fsynced_bytes_checked bytes_lost duration_s b_removals b_removals_pinned pinned_reads pinned_reads_enokey; do
	v=$(get "$k")
	if [ -z "$v" ]; then
		[ -s "$out/figures.tsv" ] && problems+=("figure $k missing")
		[ -s "$out/figures.tsv" ] && ok=0
	fi
done
lost=$(get bytes_lost)
if [ -n "$lost" ] && [ "$lost" != 0 ]; then
	ok=0
	problems+=("$lost fsynced bytes lost")
fi
cycles=$(get cycles)
if [ -n "$cycles" ] && [ "$cycles" = 0 ]; then
	ok=0
	problems+=("no removal and re-add cycle")
fi

splat_lines=$("$top/vm-images/console-check.sh" "$vm/console.log" 2>/dev/null)
nsplats=0
[ -n "$splat_lines" ] && nsplats=$(printf '%s\n' "$splat_lines" | wc -l)
printf 'splats\t%s\n' "$nsplats" >>"$out/figures.tsv"
if [ "$nsplats" != 0 ]; then
	ok=0
	problems+=("$nsplats kernel splat(s) on the console")
fi
[ "$vm_rc" = 0 ] || problems+=("VM runner: $(cat "$vm/verdict" 2>/dev/null)")
[ "$vm_rc" = 0 ] || ok=0

# ---- the report ----------------------------------------------------------------

fig() { local v; v=$(get "$1"); echo "${v:-?}"; }
{
	echo "# Reliability: key removal under load"
	echo
	echo "$(sed -n 's/^date=//p' "$vm/run.info"), kernel $(basename "$kernel") (series $(sed -n 's/^series_hash=//p' "$kernel.info" 2>/dev/null)), $(sed -n 's/^accel=//p' "$vm/run.info") with $(sed -n 's/^cpus=//p' "$vm/run.info") vCPUs; $secs s of load per key mode; boot $(sed -n 's/^elapsed_s=//p' "$vm/run.info") s, wall $wall s."
	echo
	echo "Test \`$name\`: writers with fsync, a creator and reader, a cache dropper; key A removed and re-added in a loop while the writers keep files open, key B stays; then the generic/580 sequence (a removal with a file open, a second one once it is closed), every fsynced byte read back, a remount. Per-extent keys (\`fscrypt_extents_per_key=2\`), then per-inode keys."
	echo
	echo "| removal/re-add cycles | removals FILES_BUSY | removals complete | refused for want of the key (ENOKEY/ENOENT) | fsynced bytes checked | bytes lost | splats | load |"
	echo "|---|---|---|---|---|---|---|---|"
	echo "| $(fig cycles) | $(fig removals_busy) | $(fig removals_complete) | $(fig enokey_seen) | $(fig fsynced_bytes_checked) | $(fig bytes_lost) | $nsplats | $(fig duration_s) s |"
	echo
	echo "Key B removed while files of key A that hold its extents are open (per-extent keys; issue #36): the removals must say FILES_BUSY (pinned) at least once; the pinned block, read while key B is away, gives its data or ENOKEY, never wrong data."
	echo
	echo "| removals of key B | FILES_BUSY (pinned) | pinned block read | pinned block ENOKEY |"
	echo "|---|---|---|---|"
	echo "| $(fig b_removals) | $(fig b_removals_pinned) | $(fig pinned_reads) | $(fig pinned_reads_enokey) |"
	echo
	echo "Per key mode (from the test's output):"
	echo
	if [ -s "$out/test.log" ]; then
		awk '/^== / { sub(/^== /, ""); print "- " $0; next }
			/^# (writers|creator|remover|dropper|removal sequence|key B pinned by files of key A|figures [a-z-]+):/ { sub(/^# /, ""); print "  - " $0 }' \
			"$out/test.log"
	else
		echo "- (no test output came back)"
	fi
	echo
	echo "Sub-cases skipped:"
	echo
	if grep -q '^SKIP sub-case' "$out/test.log" 2>/dev/null; then
		sed -n 's/^SKIP sub-case /- /p' "$out/test.log"
	else
		echo "- none"
	fi
	echo
	echo "## Splats"
	echo
	if [ -n "$splat_lines" ]; then
		printf '%s\n' "$splat_lines" | head -n 40 | sed 's/^/- /'
	else
		echo "None."
	fi
	echo
	echo "## Verdict"
	echo
	if [ "$ok" = 1 ]; then
		echo "PASS: the test passed, 0 fsynced bytes lost, console clean."
	else
		echo "FAIL:"
		echo
		printf -- '- %s\n' "${problems[@]}"
		if grep -q '^FAIL' "$out/test.log" 2>/dev/null; then
			echo
			echo "Failed checks (the first 20; all in test.log):"
			echo
			grep '^FAIL' "$out/test.log" | head -n 20 | sed 's/^/    /'
		fi
	fi
} >"$out/summary.md"
cat "$out/summary.md"
[ "$ok" = 1 ]
