#!/bin/bash
# Host-side test of the benchmark workloads (bench/workloads/*), without a
# VM: each workload's configuration and hooks are loaded the way
# bench/guest/lib.sh loads them, and checked:
#   - every workload has phases, and every phase has a fio job file
#     (PHASE.fio or KIND.fio), as has prep;
#   - its FIEMAP promises are well-formed lines (label path min max shared);
#   - known answers: the scaling points for a few budgets, the phases and
#     profile phase they give, the files the shared workload's phases read,
#     and what each promises; the groupsweep points, phases, count phases,
#     files, and which mounts it remounts per point; the compressible
#     workload's arms, compression of a mount, bytes on disk from a made-up
#     dump-tree and compsize output, and the checks of those bytes;
#   - the key mode the guest derives from /proc/mounts and the policy, the
#     arms as bench/arms.sh reads them, and the fscrypt event counts of the
#     count passes from a made-up tracefs.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
same() { # name got want
	if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: got '$2', want '$3'"; fi
}

# Load a workload as bench/guest/lib.sh does (its default hooks, then the
# workload's), in a subshell, and run "$@" there.
in_workload() { # workload command...
	local w=$1
	shift
	(
		# shellcheck disable=SC2034 # read by bench_load_workload
		WORKLOAD=$w
		# shellcheck source=bench/guest/lib.sh
		. "$top/bench/guest/lib.sh"
		bench_load_workload "$top/bench/workloads/$w"
		"$@"
	)
}

echo "== every workload"
for d in "$top"/bench/workloads/*/; do
	w=$(basename "$d")
	[ -f "$d/workload.conf" ] || continue
	phases=$(in_workload "$w" wl_phases)
	if [ -n "$phases" ]; then ok "$w: phases: $phases"; else bad "$w: no phases"; fi
	# the default wl_prep runs prep.fio; a workload that prepares in its
	# own wl_prep (containers) needs none
	if [ -f "$d/prep.fio" ]; then
		ok "$w: prep.fio"
	elif [ -f "$d/hooks.sh" ] && grep -q '^wl_prep()' "$d/hooks.sh"; then
		ok "$w: prepares in its own wl_prep (no prep.fio)"
	else
		bad "$w: no prep.fio and no wl_prep in hooks.sh"
	fi
	# a command phase (bench/README.md, "Command phases") runs the
	# workload's wl_command, not fio: no job file
	cmds=" $(in_workload "$w" wl_command_phases) "
	for p in $phases $(in_workload "$w" wl_profile_phase); do
		case $cmds in *" $p "*) continue ;; esac
		if [ -f "$d/$p.fio" ] || [ -f "$d/${p%%-*}.fio" ]; then :; else bad "$w: phase $p has no job file"; fi
	done
	# shellcheck disable=SC2086
	checks=$(in_workload "$w" wl_checks /m $phases)
	if [ -n "$checks" ] && echo "$checks" | awk 'NF != 5 || $3 !~ /^[0-9]+$/ || ($4 != "-" && $4 !~ /^[0-9]+$/) || $5 !~ /^[0-9]+$/ { exit 1 }'; then
		ok "$w: FIEMAP promises well-formed ($(echo "$checks" | wc -l) files)"
	else
		bad "$w: FIEMAP promises: '$checks'"
	fi
done

echo "== the workloads' own checks (bench/workloads/*/selftest.sh)"
# Every workload may keep its known answers in its own directory; each
# is sourced here, with the helpers above (ok, bad, same, in_workload).
for t in "$top"/bench/workloads/*/selftest.sh; do
	echo "== $(basename "$(dirname "$t")")"
	# shellcheck source=/dev/null # one per workload
	. "$t"
done
# no workload names arms of its own but compressible
same "the other workloads name no arms of their own" "$(for d in "$top"/bench/workloads/*/; do [ "$(basename "$d")" = compressible ] || [ ! -f "$d/workload.conf" ] && continue; (. "$d/workload.conf"; echo "${WORKLOAD_ARMS:-}"); done | xargs)" ""

