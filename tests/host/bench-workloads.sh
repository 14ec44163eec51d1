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
#     files, and which mounts it remounts per point;
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

echo "== scaling"
same "scaling: default points" "$(in_workload scaling scale_points | paste -sd' ' -)" "4096 16384 65536 262144 1048576"
same "scaling: the smallest file is SCALE_STEP times the read" "$(SCALE_STEP=2 SCALE_MIN=512 in_workload scaling scale_points | head -n 1)" "1024"
same "scaling: SCALE_BUDGET=86016" "$(SCALE_BUDGET=86016 in_workload scaling scale_points | paste -sd' ' -)" "4096 16384 65536"
same "scaling: SCALE_FROM=1024 SCALE_STEP=2 SCALE_BUDGET=3072" "$(SCALE_FROM=1024 SCALE_STEP=2 SCALE_BUDGET=3072 in_workload scaling scale_points | paste -sd' ' -)" "1024 2048"
same "scaling: budget below one point gives no phases" "$(SCALE_BUDGET=4000 in_workload scaling wl_phases 2>/dev/null)" ""
same "scaling: phases" "$(SCALE_BUDGET=20480 in_workload scaling wl_phases | xargs)" \
	"seqread-e4096 seqread-e16384 randread-e4096 randread-e16384"
same "scaling: profile phase is the largest file's sequential read" "$(in_workload scaling wl_profile_phase)" "seqread-e1048576"
same "scaling: profiled prep checks only that file" "$(in_workload scaling wl_checks /m seqread-e1048576)" "e1048576 /m/bench/frag-e1048576 1048576 - 0"
same "scaling: target" "$(in_workload scaling wl_target /m randread-e4096)" "/m/bench/frag-e4096"
same "scaling: every point reads SCALE_MIN blocks" "$(in_workload scaling sh -c 'echo $READ_SIZE')" "4096k"
same "scaling: its parameters are recorded" "$(in_workload scaling bench_params | xargs)" \
	"SCALE_MIN=1024 SCALE_FROM=4096 SCALE_STEP=4 SCALE_BUDGET=1396736 READ_SIZE=4096k"

echo "== shared"
same "shared: targets" "$(for p in seqread-orig randread-reflink seqread-snapshot; do in_workload shared wl_target /m $p; done | xargs)" \
	"/m/bench/orig /m/bench/reflink /m/snap/bench/orig"
same "shared: every side promises 8192 extents, all shared" "$(in_workload shared wl_checks /m | awk '{print $1, $3, $4, $5}' | xargs)" \
	"orig 8192 - 8192 reflink 8192 - 8192 snapshot 8192 - 8192"

echo "== groupsweep"
same "groupsweep: default phases" "$(in_workload groupsweep wl_phases | xargs)" \
	"seqread-g1 seqread-g4 seqread-g16 seqread-g64 seqread-g256 seqread-g4096 seqread-g0"
same "groupsweep: GROUP_SIZES override" "$(GROUP_SIZES="16 1 0" in_workload groupsweep wl_phases | xargs)" "seqread-g16 seqread-g1 seqread-g0"
same "groupsweep: a point that is not a number gives no phases" "$(GROUP_SIZES="1 x" in_workload groupsweep wl_phases 2>/dev/null)" ""
same "groupsweep: a point twice gives no phases" "$(GROUP_SIZES="4 1 04" in_workload groupsweep wl_phases 2>/dev/null)" ""
same "groupsweep: profile phase is the last point (no bound)" "$(in_workload groupsweep wl_profile_phase)" "seqread-g0"
same "groupsweep: every point's read is counted" "$(GROUP_SIZES="1 64" in_workload groupsweep wl_count_phases | xargs)" "seqread-g1 seqread-g64"
mounts=$(mktemp)
printf '%s\n' "/dev/vdd /x btrfs rw,relatime,space_cache=v2,fscrypt_per_extent_keys,subvolid=5,subvol=/ 0 0" \
	"/dev/vde /y btrfs rw,relatime,space_cache=v2,fscrypt_per_inode_keys,subvolid=5,subvol=/ 0 0" >"$mounts"
same "groupsweep: which mounts remount per point (per-extent keys)" \
	"$(for m in /x /y /z; do PROC_MOUNTS=$mounts in_workload groupsweep per_extent_mount $m && echo "$m"; done | xargs)" "/x"
