#!/bin/bash
# A set of boots: the unit of the lab's regression checks (issue #34).
#
#   bench/run-boots.sh KIND LABEL=KERNEL[,inject=NS] [LABEL=KERNEL...]
#
# KIND: nightly (one label: the nightly of one kernel) or ab (labels old
# and new: make bench-ab). BOOTS (default: 2 for a nightly, 4 for ab)
# boots in turn, the labels alternating (old new old new ...); each boot
# is a whole `make bench` run of the workload (bench/run-bench.sh with
# REPORT=0: its own preparation and REPS reps of both arms, interleaved in
# alternating order), so the spread between boots (another boot, another
# prepared layout) is in the set, and a set's interval covers it.
# inject=NS: that label's boots run with INJECT_LOOKUP_DELAY_NS=NS (the
# tests of the checks). KERNEL: a bzImage (its .info beside it names the
# series), a directory of patches (its series file; built here), or a
# commit of this repository (its patches/ built here).
#
# RESOLVE_ONLY=1 prints LABEL=bzImage for each kernel (after building it)
# and boots nothing. The other variables are run-bench.sh's: WORKLOAD (default fragmented),
# REPS (5), ARMS (btrfs-extent btrfs-inode), PREP, ORDER, ACCEL.
#
# Output: build/bench/sets/<stamp>-<kind>-<workload>/ (SET_DIR overrides):
# set.json (what ran, in which order, where), boot<N>-<label>/ (each a raw
# run), then `reports.lab.gate summarize` writes summary.json and summary.md
# into it. build/bench/latest-set-<kind>-<workload> points to it.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "run-boots: error: $*" >&2; exit 2; }

kind=${1:-}
[ $# -ge 1 ] && shift
case $kind in
nightly) BOOTS=${BOOTS:-2}; [ $# = 1 ] || die "a nightly boots one kernel: nightly LABEL=KERNEL" ;;
ab) BOOTS=${BOOTS:-4}; [ $# = 2 ] || die "ab needs two kernels: ab old=KERNEL new=KERNEL" ;;
*) die "usage: bench/run-boots.sh nightly|ab LABEL=KERNEL[,inject=NS] ... (see its header)" ;;
esac
case $BOOTS in '' | *[!0-9]* | 0) die "BOOTS must be a positive number, not '$BOOTS'" ;; esac
[ "$kind" = ab ] && [ $((BOOTS % 2)) != 0 ] && die "BOOTS=$BOOTS: ab alternates old and new, BOOTS must be even"
export WORKLOAD=${WORKLOAD:-fragmented} REPS=${REPS:-5} PROFILE=0
export ARMS=${ARMS:-btrfs-extent btrfs-inode}
[ -f "$top/bench/workloads/$WORKLOAD/workload.conf" ] ||
	die "unknown workload '$WORKLOAD' (make bench WORKLOAD=list)"

stamp=$(date -u +%Y%m%d-%H%M%S)
set_dir=${SET_DIR:-$top/build/bench/sets/$stamp-$kind-$WORKLOAD}
mkdir -p "$set_dir" || die "cannot create $set_dir"
[ -e "$set_dir/set.json" ] && die "$set_dir already holds a set"

# resolve_kernel SPEC OUTVAR: the bzImage of a kernel argument
resolve_kernel() { # spec
	local spec=$1 pdir hash out
	if [ -f "$spec" ]; then
		realpath "$spec"
		return
	fi
	if [ -d "$spec" ]; then
		[ -f "$spec/series" ] || die "$spec is a directory without a series file (a patches directory has one)"
		pdir=$(realpath "$spec")
	elif git -C "$top" rev-parse -q --verify "$spec^{commit}" >/dev/null 2>&1; then
		pdir=$set_dir/patches-$(git -C "$top" rev-parse --short "$spec")
		mkdir -p "$pdir"
		git -C "$top" archive "$spec" patches | tar -x -C "$pdir" --strip-components=1 ||
			die "cannot read patches/ of commit $spec"
	else
		die "kernel '$spec' is neither a file, a patches directory nor a commit of this repository"
	fi
	# the kernel is named by what goes into it: its patches and configs
	hash=$(cd "$pdir" && find . -type f \( -name series -o -name '*.patch' -o -name '*.config' \) -print0 |
		LC_ALL=C sort -z | xargs -0 cat | sha256sum | cut -c1-12)
	out=$top/build/ab-kernels/$hash
	configs=$top/patches/config
	[ -d "$pdir/config" ] && configs=$pdir/config
	if [ ! -f "$out/bzImage-6.12-perf" ]; then
		echo "run-boots: building the perf kernel of $spec in $out (a few minutes with ccache; log: $out/kernel.log)" >&2
		mkdir -p "$out"
		BUILD=$out PATCHES=$pdir CONFIGS=$configs "$top/patches/kernel.sh" build perf >"$out/kernel.log" 2>&1 ||
			die "could not build the kernel of $spec (log: $out/kernel.log)"
	fi
	echo "$out/bzImage-6.12-perf"
}