echo "== the guest library (bench/guest/lib.sh): sourcing it does nothing"
libtmp=$(mktemp -d)
got=$(cd "$libtmp" && RESULTS=$libtmp bash -c '. "$1"; echo "[$(type -t bench_init) $(type -t wl_after_phase)]"' - "$top/bench/guest/lib.sh" 2>&1; ls -A "$libtmp")
same "sourcing defines functions, prints and writes nothing" "$got" "[function function]"
same "default wl_after_phase: nothing, success" "$(in_workload fragmented wl_after_phase a 1 seqread /m "$libtmp"; echo "rc=$?"; ls -A "$libtmp")" "rc=0"
rm -rf "$libtmp"

echo "== key mode the guest records (kernel_key_mode of bench/guest/lib.sh)"
key_mode() { # mount-options policy
	(
		# shellcheck source=bench/guest/lib.sh
		. "$top/bench/guest/lib.sh"
		kernel_key_mode "$@"
	)
}
tab=$'\t'
same "key mode: btrfs per-extent from /proc/mounts" "$(key_mode rw,relatime,space_cache=v2,fscrypt_per_extent_keys,subvolid=5 'policy v2 contents=1 filenames=4 flags=0x2 keys=per-file')" \
	"per-extent$tab/proc/mounts: fscrypt_per_extent_keys"
same "key mode: btrfs one key per extent from /proc/mounts" "$(key_mode rw,space_cache=v2,fscrypt_per_extent_keys,fscrypt_extents_per_key=1,subvolid=5 'policy v2 contents=1 filenames=4 flags=0x2 keys=per-file')" \
	"per-extent-key$tab/proc/mounts: fscrypt_per_extent_keys,fscrypt_extents_per_key=1"
same "key mode: btrfs groups of at most 16 extents" "$(key_mode rw,fscrypt_per_extent_keys,fscrypt_extents_per_key=16,subvolid=5 'policy v2 keys=per-file' | cut -f1)" "per-extent-max-16"
same "key mode: btrfs groups of at most 10 extents are not one key per extent" "$(key_mode rw,fscrypt_per_extent_keys,fscrypt_extents_per_key=10 'policy v2 keys=per-file' | cut -f1)" "per-extent-max-10"
same "key mode: btrfs per-inode from /proc/mounts" "$(key_mode rw,fscrypt_per_inode_keys,subvolid=5 'policy v2 contents=1 filenames=4 flags=0x2 keys=per-file')" \
	"per-inode$tab/proc/mounts: fscrypt_per_inode_keys"
same "key mode: ext4 from the policy read back" "$(key_mode rw,relatime 'policy v2 contents=1 filenames=4 flags=0x2 keys=per-file')" \
	"per-inode${tab}policy read back: policy v2 contents=1 filenames=4 flags=0x2 keys=per-file"
same "key mode: a DIRECT_KEY policy is not per-inode" "$(key_mode rw 'policy v2 contents=9 filenames=9 flags=0x6 keys=direct' | cut -f1)" "direct"
same "key mode: unencrypted" "$(key_mode rw,relatime '')" "none${tab}no encryption policy"
same "key mode: unencrypted btrfs (the option is shown on every mount)" "$(key_mode rw,fscrypt_per_extent_keys,subvolid=5 '')" "none${tab}no encryption policy"
same "arm key modes" "$(. "$top/bench/arms.sh"; for a in $ALL_ARMS; do arm_key_mode "$a"; done | xargs)" \
	"per-extent per-extent-key per-inode none per-inode none per-extent per-extent none"
same "arms a run makes without ARMS: all but the DEFAULT=0 prototype and compressed arms" "$(. "$top/bench/arms.sh"; echo "$DEFAULT_ARMS")" \
	"btrfs-extent btrfs-extent-key btrfs-inode btrfs-plain ext4-inode ext4-plain"

