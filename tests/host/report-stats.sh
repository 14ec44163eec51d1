#!/bin/bash
# Test of the report generator (reports/): the unit tests of labstats.py,
# then end to end on synthetic runs (made-up fio json+ outputs written by the
# script below, nothing is measured):
#   - generate.py builds index.html, summary.md, results.json and the plots,
#     and copies raw/ next to them; twice gives the same results.json
#   - with the btrfs-extent and btrfs-inode arms skipped, the report says
#     "not measured" with the reason, also in the ratio plot; with profiles,
#     the differential flame graph falls back to ext4-inode vs ext4-plain
#     and says so
#   - known answers: key-object memory from slabinfo before/after, folded
#     stacks and the differential table from synthetic perf script output,
#     scaling cost per 4 KiB block from phases of known throughput; the
#     key work per arm from bench.bt's maps; the comparisons against the
#     main reference arm (btrfs-extent-key/btrfs-inode beside the main one);
#     the groupsweep: ratio, key groups and counts per point, its plot, and
#     no verdict on the files written with bounded key groups
#   (the regression gate, reports/lab/gate.py, is tested by
#   reports/lab/test_gate.py and tests/host/bench-ab.sh)
# Needs Debian's python3 with numpy, scipy and matplotlib (installed here
# when missing, as every make target does with its packages).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
py=/usr/bin/python3
# shellcheck source=tests/lib/host-test.sh
. "$top/tests/lib/host-test.sh"

host_need python3-numpy python3-scipy python3-matplotlib

echo "== unit tests: reports/lab/test_*.py"
# Every test module, so that a new one is never left out.
mods=$(for f in reports/lab/test_*.py; do f=${f%.py}; echo "${f//\//.}"; done)
# shellcheck disable=SC2086 # one word per module
if $py -m unittest -v $mods; then ok "unit tests"; else bad "unit tests"; fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT


mk() { $py -m reports.lab.synthrun "$@" || { bad "building synthetic run $1"; exit 1; }; }
mk "$tmp/base" --seed 1 --extras
mk "$tmp/skipped" --seed 4 --skip btrfs-extent,btrfs-inode
mk "$tmp/skipped-prof" --seed 4 --skip btrfs-extent,btrfs-inode --extras
mk "$tmp/scal" --seed 5 --reps 3 --scaling-phases
mk "$tmp/one" --seed 6 --reps 1
mk "$tmp/gs" --seed 7 --reps 3 --groupsweep
mk "$tmp/nocpu" --seed 8 --no-cpu
mk "$tmp/f2" --seed 8 --format2
mk "$tmp/costly" --seed 9 --cpu-scale btrfs-extent=1.2

expect_rc() { # want-rc name command...
	local want=$1 name=$2 rc
	shift 2
	"$@" >"$tmp/$name.out" 2>&1
	rc=$?
	if [ "$rc" = "$want" ]; then
		ok "$name: exit $rc"
	else
		bad "$name: exit $rc, want $want"
		tail -n 25 "$tmp/$name.out" | sed 's/^/     | /'
	fi
}
has() { # name file regex
	if grep -Eq -- "$3" "$2" 2>/dev/null; then ok "$1"; else bad "$1: no /$3/ in $2"; fi
}
hasnt() { # name file regex
	if grep -Eq -- "$3" "$2" 2>/dev/null; then bad "$1: /$3/ in $2"; else ok "$1"; fi
}

echo "== generate.py"
out=$tmp/report
expect_rc 0 generate-base $py -m reports.lab.generate "$tmp/base" "$out"
for f in index.html summary.md results.json throughput.png latency.png \
	ratio_main.png comparisons.png run_order.png slab.png scaling.png \
	derivations_vs_extents.png bpftrace_lookup_ns.png bpftrace_derive_ns.png \
	memory.png flame-btrfs-extent.svg flame-btrfs-inode.svg flame/btrfs-extent.folded \
	flame-diff-btrfs-extent-vs-btrfs-inode.svg \
	raw/btrfs-extent/rep5/randwrite.json profiles/btrfs-extent/slab.txt; do
	if [ -s "$out/$f" ]; then ok "report has $f"; else bad "report lacks $f"; fi
