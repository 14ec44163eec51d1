#!/bin/bash
# The fuzzed-image part of `make reliability` (issue #14; tests/run-reliability.sh
# runs it with the other parts, or run it alone).
#
# A boot of the debug kernel runs tests/btrfs_fscrypt_fuzz.c (the same
# program `make test` runs as a 32-image slice) with the full count, through
# the usual harness (vm-images/run-vm.sh, tests/guest-run.sh in the job; the
# job's run script sets the fuzzer's FUZZ_* variables). The fuzzer stops at
# the first splat or hang, and an oops kills the guest; then a new boot goes
# on after that image, from the same pristine image, until the count is done
# (at most FUZZ_BOOTS boots).
# Writes FUZZ_RUN_OUT, default build/reliability/fuzz-<date>-<time>/ (and the
# link build/reliability/fuzz-latest):
#
#   figures.tsv      the figures the reliability summary table takes
#                    (images, mounted, clean_results, clean_errors,
#                    control_failures, bugs, splats, duration_s; then
#                    trace_probes and trace_probes_reached, and the
#                    mutations in issue #36's subvolumes rkf, rkp, pik, up)
#   summary.md       the table (images tried / mounted / clean errors / bugs /
#                    splats, duration), the boots, errnos, bugs (each splat
#                    with whether the series changes the file it points at);
#                    also printed
#   fuzz/            the run's totals: summary.tsv, errnos.tsv, images.tsv
#                    (one line per image), bugs.tsv; seed.tsv (what each
#                    subvolume of the pristine image holds) and trace.tsv
#                    (the trace probe of the seed's features), the first
#                    boot's; fuzz-<n>/ each boot's
#   bug-<k>/         per bug: mutations, mutated leaves, kernel log, seed
#                    and index (from the console if the guest died in image k)
#   pristine.img     the pristine image the first boot made (a sparse raw
#                    image; the second scratch disk of every boot): with the
#                    seed, every image of the run can be replayed from it
#   vm-<n>/          each boot's run directory (console.log, results/, verdict)
#   run.conf, boots.tsv  the run's parameters, each boot's first image
#
# Environment:
#   FUZZ_IMAGES      images to mutate (default 1000)
#   FUZZ_SEED        seed (default the fuzzer's, 0x14f0001)
#   FUZZ_FIRST       first image index (default 0)
#   FUZZ_REPLAY=DIR  replay one bug: DIR is a bug-<k> directory of an
#                    earlier run (its seed, index and that run's pristine.img)
#   FUZZ_MUT_MASK    which of each image's mutations to apply (a bit each;
#                    default all): narrows a replay down to the culprit
#   FUZZ_RW_EVERY    one image in N is mounted read-write (default 4; 0:
#                    all read-only, as in the make-test slice)
#   FUZZ_BOOTS       at most this many boots (default 20; 1: stop the run
#                    at the first splat)
#   FUZZ_REPORT=DIR  no boot: rebuild DIR's report from its boots
#   KERNEL, ROOT     default build/bzImage-6.12-debug, build/root.img
#   FUZZ_BIN         default build/tests/bin/btrfs_fscrypt_fuzz
#   TIMEOUT          per boot, default 1200 s + 20 s per image left
#   FUZZ_RUN_OUT     the report directory (default as above)
#
# Exit status: 0 when every image gave a clean result or a clean error and
# every console is clean; 1 otherwise; 2 on a usage or setup error.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
die() { echo "run-fuzz.sh: $*" >&2; exit 2; }

if [ -n "${FUZZ_REPORT:-}" ]; then
	out=$(cd "$FUZZ_REPORT" 2>/dev/null && pwd) || die "no run directory $FUZZ_REPORT"
	if [ ! -f "$out/run.conf" ] || [ ! -f "$out/boots.tsv" ]; then
		die "$out has no run.conf and boots.tsv"
	fi
	# shellcheck source=/dev/null # written by this script
	. "$out/run.conf"
	report_only=1