echo "== arms (bench/arms/*.conf through bench/arms.sh), known answers"
arm_all() { # feature-root: every arm's fs, mkfs, mount options, encrypted, key mode, unsupported, tuning
	(
		ARM_FEATURE_ROOT=$1
		# shellcheck source=bench/arms.sh
		. "$top/bench/arms.sh"
		for a in $ALL_ARMS; do
			printf '%s|%s|%s|%s|%s|%s|%s\n' "$a" "$(arm_fs "$a")" "$(arm_mkfs "$a")" "$(arm_mount_opts "$a")" \
				"$(arm_encrypted "$a" && echo enc || echo plain)" "$(arm_key_mode "$a")" "$(arm_tuning "$a" vdq)"
			why=$(arm_unsupported "$a") && echo "$a unsupported: $why"
		done
		valid_arm btrfs-inode && ! valid_arm btrfs-nope && echo "valid_arm ok"
	)
}
feat=$(mktemp -d)
mkdir -p "$feat/sys/fs/btrfs/features"
touch "$feat/sys/fs/btrfs/features/encrypt_extent_keys"
same "arms on a kernel with per-extent keys" "$(arm_all "$feat")" "btrfs-extent|btrfs|mkfs.btrfs -q -f|fscrypt_extents_per_key=0|enc|per-extent|
btrfs-extent-key|btrfs|mkfs.btrfs -q -f|fscrypt_extents_per_key=1|enc|per-extent-key|
btrfs-inode|btrfs|mkfs.btrfs -q -f|fscrypt_per_inode_keys|enc|per-inode|
btrfs-plain|btrfs|mkfs.btrfs -q -f||plain|none|
ext4-inode|ext4|mkfs.ext4 -q -F -O encrypt||enc|per-inode|echo 1000000 > /sys/fs/ext4/vdq/mb_stream_req
ext4-plain|ext4|mkfs.ext4 -q -F||plain|none|echo 1000000 > /sys/fs/ext4/vdq/mb_stream_req
btrfs-extent-ctxitem|btrfs|mkfs.btrfs -q -f|fscrypt_extents_per_key=0,lab_fscrypt_ctx_items|enc|per-extent|
btrfs-extent-ctxitem unsupported: the layout prototype (mount option lab_fscrypt_ctx_items) was a lab patch of the retired 6.1 series; git history has it (patches/0028-*)
btrfs-extent-zstd|btrfs|mkfs.btrfs -q -f|fscrypt_extents_per_key=0,compress=zstd|enc|per-extent|
btrfs-extent-zstd unsupported: btrfs on this kernel does not compress encrypted files (no /sys/fs/btrfs/features/encrypt_compress): they would be stored uncompressed
btrfs-plain-zstd|btrfs|mkfs.btrfs -q -f|compress=zstd|plain|none|
valid_arm ok"
touch "$feat/sys/fs/btrfs/features/encrypt_compress"
same "arms on a kernel that compresses encrypted files (btrfs-extent-zstd not skipped)" "$(arm_all "$feat" | grep -c '^btrfs-extent-zstd')" "1"
rm -f "$feat/sys/fs/btrfs/features/encrypt_extent_keys" "$feat/sys/fs/btrfs/features/encrypt_compress"
same "arms on a kernel without (btrfs-extent and btrfs-extent-key skipped, btrfs-inode without the option)" "$(arm_all "$feat" | grep -E '^btrfs-(extent|inode)' | grep -Ev '^btrfs-extent-(ctxitem|zstd)')" \
	"btrfs-extent|btrfs|mkfs.btrfs -q -f|fscrypt_extents_per_key=0|enc|per-extent|