done
if $py - "$out/results.json" <<'EOF'; then ok "results.json holds per-rep numbers, comparisons, verdicts"; else bad "results.json content"; fi
import json, sys
r = json.load(open(sys.argv[1]))
rep = r["arms"]["btrfs-extent"]["phases"]["seqread"]["reps"]["1"]
assert rep["file"] == "raw/btrfs-extent/rep1/seqread.json", rep["file"]
assert rep["bw_bytes"] > 0 and rep["iops"] > 0 and rep["fio_percentiles_ns"]
assert r["arms"]["ext4-plain"]["phases"]["randwrite"]["bw_bytes"]["n"] == 5
assert r["arms"]["ext4-plain"]["phases"]["randwrite"]["direction"] == "write"
c = [c for c in r["comparisons"] if c["a"] == "btrfs-extent" and c["phase"] == "seqread"][0]
assert c["status"] == "measured" and c["bw"]["ci_lo"] <= c["bw"]["ratio"] <= c["bw"]["ci_hi"]
v = [v for v in r["verdicts"] if v["phase"] == "randread" and v["metric"] == "CPU per MiB"][0]
assert v["status"] in ("met", "not met"), v
assert r["meta"]["run_info"]["kernel_release"] == "6.1.192+"
EOF
if $py - "$out/results.json" <<'EOF'; then ok "results.json: memory of the key objects (known answer)"; else bad "results.json: memory"; fi
import json, sys
m = json.load(open(sys.argv[1]))["memory"]
e = m["btrfs-extent"]["caches"]["fscrypt_extent_info"]
assert (e["active_before"], e["active_after"], e["delta_objs"]) == (0, 16400, 16400), e
assert e["bytes_per_extent"] == 128.0 and e["bytes_after"] == 16400 * 128, e
i = m["btrfs-inode"]["caches"]["fscrypt_info"]
assert (i["delta_objs"], i["delta_bytes"], i["held_after"]) == (1, 136, 65 * 136), i
assert m["btrfs-inode"]["caches"]["fscrypt_extent_info"]["delta_objs"] == 0
assert m["btrfs-plain"]["caches"]["fscrypt_info"]["delta_objs"] == 0
EOF
if $py - "$out/results.json" <<'EOF'; then ok "results.json: flame graphs and differential (known answer)"; else bad "results.json: flames"; fi
import json, sys
f = json.load(open(sys.argv[1]))["flames"]
a = f["arms"]["btrfs-extent"]
assert (a["busy_samples"], a["idle_samples"]) == (100, 50), a
d = f["diff"]
assert (d["target"], d["base"], d["main"]) == ("btrfs-extent", "btrfs-inode", True), d
top = d["top"][0]
assert top["function"] == "aesni_xts_decrypt", top  # 0.70 vs 1.00: -0.30
assert abs(top["self_delta"] + 0.30) < 1e-12, top
lookup = [r for r in d["top"] if r["function"] == "fscrypt_get_extent_info"][0]
assert (lookup["self_target"], lookup["self_base"]) == (0.30, 0.0), lookup
EOF
has "folded stacks: caller first, offsets dropped" "$out/flame/btrfs-extent.folded" '^fio;vfs_read;btrfs_submit_bio;fscrypt_get_extent_info 30$'
has "summary.md: differential table" "$out/summary.md" '^\| `fscrypt_get_extent_info` \| 30\.00 \| 0\.00 \| \+30\.00 \|'
has "summary.md: memory table" "$out/summary.md" '^\| btrfs-extent \| `fscrypt_extent_info` \| 0 \| 16400 \| \+16400 \| 128 \| 2050\.0 \| 128\.00 \|'
has "index.html: links the flame graphs" "$out/index.html" '<a href="flame-diff-btrfs-extent-vs-btrfs-inode.svg">'
has "flame SVG: frame with its share" "$out/flame-btrfs-extent.svg" '<title>fscrypt_get_extent_info: 30 samples, 30.00%'
has "summary.md: TCG note" "$out/summary.md" "not hardware times"
# shellcheck disable=SC2016 # the backquotes are Markdown, not shell
has "summary.md: raw file line" "$out/summary.md" 'raw data: `raw/<arm>/rep<N>/seqread.json`'
has "summary.md: throughput table" "$out/summary.md" '^\| btrfs-extent \| btrfs-inode \| 5 \|'
has "summary.md: verdicts" "$out/summary.md" 'randread CPU cost per MiB, per-extent .* goal ≤ 1.03: \*\*(met|not met)\*\*.*Beside it \(not deciding\): throughput'
has "summary.md: config hash" "$out/summary.md" 'feedbeef'
has "index.html: job files collapsed" "$out/index.html" '<details><summary>fio job file seqread.fio'
has "index.html: plots" "$out/index.html" '<img src="ratio_main.png"'
has "summary.md: one key per extent against per-inode keys beside the main comparison" "$out/summary.md" \
	'^\| btrfs-extent-key / btrfs-inode \| seqread \| 0\.7[0-9]+ \|'
has "summary.md: key work per arm (known answer)" "$out/summary.md" \
	'^\| btrfs-extent \| 16400 \| 16400 \(1\) \| 1 \| 16399 \| 16401 \(0\) \| 2 \| 0 \| 4: extents 3, new 1 \|'
has "summary.md: key work of an unencrypted arm is zeros, not missing" "$out/summary.md" \
	'^\| btrfs-plain \| 16400 \| 0 \(0\) \| 0 \| 0 \| 0 \(0\) \| 0 \| 0 \| 0: - \|'