rm -f "$mounts"
same "groupsweep: a file per point, each checked once" "$(in_workload groupsweep wl_checks /x seqread-g1 seqread-g0 seqread-g1)" \
	"g1 /x/bench/frag-g1 16384 - 0
g0 /x/bench/frag-g0 16384 - 0"
same "groupsweep: targets" "$(in_workload groupsweep wl_target /y seqread-g4096)" "/y/bench/frag-g4096"

echo "== rekey and rekeytime"
same "rekey: phases" "$(in_workload rekey wl_phases | xargs)" "seqread-onekey seqread-twokeys randread-onekey randread-twokeys"
same "rekey: every read is counted, none is a command" "$(in_workload rekey wl_count_phases | xargs)|$(in_workload rekey wl_command_phases | xargs)" "seqread-onekey seqread-twokeys randread-onekey randread-twokeys|"
same "rekey: both files in the subvolume, each promised MIN_EXTENTS" "$(in_workload rekey wl_checks /m)" "twokeys /m/sv/bench/twokeys 16384 - 0
onekey /m/sv/bench/onekey 16384 - 0"
same "rekey: targets" "$(in_workload rekey wl_target /m seqread-twokeys) $(in_workload rekey wl_target /m randread-onekey)" "/m/sv/bench/twokeys /m/sv/bench/onekey"
same "rekey: a pass's list: every other block once, each write synced" "$(in_workload rekey rk_iolog /f 1 8 | awk '$2 == "write" { print $3 / 4096 }' | sort -n | xargs) $(in_workload rekey rk_iolog /f 0 8 | grep -c ' sync ')" "1 3 5 7 4"
same "rekey: a pass's list is the same every time (fixed seed)" "$(in_workload rekey rk_iolog /f 0 64 | md5sum)" "$(in_workload rekey rk_iolog /f 0 64 | md5sum)"
same "rekeytime: default points, all command phases" "$(in_workload rekeytime wl_phases | xargs)|$(in_workload rekeytime wl_command_phases | xargs)" "rekey-n1000 rekey-n10000 rekey-n100000|rekey-n1000 rekey-n10000 rekey-n100000"
same "rekeytime: REKEY_NAMES override, profile phase the last point" "$(REKEY_NAMES="5000 20" in_workload rekeytime wl_phases | xargs) $(REKEY_NAMES="5000 20" in_workload rekeytime wl_profile_phase)" "rekey-n5000 rekey-n20 rekey-n20"
same "rekeytime: a point that is not a number, or twice, gives no phases" "$(REKEY_NAMES="1 x" in_workload rekeytime wl_phases 2>/dev/null)$(REKEY_NAMES="4 04" in_workload rekeytime wl_phases 2>/dev/null)" ""
same "rekeytime: each point's last file, promised empty" "$(REKEY_NAMES="10 2500" in_workload rekeytime wl_checks /m rekey-n10 rekey-n2500)" "n10 /m/rk-n10/d/dir-0000/file-000009 0 0 0
n2500 /m/rk-n2500/d/dir-0002/file-002499 0 0 0"
same "rekeytime: its parameters are recorded" "$(in_workload rekeytime bench_params | xargs)" "REKEY_NAMES=1000 10000 100000 REKEY_DIR_NAMES=1000"

echo "== sequential and fragmented"
same "sequential: at most 64 extents" "$(in_workload sequential wl_checks /m)" "seq /m/bench/seq 1 64 0"
same "fragmented: at least 16384 extents" "$(in_workload fragmented wl_checks /m)" "frag /m/bench/frag 16384 - 0"
same "fragmented: MIN_EXTENTS override" "$(MIN_EXTENTS=100 in_workload fragmented wl_checks /m)" "frag /m/bench/frag 100 - 0"

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
	"per-extent per-extent-key per-inode none per-inode none per-extent"
same "arms a run makes without ARMS: all but the DEFAULT=0 prototype" "$(. "$top/bench/arms.sh"; echo "$DEFAULT_ARMS")" \
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
valid_arm ok"
rm -f "$feat/sys/fs/btrfs/features/encrypt_extent_keys"
same "arms on a kernel without (btrfs-extent and btrfs-extent-key skipped, btrfs-inode without the option)" "$(arm_all "$feat" | grep -E '^btrfs-(extent|inode)' | grep -v '^btrfs-extent-ctxitem')" \
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

if [ "$fails" = 0 ]; then
	echo "bench-workloads: all passed"
else
	echo "bench-workloads: $fails failed"
	exit 1
fi