btrfs-extent unsupported: btrfs on this kernel encrypts with per-inode keys only (no /sys/fs/btrfs/features/encrypt_extent_keys)
btrfs-extent-key|btrfs|mkfs.btrfs -q -f|fscrypt_extents_per_key=1|enc|per-extent-key|
btrfs-extent-key unsupported: btrfs on this kernel encrypts with per-inode keys only (no /sys/fs/btrfs/features/encrypt_extent_keys)
btrfs-inode|btrfs|mkfs.btrfs -q -f||enc|per-inode|"
rm -rf "$feat"

echo "== fscrypt event counts of a count pass (trace_start, trace_counts of bench/guest/lib.sh)"
# A made-up tracefs: the counts come from its trace and per-CPU stats; the
# events it has are enabled, those it lacks (fscrypt_extent_group_start
# here, as on a kernel before key groups) are left out.
ftfs=$(mktemp -d)
mkdir -p "$ftfs/per_cpu/cpu0" "$ftfs/per_cpu/cpu1"
for e in fscrypt_extent_lookup fscrypt_extent_key_setup fscrypt_derive_key fscrypt_key_slot_program fscrypt_key_slot_evict; do
	mkdir -p "$ftfs/events/fscrypt/$e" && echo 0 >"$ftfs/events/fscrypt/$e/enable"
done
echo 1408 >"$ftfs/buffer_size_kb"
traced() { # tfs command...: run a function of bench/guest/lib.sh against the made-up tracefs
	(
		# shellcheck source=bench/guest/lib.sh
		. "$top/bench/guest/lib.sh"
		# shellcheck disable=SC2034 # read by the library's functions
		tfs=$1
		shift
		"$@"
	)
}
traced "$ftfs" trace_start
same "trace_start: buffer and events" "$(cat "$ftfs/buffer_size_kb" "$ftfs/tracing_on" "$ftfs/events/fscrypt/fscrypt_derive_key/enable"; [ -e "$ftfs/events/fscrypt/fscrypt_extent_group_start" ] || echo absent)" \
	"16384
1
1
absent"
cat >"$ftfs/trace" <<'TRACE'
# tracer: nop
#
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
             fio-300     [001] .....    12.000001: fscrypt_extent_lookup: dev=254:48 ino=257 lblk=0 offset=0 nr_blocks=1 derived=1 key_id=7 extent_nr=0 ret=0 duration_ns=900
             fio-300     [001] .....    12.000002: fscrypt_extent_key_setup: dev=254:48 id=7 cached=0 ret=0 duration_ns=800
             fio-300     [001] .....    12.000003: fscrypt_derive_key: context=9 info_len=16 key_len=64 ret=0 duration_ns=700
             fio-300     [001] .....    12.000004: fscrypt_extent_lookup: dev=254:48 ino=257 lblk=1 offset=0 nr_blocks=1 derived=0 key_id=7 extent_nr=1 ret=0 duration_ns=90
             fio-300     [001] .....    12.000005: fscrypt_extent_key_setup: dev=254:48 id=7 cached=1 ret=0 duration_ns=80
             fio-300     [001] .....    12.000006: fscrypt_extent_key_setup: dev=254:48 id=8 cached=0 ret=-12 duration_ns=80
  kworker/u4:1-40    [000] .....    12.000007: fscrypt_key_slot_program: dev=254:48 slot=0 evicted_id=0 id=7 ret=0 duration_ns=300
  kworker/u4:1-40    [000] .....    12.000008: fscrypt_key_slot_evict: slot=0 id=7
             fio-300     [001] .....    12.000009: fscrypt_derive_key: context=2 info_len=16 key_len=64 ret=0 duration_ns=700
             fio-300     [001] .....    12.000010: fscrypt_extent_group_start: dev=254:48 ino=257 key_id=9 reason=extents prev_extents=4 prev_units=4
             fio-300     [001] .....    12.000011: fscrypt_extent_group_start: dev=254:48 ino=258 key_id=10 reason=new prev_extents=0 prev_units=0