cp "$out/results.json" "$tmp/results1.json"
touch "$out/flame-diff-stale-vs-old.svg" "$out/stale.png"
expect_rc 0 generate-again $py -m reports.lab.generate "$tmp/base" "$out"
if [ -e "$out/flame-diff-stale-vs-old.svg" ] || [ -e "$out/stale.png" ]; then
	bad "a second report in the same directory keeps stale plots"
else
	ok "a second report in the same directory removes stale plots"
fi
if cmp -s "$tmp/results1.json" "$out/results.json"; then ok "results.json identical on a second run"; else bad "results.json differs between two runs"; fi

out=$tmp/report-skipped
expect_rc 0 generate-skipped $py -m reports.lab.generate "$tmp/skipped" "$out"
has "skipped: verdict not measured" "$out/summary.md" 'seqread CPU cost per MiB.*not measured \(btrfs-extent skipped: kernel has no btrfs encryption'
has "skipped: own section" "$out/summary.md" '^- \*\*btrfs-inode\*\*: kernel has no btrfs'
has "skipped: profiles not collected" "$out/summary.md" 'not collected'
if [ -s "$out/ratio_main.png" ]; then ok "skipped: ratio plot still made"; else bad "skipped: no ratio plot"; fi
has "skipped: ratio plot labelled not measured" "$out/summary.md" 'per-extent / per-inode ratio: not measured'
hasnt "skipped: no flame graphs without profiles" "$out/summary.md" 'flame-diff'

out=$tmp/report-skipped-prof
expect_rc 0 generate-skipped-prof $py -m reports.lab.generate "$tmp/skipped-prof" "$out"
for f in flame-diff-ext4-inode-vs-ext4-plain.svg memory.png bpftrace_lookup_ns.png; do
	if [ -s "$out/$f" ]; then ok "skipped-prof: report has $f"; else bad "skipped-prof: report lacks $f"; fi
done
has "skipped-prof: differential flame graph says it is not the main one" "$out/summary.md" 'This is ext4-inode against ext4-plain, not btrfs-extent against btrfs-inode'
has "skipped-prof: memory rows of skipped arms" "$out/summary.md" '^\| btrfs-extent \| - \| skipped: kernel has no btrfs encryption'
has "skipped-prof: flame table row of skipped arm" "$out/summary.md" '^\| btrfs-inode \| skipped: kernel has no btrfs'

out=$tmp/report-scal
expect_rc 0 generate-scaling $py -m reports.lab.generate "$tmp/scal" "$out"
if [ -s "$out/scaling.png" ]; then ok "scaling: cost plot"; else bad "scaling: no scaling.png"; fi
if $py - "$out/results.json" <<'EOF'; then ok "scaling: cost per 4 KiB and FIEMAP extents (known answer)"; else bad "scaling: results.json"; fi
import json, sys
r = json.load(open(sys.argv[1]))
assert r["workload_kind"] == "scaling", r["workload_kind"]
s = r["workload"]
assert s["source"] == "phases", s["source"]
pts = s["reads"]["seqread"]["btrfs-inode"]  # relative speed 1.0
assert [p["nominal"] for p in pts] == [1024, 4096]
assert [p["extents"] for p in pts] == [1044, 4116], pts  # median of n+10, n+20, n+30
assert abs(pts[0]["cost_us_per_4k"]["median"] - 10.0) < 1e-6, pts[0]
assert abs(pts[1]["cost_us_per_4k"]["median"] - 20.0) < 1e-6, pts[1]
assert pts[0]["files"][0] == "raw/btrfs-inode/rep1/seqread-e1024.json"
EOF
has "scaling: table row" "$out/summary.md" '^\| seqread \| btrfs-inode \| 4096 \| 4116 \| 3 \| .* \| 20\.0 \| 20\.0-20\.0 \| 2\.000 \|'
out=$tmp/report-gs
expect_rc 0 generate-groupsweep $py -m reports.lab.generate "$tmp/gs" "$out"
if [ -s "$out/groupsweep.png" ]; then ok "groupsweep: plot"; else bad "groupsweep: no groupsweep.png"; fi
if $py - "$out/results.json" <<'EOF'; then ok "groupsweep: ratio, groups and counts per point (known answer)"; else bad "groupsweep: results.json"; fi
import json, sys
r = json.load(open(sys.argv[1]))
assert r["workload_kind"] == "groupsweep", r["workload_kind"]
sw = r["workload"]["sweeps"]
assert [(s["a"], s["b"], s["kind"]) for s in sw] == [("btrfs-extent", "btrfs-inode", "seqread")], sw
pts = sw[0]["points"]
assert [p["n"] for p in pts] == [1, 16, 0], pts          # no bound last
assert [p["x"] for p in pts] == [1, 16, 17408], pts      # no bound: the whole file
assert [round(p["ratio"], 6) for p in pts] == [0.5, 0.9, 0.98], pts
assert [p["groups_expected"] for p in pts] == [17408, 1088, 1], pts
assert [p["write_counts"]["key_setups_derived"] for p in pts] == [17408, 1088, 1], pts
assert [p["write_counts"]["group_starts"] for p in pts] == [0, 1088, 1], pts  # N = 1: no groups
assert [p["read_counts"]["key_setups_derived"] for p in pts] == [17408, 1088, 1], pts
assert [p["read_counts"]["slot_programs"] for p in pts] == [17408, 17408, 1], pts
assert pts[0]["ci_supported"] and pts[0]["not_conclusive"] == "not conclusive (n = 3)"
v = r["verdicts"]
assert v[-1]["status"] == "not judged" and v[-1]["phases"] == ["seqread-g1", "seqread-g16"], v[-1]
assert {x["phase"] for x in v[:-1]} == {"seqread-g0"}, v  # the main verdicts first
EOF
has "groupsweep: table row of the point N = 16" "$out/summary.md" \
	'^\| 16 \| 17408 \| 1088 \| 1088 \| 1088 \| 85\.83 \| 95\.37 \| 0\.900 \| 0\.900-0\.900 \(not conclusive \(n = 3\)\) \| 1088 \| 17408 \| 17408 \|'