else
	report_only=0
	kernel=${KERNEL:-$build/bzImage-6.12-debug}
	root=${ROOT:-$build/root.img}
	bin=${FUZZ_BIN:-$build/tests/bin/btrfs_fscrypt_fuzz}
	images=${FUZZ_IMAGES:-1000}
	seed=${FUZZ_SEED:-0x14f0001}
	first=${FUZZ_FIRST:-0}
	replay=${FUZZ_REPLAY:-}
	mut_mask=${FUZZ_MUT_MASK:-}
	rw_every=${FUZZ_RW_EVERY:-4}
	max_boots=${FUZZ_BOOTS:-20}
	out=${FUZZ_RUN_OUT:-$build/reliability/fuzz-$(date +%Y-%m-%d-%H%M%S)}
	[ -x "$bin" ] || die "$bin is not built (make tests-bin)"
	[ -f "$kernel" ] || die "no kernel $kernel (make kernel FLAVOR=debug)"
	[ -f "$root" ] || die "no root image $root (make image)"
	if [ -n "$replay" ]; then
		if [ ! -f "$replay/seed" ] || [ ! -f "$replay/index" ]; then
			die "$replay is not a bug directory (no seed and index files)"
		fi
		src=$(cd "$replay/.." && pwd)/pristine.img
		[ -f "$src" ] || die "no $src: the pristine image of that run is needed"
		seed=$(cat "$replay/seed")
		first=$(cat "$replay/index")
		[ -f "$replay/rw_every" ] && rw_every=$(cat "$replay/rw_every")
		images=1
	fi
	case $images$first$rw_every in *[!0-9]*) die "FUZZ_IMAGES, FUZZ_FIRST and FUZZ_RW_EVERY must be numbers" ;; esac
fi
end=$((first + images))

# ---- one boot's results --------------------------------------------------------

nsplats=0
splats=
boots_md=
guest_secs=0
ok=1