labels=() kernels=() injects=()
for arg in "$@"; do
	label=${arg%%=*}
	rest=${arg#*=}
	[ "$label" != "$arg" ] && [ -n "$rest" ] || die "'$arg' is not LABEL=KERNEL"
	case $kind/$label in
	nightly/nightly | ab/old | ab/new) ;;
	*) die "label '$label' does not belong to a $kind set (nightly: nightly; ab: old, new)" ;;
	esac
	inject=0
	case $rest in *,inject=*) inject=${rest##*,inject=}; rest=${rest%,inject=*} ;; esac
	case $inject in '' | *[!0-9]*) die "inject=$inject: a number of nanoseconds" ;; esac
	k=$(resolve_kernel "$rest") || exit 2
	labels+=("$label") kernels+=("$k") injects+=("$inject")
done
[ "$kind" = ab ] && [ "${labels[0]}" = "${labels[1]}" ] && die "ab needs old= and new="

nl=${#labels[@]}
# RESOLVE_ONLY=1: say which kernel each label would boot (building what
# needs building), and stop
if [ "${RESOLVE_ONLY:-0}" = 1 ]; then
	for i in $(seq 0 $((nl - 1))); do
		echo "${labels[$i]}=${kernels[$i]}"
	done
	rm -rf "$set_dir"
	exit 0
fi
echo "run-boots: $kind set of $BOOTS boot(s), workload $WORKLOAD, reps $REPS, arms ($ARMS): $set_dir"
for i in $(seq 0 $((nl - 1))); do
	echo "run-boots:   ${labels[$i]}: ${kernels[$i]}$([ "${injects[$i]}" != 0 ] && echo " (injected lookup delay ${injects[$i]} ns)")"
done
t0=$(date +%s)
boots_json=""
for b in $(seq 1 "$BOOTS"); do
	i=$(( (b - 1) % nl ))
	label=${labels[$i]}
	run=$set_dir/boot$b-$label
	echo "run-boots: [$(( $(date +%s) - t0 ))s] boot $b of $BOOTS: $label"
	REPORT=0 RUN_DIR=$run KERNEL=${kernels[$i]} INJECT_LOOKUP_DELAY_NS=${injects[$i]} \
		SET_ID=$(basename "$set_dir") BOOT_LABEL=$label BOOT_INDEX=$b \
		"$top/bench/run-bench.sh" "$WORKLOAD" ||
		die "boot $b ($label) failed; its output is in $run (the set is incomplete: run it again)"
	boots_json+="${boots_json:+, }{\"index\": $b, \"label\": \"$label\", \"run\": \"$(basename "$run")\"}"
done
{
	echo "{"
	echo " \"format\": 1,"
	echo " \"kind\": \"$kind\","
	echo " \"workload\": \"$WORKLOAD\","
	echo " \"started\": \"$(date -u -d "@$t0" +%Y-%m-%dT%H:%M:%SZ)\","
	echo " \"elapsed_s\": $(( $(date +%s) - t0 )),"
	echo " \"kernels\": {$(for i in $(seq 0 $((nl - 1))); do
		printf '%s"%s": {"image": "%s", "injected_lookup_delay_ns": %s}' \
			"$([ "$i" = 0 ] || echo ', ')" "${labels[$i]}" "${kernels[$i]}" "${injects[$i]}"; done)},"
	echo " \"boots\": [$boots_json]"
	echo "}"
} >"$set_dir/set.json"
ln -sfn "$set_dir" "$top/build/bench/latest-set-$kind-$WORKLOAD"
cd "$top" || die "cannot cd to $top"
/usr/bin/python3 -m reports.lab.gate summarize "$set_dir" ||
	die "could not summarize the set $set_dir"
# every boot goes into the history store, as its label's kind of run
# (nightly, old, new: reports/lab/history.py draws one trend per kind)
for b in "$set_dir"/boot*/; do
	/usr/bin/python3 -m reports.lab.history append "${b%/}" ||
		die "could not record ${b%/} in the history store (LAB_HISTORY_DIR=${LAB_HISTORY_DIR:-default})"
done
echo "run-boots: done in $(( $(date +%s) - t0 ))s: $set_dir"
