#!/bin/bash
# Test of the report generator (reports/): the unit tests of labstats.py,
# then end to end on synthetic runs (made-up fio json+ outputs written by the
# script below, nothing is measured):
#   - generate.py builds index.html, summary.md, results.json and the plots,
#     and copies raw/ next to them; twice gives the same results.json
#   - with the btrfs-extent and btrfs-inode arms skipped, the report says
#     "not measured" with the reason and draws no ratio plot
#   - check.py: a baseline made from one run; another run of the same
#     distribution passes (0); a run whose btrfs-extent throughput is 20%
#     lower fails (1); a run with skipped arms passes with "not tracked";
#     missing inputs are usage errors (2)
# Needs Debian's python3 with numpy, scipy and matplotlib (installed here
# when missing, as every make target does with its packages).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
py=/usr/bin/python3
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

missing=$(for p in python3-numpy python3-scipy python3-matplotlib; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
done)
if [ -n "$missing" ]; then
	missing=$(echo "$missing" | paste -sd' ' -)
	echo "apt: installing $missing"
	# shellcheck disable=SC2086
	if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends $missing >/dev/null; }; then
		echo "FAIL apt-get could not install: $missing (run as root, with working apt sources)"
		exit 1
	fi
fi

echo "== unit tests: reports/test_labstats.py"
if $py -m unittest -v reports.test_labstats; then ok "unit tests"; else bad "unit tests"; fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Synthetic RUN_DIR: meta.json, raw/<arm>/rep<N>/<phase>.json in fio
# json+ form (a text line before the JSON, as fio prints), and optionally
# profiles/, scaling.json and extent counts.
cat >"$tmp/mkrun.py" <<'EOF'
import argparse, json, math, os
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("run_dir")
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--scale", action="append", default=[], help="ARM=FACTOR")
ap.add_argument("--skip", default="", help="arms to skip, comma-separated")
ap.add_argument("--extras", action="store_true",
                help="also profiles/, scaling.json, extent_counts")
a = ap.parse_args()
rng = np.random.default_rng(a.seed)
scale = {k: float(v) for k, v in (s.split("=") for s in a.scale)}
skip = set(filter(None, a.skip.split(",")))
ARMS = {  # fs, mkfs, encrypted, relative speed
    "btrfs-extent": ("btrfs", "mkfs.btrfs -f", True, 0.985),
    "btrfs-inode": ("btrfs", "mkfs.btrfs -f", True, 1.0),
    "btrfs-plain": ("btrfs", "mkfs.btrfs -f", False, 1.10),
    "ext4-inode": ("ext4", "mkfs.ext4 -O encrypt", True, 1.05),
    "ext4-plain": ("ext4", "mkfs.ext4", False, 1.15),
}
PHASES = {"seqread": ("read", 40e6, 131072), "randread": ("read", 6e6, 4096),
          "randwrite": ("write", 4e6, 4096)}
PCTS = ["1.000000", "5.000000", "10.000000", "20.000000", "30.000000",
        "40.000000", "50.000000", "60.000000", "70.000000", "80.000000",
        "90.000000", "95.000000", "99.000000", "99.500000", "99.900000",
        "99.950000", "99.990000"]

def bucket(v):  # fio-like: 6 significant bits per bin
    v = int(v)
    s = max(0, v.bit_length() - 7)
    return (v >> s) << s