# Where the line FILE:LINE of the tested kernel comes from: the series (which
# patch) or linux-source, from build/linux-6.12's history (read only) at the
# kernel's tree_head; else whether the series changes the file at all.
site_origin() { # file:line
	local file=${1%%:*} line=${1##*:} head c
	head=$(sed -n 's/^tree_head=//p' "$kernel.info" 2>/dev/null)
	if [ -n "$head" ] && git -C "$top/build/linux-6.12" rev-parse -q --verify pristine >/dev/null 2>&1; then
		# (a boundary commit, the root, is printed with a leading ^)
		c=$(git -C "$top/build/linux-6.12" blame -l -s -L "$line,$line" "$head" -- "$file" 2>/dev/null |
			awk '{ sub(/^\^/, "", $1); print $1 }')
		if [ -n "$c" ]; then
			if git -C "$top/build/linux-6.12" merge-base --is-ancestor "$c" pristine; then
				echo "line $line of $file is linux-source's, not the series'"
			else
				echo "line $line of $file comes from the series: $(git -C "$top/build/linux-6.12" log -1 --format=%s "$c")"
			fi
			return
		fi
	fi
	if grep -q "^+++ b/$file\$" "$top"/patches/*.patch; then
		echo "$file is changed by the series"
	else
		echo "$file is not changed by the series"
	fi
}

# The console's assertion line, if a BUG came from an ASSERT(): the place
# that matters is the assertion's, not ctree.h's assertfail().
assertion_site() { # console
	grep -a -o 'assertion failed: .*, in [a-z0-9_/.-]*\.[ch]:[0-9]*' "$1" | head -n 1 | sed 's/.*, in //'
}

# A bug directory from the console alone (the guest died before its results
# came back): seed, index, the mutations, how to replay.
bug_from_console() { # image console why
	local b=$out/bug-$1 line
	[ -d "$b" ] && return
	mkdir -p "$b"
	echo "$seed" >"$b/seed"
	echo "$1" >"$b/index"
	echo "$rw_every" >"$b/rw_every"
	line=$(grep -a -n "lab-fuzz: seed [0-9a-fx]* image $1 " "$2" | head -n 1 | cut -d: -f1)
	tail -n "+${line:-1}" "$2" | awk -v k="$1" 'NR > 1 && /lab-fuzz: seed [0-9a-fx]* image [0-9]+ / { exit } { print }' \
		>"$b/console.txt"
	grep -a -m 1 "lab-fuzz: seed [0-9a-fx]* image $1 " "$2" | sed 's/.*lab-fuzz: //' >"$b/mutations.txt"
	echo "$3 (see console.txt): its results did not come back, the guest died in this boot; replay: make reliability FUZZ_REPLAY=$b" \
		>"$b/replay.txt"
}

# Build fuzz-$1/ for boot $1, which began at image $2, right after the boot:
# the fuzzer's results, its bugs moved to bug-<k>/; if the guest died, what
# the fuzzer kept on the save disk and the console.
build() {
	local n=$1 from=$2 vm=$out/vm-$1 f=$out/fuzz-$1 b last stop k why
	rm -rf "$f"
	if [ -f "$vm/results/fuzz/summary.tsv" ]; then
		cp -r "$vm/results/fuzz" "$f"
		rm -f "$f/pristine.img"
		for b in "$f"/bug-*; do
			[ -d "$b" ] && rm -rf "${out:?}/$(basename "$b")" && mv "$b" "$out/"
		done
		return
	fi
	mkdir -p "$f"
	# The guest died (an oops panics the lab kernel) or hung: the console
	# says which image it was in.
	last=$(grep -a -o 'lab-fuzz: seed [0-9a-fx]* image [0-9]*' "$vm/console.log" | tail -n 1)
	[ -n "$last" ] || return
	stop=${last##* }
	# What the boot did before that image: the totals the fuzzer kept on
	# the save disk after every image (its first image must be this
	# boot's, or they are an earlier boot's). The next boot overwrites
	# them: fuzz-<n>/state.txt keeps them.
	dd if="$out/pristine.img" bs=1M skip=192 count=8 status=none | tr -d '\000' >"$f/state.txt"
	if [ "$(head -n 1 "$f/state.txt")" = "LAB-FUZZ-STATE 1 first=$from" ]; then
		awk -v d="$f" '/^== end$/ { exit } /^== / { name = $2; next } name { print > (d "/" name) }' "$f/state.txt"
		# the image that killed the guest: tried, and a bug
		awk -F'\t' -v OFS='\t' '$1 == "images_tried" || $1 == "bugs" { $2++ } { print }' \
			"$f/summary.tsv" >"$f/summary.tsv.new" && mv "$f/summary.tsv.new" "$f/summary.tsv"
		# the bugs found before it: their directories did not come back
		while IFS=$'\t' read -r k why; do
			case $k in '' | *[!0-9]*) continue ;; esac
			bug_from_console "$k" "$vm/console.log" "$why"
		done <"$f/bugs.tsv"
	else
		printf 'images_tried\t%s\nbugs\t1\n' \
			"$(grep -a -c 'lab-fuzz: seed [0-9a-fx]* image [0-9]* (' "$vm/console.log")" >"$f/summary.tsv"
		: >"$f/bugs.tsv"
	fi
	printf '%s\tthe guest died or hung: %s\n' "$stop" "$(cat "$vm/verdict" 2>/dev/null)" >>"$f/bugs.tsv"
	bug_from_console "$stop" "$vm/console.log" "the guest died or hung during this image"
}

# Describe boot $1, which began at image $2 (its fuzz-$1/ built); sets $stop
# to the image it stopped at, if any.
collect() {
	local n=$1 from=$2 vm=$out/vm-$1 f=$out/fuzz-$1 s what last
	s=$("$top/vm-images/console-check.sh" "$vm/console.log" 2>/dev/null)
	if [ -n "$s" ]; then
		splats+="$s"$'\n'
		nsplats=$((nsplats + $(printf '%s\n' "$s" | wc -l)))
		ok=0
	fi
	guest_secs=$((guest_secs + $(sed -n 's/^elapsed_s=//p' "$vm/run.info" 2>/dev/null || echo 0)))
	grep -q '^btrfs_fscrypt_fuzz	PASS' "$vm/results/tests.tsv" 2>/dev/null || ok=0
	stop=$(sed -n 's/^stopped_at\t//p' "$f/summary.tsv" 2>/dev/null)
	what="finished ($(cat "$vm/verdict" 2>/dev/null))"
	if [ ! -f "$vm/results/fuzz/summary.tsv" ]; then
		last=$(grep -a -o 'lab-fuzz: seed [0-9a-fx]* image [0-9]*' "$vm/console.log" | tail -n 1)
		if [ -z "$last" ]; then
			boots_md+="- boot $n: no image ran ($(cat "$vm/verdict" 2>/dev/null))"$'\n'
			ok=0
			return
		fi
		stop=${last##* }
		what="died or hung in image $stop ($(cat "$vm/verdict" 2>/dev/null))"
		ok=0
	elif [ -n "$stop" ]; then
		what="stopped at image $stop (a splat or a hang)"
		ok=0
	fi
	boots_md+="- boot $n ($(sed -n 's/^elapsed_s=//p' "$vm/run.info" 2>/dev/null) s): images $from-${stop:-$((end - 1))}, $what"$'\n'
}

# ---- the boots -----------------------------------------------------------------

if [ "$report_only" = 0 ]; then
	mkdir -p "$out/job/tests/bin" || die "cannot create $out"
	out=$(cd "$out" && pwd)
	[ -n "${FUZZ_RUN_OUT:-}" ] || ln -sfn "$(basename "$out")" "$build/reliability/fuzz-latest" 2>/dev/null
	cp "$bin" "$out/job/tests/bin/"
	install -m 0755 "$top/tests/guest-run.sh" "$out/job/guest-run.sh"
	if [ -n "$replay" ]; then
		cp --sparse=always "$src" "$out/pristine.img"
	else
		rm -f "$out/pristine.img"
		truncate -s 256M "$out/pristine.img"
	fi
	printf '%s=%q\n' kernel "$kernel" seed "$seed" first "$first" images "$images" \
		replay "$replay" mut_mask "$mut_mask" rw_every "$rw_every" >"$out/run.conf"
	: >"$out/boots.tsv"
	rm -rf "$out/fuzz" "$out"/fuzz-* "$out"/vm-*
	echo "== reliability: fuzzed encrypted btrfs images, seed $seed, images $first-$((end - 1))${replay:+ (replay of $replay)}"
	echo "   report: $out"
	start=$(date +%s)
	next=$first
	boot=0
	# One boot per stretch of images: a boot stops at its first splat or
	# hang, and the next one goes on after that image, from the same
	# pristine image.
	while [ "$next" -lt "$end" ] && [ "$boot" -lt "$max_boots" ]; do
		boot=$((boot + 1))
		left=$((end - next))
		timeout=${TIMEOUT:-$((1200 + 20 * left))}
		{
			echo '#!/bin/bash'
			echo "# written by tests/run-fuzz.sh (boot $boot)"
			echo "export FUZZ_IMAGES=$left FUZZ_SEED=$seed FUZZ_FIRST=$next FUZZ_PROGRESS=25 FUZZ_RW_EVERY=$rw_every"
			echo "export FUZZ_KEEP_PRISTINE=1"
			[ -n "$mut_mask" ] && echo "export FUZZ_MUT_MASK=$mut_mask"
			echo "export TEST_TIMEOUT=$((timeout - 120))"
			# after the first boot (or in a replay) the saved image is the pristine one
			{ [ -n "$replay" ] || [ "$boot" -gt 1 ]; } && echo "export FUZZ_PRISTINE=/dev/vde"
			echo 'exec /job/guest-run.sh'
		} >"$out/job/run"
		chmod 0755 "$out/job/run"
		printf '%s\t%s\n' "$boot" "$next" >>"$out/boots.tsv"
		echo "== boot $boot: images $next-$((end - 1))"
		"$top/vm-images/run-vm.sh" --kernel "$kernel" --root "$root" --job "$out/job" \
			--out "$out/vm-$boot" --scratch 1G --scratch-file "$out/pristine.img" \
			--timeout "$timeout" --lab-args btrfs_fscrypt_fuzz
		build "$boot" "$next"
		collect "$boot" "$next"
		[ -n "$stop" ] || break
		next=$((stop + 1))
	done
	wall_s=$(( $(date +%s) - start ))
	wall="$((wall_s / 60)) min $((wall_s % 60)) s"
	printf 'wall=%q\nwall_s=%s\n' "$wall" "$wall_s" >>"$out/run.conf"
else
	while IFS=$'\t' read -r boot from; do
		[ -f "$out/fuzz-$boot/summary.tsv" ] || build "$boot" "$from"
		collect "$boot" "$from"
	done <"$out/boots.tsv"
	wall=${wall:-?}
	# (runs made before wall_s was recorded: from "N min M s")
	if [ -z "${wall_s:-}" ] && [[ $wall =~ ^([0-9]+)\ min\ ([0-9]+)\ s$ ]]; then
		wall_s=$((BASH_REMATCH[1] * 60 + BASH_REMATCH[2]))
	fi
fi

# ---- the run's totals: the sums of the boots' ------------------------------------

mkdir -p "$out/fuzz"
awk -F'\t' '
	$1 == "seed" || $1 == "stopped_at" { next }
	$1 == "explained_by" { if (!($2 in ex)) eo[ne++] = $2; ex[$2] += $3; next }
	$1 == "errors_without_warning_log_line_images" { if ($2 != "-") nl = nl (nl ? " " : "") $2; next }
	{ if (!($1 in v)) o[n++] = $1; v[$1] += $2 }
	END {
		for (i = 0; i < n; i++) printf "%s\t%s\n", o[i], v[o[i]]
		for (i = 0; i < ne; i++) printf "explained_by\t%s\t%s\n", eo[i], ex[eo[i]]
		printf "errors_without_warning_log_line_images\t%s\n", nl ? nl : "-"
	}' "$out"/fuzz-*/summary.tsv >"$out/fuzz/summary.tsv"
awk -F'\t' 'FNR == 1 { if (!h) print; h = 1; next }
	{ if (!($1 in c1)) o[n++] = $1; c1[$1] = 1; for (i = 2; i <= NF; i++) c[$1, i] += $i; nf = NF }
	END { for (k = 0; k < n; k++) { printf "%s", o[k]; for (i = 2; i <= nf; i++) printf "\t%s", c[o[k], i]; printf "\n" } }' \
	"$out"/fuzz-*/errnos.tsv >"$out/fuzz/errnos.tsv" 2>/dev/null
awk 'FNR == 1 && NR > 1 { next } { print }' "$out"/fuzz-*/images.tsv >"$out/fuzz/images.tsv" 2>/dev/null
cat "$out"/fuzz-*/bugs.tsv >"$out/fuzz/bugs.tsv" 2>/dev/null
# the seed's census and trace probe: the same pristine image in every boot,
# so the first boot's that has them
rm -f "$out/fuzz/seed.tsv" "$out/fuzz/trace.tsv"
for f in seed.tsv trace.tsv; do
	for b in "$out"/fuzz-*/"$f"; do
		[ -s "$b" ] && cp "$b" "$out/fuzz/$f" && break
	done
done
# a TSV file with a header line as a markdown table
tsv_md() {
	[ -s "$1" ] || { echo "(not written: the fuzzer did not get to its end)"; return; }
	head -n 1 "$1" | sed 's/\t/ | /g; s/^/| /; s/$/ |/'
	head -n 1 "$1" | sed 's/[^\t]*/---/g; s/\t/|/g; s/^/|/; s/$/|/'
	tail -n +2 "$1" | sed 's/\t/ | /g; s/^/| /; s/$/ |/'
}
get() { sed -n "s/^$1\t//p" "$out/fuzz/summary.tsv" 2>/dev/null | head -n 1; }
num() { local v; v=$(get "$1"); echo "${v:-0}"; }
[ "$(num bugs)" = 0 ] || ok=0

{
	printf 'images\t%s\nmounted\t%s\nclean_results\t%s\nclean_errors\t%s\n' \
		"$(num images_tried)" "$(num mounted)" "$(num clean_result)" "$(num clean_errors)"
	printf 'control_failures\t%s\nbugs\t%s\nsplats\t%s\nduration_s\t%s\n' \
		"$(( $(num control_failures) + $(num control_after_rw_failures) + $(num sv_control_failures) ))" \
		"$(num bugs)" "$nsplats" "${wall_s:-}"
	# issue #36: the seed's features reached (trace probe), and mutated
	printf 'trace_probes\t%s\ntrace_probes_reached\t%s\n' \
		"$(tail -n +2 "$out/fuzz/trace.tsv" 2>/dev/null | grep -c .)" \
		"$(awk -F'\t' 'NR > 1 && $NF == "yes"' "$out/fuzz/trace.tsv" 2>/dev/null | grep -c .)"
	for p in rkf rkp pik up; do
		printf 'mutations_%s\t%s\n' "$p" "$(num "part_${p}_mutations")"
	done
} >"$out/figures.tsv"

# ---- the report ----------------------------------------------------------------

rwtext="one mount in $rw_every read-write"
[ "$rw_every" = 0 ] && rwtext="all mounts read-only"

{
	echo "# Reliability: fuzzed encrypted btrfs images"
	echo
	echo "$(sed -n 's/^date=//p' "$out/vm-1/run.info"), kernel $(basename "$kernel") (series $(sed -n 's/^series_hash=//p' "$kernel.info" 2>/dev/null)), $(sed -n 's/^accel=//p' "$out/vm-1/run.info") with $(sed -n 's/^cpus=//p' "$out/vm-1/run.info") vCPUs; seed $seed, images $first-$((end - 1)), $rwtext${mut_mask:+, mutation mask $mut_mask}${replay:+, replay of $replay}."
	echo
	echo "Boots (each stops at its first splat or hang; the next goes on after that image, from the same pristine image):"
	echo
	printf '%s' "$boots_md"
	echo
	echo "| images tried | mounted | clean result | clean errors | control-file failures | bugs | splats | duration |"
	echo "|---|---|---|---|---|---|---|---|"
	echo "| $(num images_tried) | $(num mounted) | $(num clean_result) | $(num clean_errors) | $(( $(num control_failures) + $(num control_after_rw_failures) + $(num sv_control_failures) )) | $(num bugs) | $nsplats | $wall (boots $((guest_secs / 60)) min $((guest_secs % 60)) s, fuzzer $(num seconds) s) |"
	echo
	echo "Mount failed (clean errors) in $(num mount_failed) images; $(num rw_mounts) images were mounted read-write, the others read-only."
	echo "Wrong contents without an error, explained by the mutation (a damaged nonce, key, extent number, extent pointer or size of the file itself): $(num explained_wrong_data); wrong names $(num wrong_names); plaintext read without the key: $(num plaintext_leaks); errnos outside the clean set: $(num odd_errnos); unexplained results: $(num unexplained); read-only mounts that wrote: $(num ro_mount_writes); hangs: $(num hangs)."
	if grep -q '^explained_by' "$out/fuzz/summary.tsv"; then
		echo "Wrong results without an error are explained when a mutation touched that inode's own items; the mutations that did, by kind and field (images):"
		echo
		sed -n 's/^explained_by\t\(.*\)\t\(.*\)/- \1: \2/p' "$out/fuzz/summary.tsv"
		echo
	fi
	echo "Top-level control file: checked $(num control_checked) times, $(num control_failures) failures; after the read-write sessions, mounted again and read $(num control_after_rw_checked) times, $(num control_after_rw_failures) failures. Control file in the damaged subvolume: checked $(num sv_control_checked) times (skipped $(num sv_control_skipped) when a leaf holding its items was mutated), $(num sv_control_clean_errors) clean errors, $(num sv_control_failures) failures."
	echo "Images whose errors came without a warning-level kernel line: $(num errors_without_warning_log_line) ($(get errors_without_warning_log_line_images))."
	echo
	echo "Mutations: $(num mutations) in all; by kind: $(sed -n 's/^mutations_\(.*\)\t\(.*\)/\1 \2/p' "$out/fuzz/summary.tsv" | paste -sd, - | sed 's/,/, /g')."
	echo
	echo "## The seed image, and what reached it"
	echo
	echo "What each subvolume of the pristine image holds (the census of its live leaves; contexts by master key: key 1, key 2, other: the test key under test_dummy_encryption):"
	echo
	tsv_md "$out/fuzz/seed.tsv"
	echo
	echo "The trace probe: one file of each feature read alone with the fscrypt tracepoints counted (reached: what the feature is for was seen):"
	echo
	tsv_md "$out/fuzz/trace.tsv"
	echo
	echo "By subvolume: the mutations, the images with one there, of those the images whose results there differed from the reference, and those whose kernel log has the tree-checker's \"corrupt leaf\" line naming a leaf of it that the image changed:"
	echo
	echo "| subvolume | mutations | images | results differing | tree-checker named the leaf |"
	echo "|---|---|---|---|---|"
	sed -n 's/^part_\(.*\)_mutations\t.*/\1/p' "$out/fuzz/summary.tsv" | while read -r p; do
		echo "| $p | $(num "part_${p}_mutations") | $(num "part_${p}_images") | $(num "part_${p}_images_differing") | $(num "part_${p}_images_tree_checker") |"
	done
	echo
	echo "## Clean errors by errno"
	echo
	echo "Images in which the errno appeared, then operations that gave it (where the pristine image gave something else):"
	echo
	head -n 1 "$out/fuzz/errnos.tsv" | sed 's/\t/ | /g; s/^/| /; s/$/ |/'
	head -n 1 "$out/fuzz/errnos.tsv" | sed 's/[^\t]*/---/g; s/\t/|/g; s/^/|/; s/$/|/'
	tail -n +2 "$out/fuzz/errnos.tsv" | sed 's/\t/ | /g; s/^/| /; s/$/ |/'
	echo
	echo "Time in the guest: $(for k in mount walk_without_key add_key_drop_caches walk_with_key controls remove_key umount restore; do printf '%s %s s, ' "${k//_/ }" "$(num "seconds_$k")"; done | sed 's/, $//')."
	echo
	echo "## Bugs"
	echo
	if [ -s "$out/fuzz/bugs.tsv" ] || [ "$nsplats" != 0 ]; then
		[ -s "$out/fuzz/bugs.tsv" ] && sed 's/^\([^\t]*\)\t/- image \1: /' "$out/fuzz/bugs.tsv"
		echo
		echo "Splats on the consoles, with where the line they point at comes from (for a BUG from an ASSERT(), the assertion's line):"
		echo
		printf '%s' "$splats" | grep . | head -n 40 | while IFS= read -r l; do
			src=$(printf '%s\n' "$l" | grep -o ' at [a-z0-9_/.-]*\.[ch]:[0-9]*' | head -n 1 | sed 's/^ at //')
			con=$(printf '%s\n' "$l" | sed -n 's/^[^:]*: \([^:]*\):[0-9]*: .*/\1/p')
			if [ "${src%%:*}" = fs/btrfs/ctree.h ] && [ -f "$con" ] && [ -n "$(assertion_site "$con")" ]; then
				src=$(assertion_site "$con")
				l+=" (assertion in $src)"
			fi
			note=
			[ -n "$src" ] && note=" [$(site_origin "$src")]"
			echo "- $l$note"
		done
		echo
		echo "Replay one: \`make reliability FUZZ_REPLAY=$out/bug-<k>\`."
	else
		echo "None."
	fi
} >"$out/summary.md"
cat "$out/summary.md"
[ "$ok" = 1 ]