TRACE
printf 'entries: 5\noverrun: 0\ndropped events: 0\n' >"$ftfs/per_cpu/cpu0/stats"
printf 'entries: 9\noverrun: 3\ndropped events: 1\n' >"$ftfs/per_cpu/cpu1/stats"
same "trace_counts: known counts" "$(traced "$ftfs" trace_counts seqread-g4 | tr '\t' ' ')" "seqread-g4 derivations 2
seqread-g4 derivations_context_2 1
seqread-g4 derivations_context_9 1
seqread-g4 group_starts 2
seqread-g4 group_starts_extents 1
seqread-g4 group_starts_new 1
seqread-g4 key_setups_cached 1
seqread-g4 key_setups_derived 1
seqread-g4 lookups 2
seqread-g4 lookups_derived 1
seqread-g4 lost_events 4
seqread-g4 slot_evicts 1
seqread-g4 slot_programs 1"
same "trace_counts: tracing and events off again" "$(cat "$ftfs/tracing_on" "$ftfs/events/fscrypt/fscrypt_derive_key/enable")" "0
0"
rm -rf "$ftfs"

echo "== CPU time of a phase (cpu_now of bench/guest/lib.sh)"
# user+nice+system+irq+softirq of /proc/stat's cpu line; nothing (never a
# failure) when the line is missing, short or not numbers
cpu_ticks_of() { # content of a made-up /proc/stat ("-": no such file) [source]
	(
		# shellcheck source=bench/guest/lib.sh
		. "$top/bench/guest/lib.sh"
		f=$(mktemp)
		if [ "$1" = - ]; then rm -f "$f"; else printf '%b' "$1" >"$f"; fi
		# shellcheck disable=SC2034 # cpu_source: read by cpu_now
		cpu_source=${2:-stat}
		PROC_STAT=$f PROC_SCHEDSTAT=$f cpu_now
		rc=$?
		rm -f "$f"
		# shellcheck disable=SC2154 # cpu_ticks: set by cpu_now, eval'ed above
		echo "rc=$rc ticks=$cpu_ticks"
	)
}
same "cpu_now: known answer" "$(cpu_ticks_of 'cpu  10 2 30 999 50 4 5 7 0 0\ncpu0 1 1 1 1 1 1 1 0 0 0\n')" "rc=0 ticks=51"
same "cpu_now: short cpu line" "$(cpu_ticks_of 'cpu  10 2 30\n')" "rc=0 ticks="
same "cpu_now: no cpu line" "$(cpu_ticks_of 'intr 1 2 3\n')" "rc=0 ticks="
same "cpu_now: not numbers" "$(cpu_ticks_of 'cpu  10 x 30 999 50 4 5\n')" "rc=0 ticks="
same "cpu_now: no /proc/stat" "$(cpu_ticks_of -)" "rc=0 ticks="
# /proc/schedstat: rq_cpu_time (7th number after cpuN) summed, ns; domain
# lines and the header skipped
ss='version 15\ntimestamp 4295\ncpu0 0 0 10 2 8 3 1000000007 55 9\ndomain0 3 1 2 3\ncpu1 0 0 10 2 8 3 2000000000 66 9\n'
same "cpu_now: schedstat known answer" "$(cpu_ticks_of "$ss" schedstat)" "rc=0 ticks=3000000007"
same "cpu_now: schedstat short cpu line" "$(cpu_ticks_of 'cpu0 0 0 10 2\n' schedstat)" "rc=0 ticks="
same "cpu_now: schedstat no cpu line" "$(cpu_ticks_of 'version 15\n' schedstat)" "rc=0 ticks="
same "cpu_now: no /proc/schedstat" "$(cpu_ticks_of - schedstat)" "rc=0 ticks="