def side(bw, bs, lat_scale, n=4000):
    lat = rng.lognormal(math.log(bs / bw * 1e9), 0.35, n) * lat_scale
    lat[: n // 200] *= 8
    b = np.sort([bucket(v) for v in lat])
    keys, counts = np.unique(b, return_counts=True)
    io = int(bw * 30)
    return {"io_bytes": io, "io_kbytes": io // 1024, "bw_bytes": int(bw),
            "bw": int(bw / 1024), "iops": bw / bs, "runtime": 30000,
            "total_ios": n,
            "clat_ns": {"min": int(lat.min()), "max": int(lat.max()),
                        "mean": float(lat.mean()), "stddev": float(lat.std()),
                        "N": n,
                        "percentile": {p: int(b[max(0, math.ceil(float(p) / 100 * n) - 1)])
                                       for p in PCTS},
                        "bins": {str(int(k)): int(c) for k, c in zip(keys, counts)}}}

def idle():
    return {"io_bytes": 0, "io_kbytes": 0, "bw_bytes": 0, "bw": 0,
            "iops": 0.0, "runtime": 0, "total_ios": 0,
            "clat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0}}

meta_arms, order = {}, []
for arm, (fs, mkfs, enc, _) in ARMS.items():
    meta_arms[arm] = ({"status": "skipped",
                       "reason": "kernel has no btrfs encryption yet (issue #4)"}
                      if arm in skip else
                      {"status": "measured", "fs": fs, "mkfs": mkfs,
                       "mount": "", "encrypted": enc})
measured = [x for x in ARMS if x not in skip]
for rep in range(1, a.reps + 1):
    for arm in measured:
        order.append([arm, rep])
        f = ARMS[arm][3] * scale.get(arm, 1.0)
        d = os.path.join(a.run_dir, "raw", arm, f"rep{rep}")
        os.makedirs(d, exist_ok=True)
        for ph, (direction, base, bs) in PHASES.items():
            job = {"jobname": ph, "groupid": 0, "error": 0,
                   "read": idle(), "write": idle(), "trim": idle()}
            job[direction] = side(base * f * rng.normal(1.0, 0.01), bs, 1 / f)
            with open(os.path.join(d, ph + ".json"), "w") as fh:
                fh.write("note: both iodepth >= 1 and synchronous I/O engine "
                         "are selected, queue depth will be capped at 1\n")
                json.dump({"fio version": "fio-3.33", "jobs": [job]}, fh)
meta = {"workload": "fragmented", "date": "2026-12-03T02:00:00Z",
        "reps": a.reps, "phases": list(PHASES), "arms": meta_arms,
        "order": order,
        "run_info": {"accel": "tcg", "cpus": "2", "mem_mb": "3072",
                     "qemu_cmdline": "qemu-system-x86_64 -accel tcg -smp 2 -m 3072",
                     "kernel_release": "6.1.192+", "kernel_series_hash": "0123abc",
                     "kernel_config_sha256": "feedbeef", "elapsed_s": "1234"},
        "fio_version": "fio-3.33",
        "jobfiles": {ph + ".fio": f"[{ph}]\nrw={ph}\nfilename=/mnt/test/file\n"
                     for ph in PHASES},
        "min_extents": 16384}
if a.extras:
    meta["extent_counts"] = {arm: [16400 + r for r in range(a.reps)]
                             for arm in measured}
    for arm in measured:
        d = os.path.join(a.run_dir, "profiles", arm)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "bpftrace.json"), "w") as fh:
            fh.write('{"type": "attached_probes", "data": {"probes": 4}}\n')
            if ARMS[arm][2]:
                der = 16400 if arm == "btrfs-extent" else 3
                fh.write(json.dumps({"type": "map", "data": {
                    "@derive_by_context": {"1": der, "2": 1}}}) + "\n")
                for name, mu in (("@lookup_ns", 2000), ("@derive_ns", 9000)):
                    bk = [{"min": 2 ** i, "max": 2 ** (i + 1) - 1,
                           "count": int(1000 * math.exp(-((2 ** i - mu) / mu) ** 2))}
                          for i in range(8, 17)]
                    fh.write(json.dumps({"type": "hist", "data": {name: bk}}) + "\n")
        with open(os.path.join(d, "slab.txt"), "w") as fh:
            fh.write("slabinfo - version: 2.1\n# name <active_objs> <num_objs> "
                     "<objsize> <objperslab> <pagesperslab> : tunables <limit> "
                     "<batchcount> <sharedfactor> : slabdata <active_slabs> "
                     "<num_slabs> <sharedavail>\n")
            for cache, size, n in (("fscrypt_info", 136, 17000 if arm == "btrfs-extent" else 60),
                                   ("btrfs_inode", 1080, 300),
                                   ("ext4_inode_cache", 1160, 280),
                                   ("kmalloc-64", 64, 9000), ("dentry", 192, 5000)):
                fh.write(f"{cache:<18} {n} {n} {size} 30 1 : tunables 0 0 0 : slabdata 10 10 0\n")
        with open(os.path.join(d, "perf-stat.txt"), "w") as fh:
            fh.write(" Performance counter stats for 'fio':\n\n  1,234.5 msec task-clock\n")
    with open(os.path.join(a.run_dir, "scaling.json"), "w") as fh:
        json.dump({arm: [{"extents": e, "bw_bytes": [
            40e6 * ARMS[arm][3] / (1 + (0.02 if arm == "btrfs-extent" else 0.005)
                                   * math.log10(e)) * rng.normal(1, 0.01)
            for _ in range(3)]} for e in (1, 100, 1000, 10000, 100000)]
                   for arm in measured if arm.startswith("btrfs")}, fh)
with open(os.path.join(a.run_dir, "meta.json"), "w") as fh:
    json.dump(meta, fh, indent=1)
EOF