has "groupsweep: no bound row" "$out/summary.md" '^\| 0 \(no bound\) \| 17408 \| 1 \| 1 \| 1 \|'
has "groupsweep: counted passes table" "$out/summary.md" '^\| btrfs-extent \| `write-g16` \| 0 \| 1088 \| 0 \| 0 \(0\) \| 0 \| 0 \| 1088: extents 1087, new 1 \| 0 \|'
has "groupsweep: bounded points not judged" "$out/summary.md" '^- seqread-g1, seqread-g16: not judged against the goals'
hasnt "groupsweep: no verdict on a bounded point" "$out/summary.md" '^- seqread-g1 throughput'

out=$tmp/report-one
expect_rc 0 generate-one-rep $py -m reports.lab.generate "$tmp/one" "$out"
if [ "$(grep -c '^- .*per-extent ÷ per-inode.*\*\*not conclusive (n = 1)\*\*' "$out/summary.md")" = 3 ]; then
	ok "one rep: all 3 verdicts not conclusive (n = 1)"
else
	bad "one rep: not every verdict says not conclusive (n = 1)"
fi
hasnt "one rep: no CI in the verdicts" "$out/summary.md" '^- .*per-extent ÷ per-inode.*\(95% CI'
has "one rep: says how many reps a verdict needs" "$out/summary.md" 'a verdict needs at least 4 paired reps'
expect_rc 2 generate-no-meta $py -m reports.lab.generate "$tmp/nonexistent" "$tmp/x"

echo "== CPU cost, and runs without it"
out=$tmp/report
has "summary.md: CPU table row" "$out/summary.md" '^\| btrfs-extent \| btrfs-inode \| 5 \| [0-9.]+ \| [0-9.]+% \| [0-9.]+ \| [0-9]+ \| 1\.0[0-9]+ \| '
if [ -s "$out/cpu.png" ] && [ -s "$out/cpu.tsv" ]; then ok "report has cpu.png and cpu.tsv"; else bad "report lacks cpu.png or cpu.tsv"; fi
for r in nocpu f2; do
	expect_rc 0 "generate-$r" $py -m reports.lab.generate "$tmp/$r" "$tmp/report-$r"
	has "$r: verdicts fall back to throughput, labelled" "$tmp/report-$r/summary.md" '^- randread throughput, per-extent .* goal ≥ 0.97: \*\*(met|not met|undecided)\*\*.*\[old metric: '
	hasnt "$r: no CPU verdict" "$tmp/report-$r/summary.md" '^- .*CPU cost per MiB'
done
has "f2: says where the arm definitions came from" "$tmp/report-f2/summary.md" 'FORMAT2_ARMS'
expect_rc 0 generate-costly $py -m reports.lab.generate "$tmp/costly" "$tmp/report-costly"
has "costly: 20% more CPU per MiB fails the goal, throughput beside it not failed" "$tmp/report-costly/summary.md" \
	'^- seqread CPU cost per MiB, per-extent .*: 1\.2[0-9]+ \(95% CI [0-9.-]+\), goal ≤ 1.03: \*\*not met\*\*\. Beside it \(not deciding\): throughput 0\.9[0-9]+ \(95% CI [0-9.-]+; goal ≥ 0.97: (met|undecided)\)'

if [ "$fails" = 0 ]; then
	echo "report-stats: all passed"
else
	echo "report-stats: $fails failed"
	exit 1
fi