echo "== arm order, write windows, forwarded variables"
tmp_wl=$(mktemp -d)
trap 'rm -rf "$tmp_wl"' EXIT
# bench_arm_order: rotate alternates two arms and rotates three; random is
# a permutation that repeats with its seed; fixed is ARMS
order_of() { # rule seed arms rep
	(
		# shellcheck source=bench/guest/lib.sh
		. "$top/bench/guest/lib.sh"
		BENCH_ORDER=$1 BENCH_ORDER_SEED=$2 ARMS=$3 bench_arm_order "$4"
	)
}
same "order: rotate, rep 1" "$(order_of rotate 0 "a b" 1)" "a b"
same "order: rotate, rep 2" "$(order_of rotate 0 "a b" 2)" "b a"
same "order: rotate, 3 arms, rep 3" "$(order_of rotate 0 "a b c" 3)" "c a b"
same "order: fixed, rep 2" "$(order_of fixed 0 "a b" 2)" "a b"
r1=$(order_of random 7 "a b c d" 3)
same "order: random repeats with its seed" "$(order_of random 7 "a b c d" 3)" "$r1"
same "order: random is a permutation" "$(echo "$r1" | tr ' ' '\n' | sort | xargs)" "a b c d"
# phase_writes: the write phases end their CPU window after a sync
for w in fragmented compressible; do
	(. "$top/bench/guest/lib.sh"; phase_writes "$top/bench/workloads/$w/randwrite.fio") &&
		ok "$w: randwrite's window ends after a sync" || bad "$w: randwrite not seen as writing"
	(. "$top/bench/guest/lib.sh"; phase_writes "$top/bench/workloads/$w/seqread.fio") &&
		bad "$w: seqread seen as writing" || ok "$w: seqread's window has no sync"
done
# a random read has a seed of its own, not its preparation's (with the
# preparation's, fio reads the blocks in the order they were written)
for d in "$top"/bench/workloads/*/; do
	[ -f "$d/randread.fio" ] && [ -f "$d/prep.fio" ] || continue
	ps=$(sed -n 's/^randseed=//p' "$d/prep.fio")
	rs=$(sed -n 's/^randseed=//p' "$d/randread.fio")
	if [ -n "$ps" ] && [ "$ps" = "$rs" ]; then
		bad "$(basename "$d"): randread uses its preparation's seed $ps"
	else
		ok "$(basename "$d"): randread seed ${rs:-none}, prep ${ps:-none}"
	fi
done
# run-bench forwards the workload's declared variables and refuses others
touch "$tmp_wl/bzImage"
if MAKEFLAGS="s -- WORKLOAD=containers CT_GENS=8" KERNEL=$tmp_wl/bzImage BENCH_DRY_RUN=1 \
	RUN_DIR=$tmp_wl/dry CT_GENS=8 "$top/bench/run-bench.sh" containers >/dev/null 2>&1; then
	same "containers: CT_GENS=8 forwarded" "$(grep '^CT_GENS=' "$tmp_wl/dry/job/bench.env")" "CT_GENS=8"
	same "containers: its phases with CT_GENS=8" \
		"$(cd "$top" && /usr/bin/python3 -c 'import sys; from reports.lab import collect as C; print(C.shell_vars(sys.argv[1], sys.argv[2])["PHASES"])' \
			"$tmp_wl/dry/job/bench/workloads/containers/workload.conf" "$tmp_wl/dry/job/bench.env")" \
		"treeread-gen0 treeread-gen8"
else
	bad "containers: dry run with CT_GENS=8 failed"
fi
out=$(MAKEFLAGS="s -- WORKLOAD=fragmented CT_GENS=8" KERNEL=$tmp_wl/bzImage BENCH_DRY_RUN=1 \
	RUN_DIR=$tmp_wl/dry2 "$top/bench/run-bench.sh" fragmented 2>&1)
rc=$?
if [ $rc = 2 ] && echo "$out" | grep -q "'CT_GENS' is neither"; then
	ok "fragmented: an undeclared CT_GENS=8 is refused"
else
	bad "fragmented with CT_GENS=8: exit $rc: $out"
fi

if [ "$fails" = 0 ]; then
	echo "bench-workloads: all passed"
else
	echo "bench-workloads: $fails failed"
	exit 1
fi