mk() { $py "$tmp/mkrun.py" "$@" || { bad "building synthetic run $1"; exit 1; }; }
mk "$tmp/base" --seed 1 --extras
mk "$tmp/same" --seed 2
mk "$tmp/regressed" --seed 3 --scale btrfs-extent=0.8
mk "$tmp/skipped" --seed 4 --skip btrfs-extent,btrfs-inode

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
expect_rc 0 generate-base $py reports/generate.py "$tmp/base" "$out"
for f in index.html summary.md results.json throughput.png latency.png \
	ratio_extent_inode.png comparisons.png run_order.png slab.png scaling.png \
	derivations_vs_extents.png bpftrace_lookup_ns.png bpftrace_derive_ns.png \
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
v = [v for v in r["verdicts"] if v["phase"] == "randread" and v["metric"] == "throughput"][0]
assert v["status"] in ("met", "not met"), v
assert r["meta"]["run_info"]["kernel_release"] == "6.1.192+"
EOF
has "summary.md: TCG note" "$out/summary.md" "not hardware times"
# shellcheck disable=SC2016 # the backquotes are Markdown, not shell
has "summary.md: raw file line" "$out/summary.md" 'raw data: `raw/<arm>/rep<N>/seqread.json`'
has "summary.md: throughput table" "$out/summary.md" '^\| btrfs-extent \| btrfs-inode \| 5 \|'
has "summary.md: verdicts" "$out/summary.md" 'randread throughput, per-extent .* goal ≥ 0.97: \*\*(met|not met)\*\*'
has "summary.md: config hash" "$out/summary.md" 'feedbeef'
has "index.html: job files collapsed" "$out/index.html" '<details><summary>fio job file seqread.fio'
has "index.html: plots" "$out/index.html" '<img src="ratio_extent_inode.png"'
cp "$out/results.json" "$tmp/results1.json"
expect_rc 0 generate-again $py reports/generate.py "$tmp/base" "$out"
if cmp -s "$tmp/results1.json" "$out/results.json"; then ok "results.json identical on a second run"; else bad "results.json differs between two runs"; fi

out=$tmp/report-skipped
expect_rc 0 generate-skipped $py reports/generate.py "$tmp/skipped" "$out"
has "skipped: verdict not measured" "$out/summary.md" 'seqread throughput.*not measured \(btrfs-extent skipped: kernel has no btrfs encryption'
has "skipped: own section" "$out/summary.md" '^- \*\*btrfs-inode\*\*: kernel has no btrfs'
has "skipped: profiles not collected" "$out/summary.md" 'not collected'
if [ -e "$out/ratio_extent_inode.png" ]; then bad "skipped: ratio plot drawn"; else ok "skipped: no ratio plot"; fi
expect_rc 2 generate-no-meta $py reports/generate.py "$tmp/nonexistent" "$tmp/x"

echo "== check.py"
base=$tmp/baseline.json
expect_rc 0 make-baseline $py reports/check.py --make-baseline "$tmp/base" "$base"
has "baseline tracks the main ratio" "$base" '"btrfs-extent/btrfs-inode"'
expect_rc 0 check-unchanged $py reports/check.py "$tmp/same" "$base"
hasnt "unchanged: no regression line" "$tmp/check-unchanged.out" 'REGRESSION'
expect_rc 1 check-regressed $py reports/check.py "$tmp/regressed" "$base"
has "regressed: main ratio flagged" "$tmp/check-regressed.out" '^btrfs-extent/btrfs-inode +seqread .*-2[0-9]\.[0-9]+% +0\.0079 +yes +REGRESSION'
hasnt "regressed: ext4 ratio not flagged" "$tmp/check-regressed.out" '^ext4-inode/ext4-plain .*REGRESSION'
expect_rc 0 check-regressed-threshold-30 $py reports/check.py "$tmp/regressed" "$base" --threshold 30
expect_rc 0 check-skipped $py reports/check.py "$tmp/skipped" "$base"
has "skipped: not tracked" "$tmp/check-skipped.out" 'btrfs-extent/btrfs-inode +seqread .*not tracked: skipped'
expect_rc 2 check-no-run $py reports/check.py "$tmp/nonexistent" "$base"
echo '{"ratios": {}}' >"$tmp/empty-baseline.json"
expect_rc 2 check-bad-baseline $py reports/check.py "$tmp/same" "$tmp/empty-baseline.json"
expect_rc 2 check-usage $py reports/check.py "$tmp/same"

if [ "$fails" = 0 ]; then
	echo "report-stats: all passed"
else
	echo "report-stats: $fails failed"
	exit 1
fi
