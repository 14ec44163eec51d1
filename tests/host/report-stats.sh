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
#     scaling cost per 4 KiB block from phases of known throughput
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

echo "== unit tests: reports/test_labstats.py, reports/test_flame.py"
if $py -m unittest -v reports.test_labstats reports.test_flame; then ok "unit tests"; else bad "unit tests"; fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Synthetic RUN_DIR: meta.json, raw/<arm>/rep<N>/<phase>.json in fio
# json+ form (a text line before the JSON, as fio prints), and optionally
# profiles/, scaling.json and extent counts.
cat >"$tmp/mkrun.py" <<'EOF'
import argparse, gzip, json, math, os
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("run_dir")
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--scale", action="append", default=[], help="ARM=FACTOR")
ap.add_argument("--skip", default="", help="arms to skip, comma-separated")
ap.add_argument("--scaling-phases", action="store_true",
                help="phases seqread-e1024 and seqread-e4096 of exactly "
                     "known throughput, with FIEMAP checks (the scaling "
                     "workload's layout)")
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
if a.scaling_phases:
    # 4096 bytes per 10 us, and per 20 us: cost 10 and 20 us per 4 KiB
    PHASES = {"seqread-e1024": ("read", 409.6e6, 131072),
              "seqread-e4096": ("read", 204.8e6, 131072)}
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
            noise = 1.0 if a.scaling_phases else rng.normal(1.0, 0.01)
            job[direction] = side(base * f * noise, bs, 1 / f)
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
if a.scaling_phases:
    meta["workload"] = "scaling"
    meta["extent_checks"] = [
        {"arm": arm, "rep": rep, "label": f"e{n}", "extents": n + 10 * rep,
         "shared": 0, "min": n, "max": None, "path": f"/m/frag-e{n}"}
        for arm in measured for rep in range(1, a.reps + 1)
        for n in (1024, 4096)]
if a.extras:
    meta["extent_counts"] = {arm: [16400 + r for r in range(a.reps)]
                             for arm in measured}
    meta["profile_phase"] = "randread"
    meta["profiled_extent_counts"] = {arm: {"frag": 16400}
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
        # per-extent infos: 16400 more after the read on btrfs-extent (one
        # per extent: 128 bytes per extent), none elsewhere; one more
        # fscrypt_info on the encrypted arms
        for fname, after in (("slab-before.txt", False), ("slab.txt", True)):
            with open(os.path.join(d, fname), "w") as fh:
                fh.write("slabinfo - version: 2.1\n# name <active_objs> <num_objs> "
                         "<objsize> <objperslab> <pagesperslab> : tunables <limit> "
                         "<batchcount> <sharedfactor> : slabdata <active_slabs> "
                         "<num_slabs> <sharedavail>\n")
                ext = 16400 if after and arm == "btrfs-extent" else 0
                inf = 60 + (1 if after and ARMS[arm][2] else 0)
                for cache, size, n in (("fscrypt_extent_info", 128, ext),
                                       ("fscrypt_info", 136, inf),
                                       ("btrfs_inode", 1080, 300),
                                       ("ext4_inode_cache", 1160, 280),
                                       ("kmalloc-64", 64, 9000), ("dentry", 192, 5000)):
                    fh.write(f"{cache:<18} {n} {n + 4} {size} 30 1 : tunables 0 0 0 : slabdata 10 10 0\n")
        # perf script -g output: btrfs-extent spends 30 of its 100 busy
        # samples in the per-extent lookup, btrfs-inode none; 50 idle each
        stacks = [("fio", ["fscrypt_get_extent_info", "btrfs_submit_bio",
                           "vfs_read"], 30 if arm == "btrfs-extent" else 0),
                  ("kworker/u4:1-btrfs-endio",
                   ["aesni_xts_decrypt", "fscrypt_decrypt_bio",
                    "process_one_work"], 70 if arm == "btrfs-extent" else 100),
                  ("swapper", ["default_idle", "do_idle"], 50)]
        with gzip.open(os.path.join(d, "perf-script.txt.gz"), "wt") as fh:
            t = 0
            for comm, frames, n in stacks:
                for _ in range(n):
                    t += 1
                    fh.write(f"{comm} 42 [000] {t / 1000:.6f}: 2004008 cpu-clock:\n")
                    for i, fr in enumerate(frames):
                        fh.write(f"\tffffffff8100{i:04x} {fr}+0x{i + 1:x} ([kernel.kallsyms])\n")
                    fh.write("\n")
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
mk "$tmp/skipped-prof" --seed 4 --skip btrfs-extent,btrfs-inode --extras
mk "$tmp/scal" --seed 5 --reps 3 --scaling-phases

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
v = [v for v in r["verdicts"] if v["phase"] == "randread" and v["metric"] == "throughput"][0]
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
has "summary.md: verdicts" "$out/summary.md" 'randread throughput, per-extent .* goal ≥ 0.97: \*\*(met|not met)\*\*'
has "summary.md: config hash" "$out/summary.md" 'feedbeef'
has "index.html: job files collapsed" "$out/index.html" '<details><summary>fio job file seqread.fio'
has "index.html: plots" "$out/index.html" '<img src="ratio_extent_inode.png"'
cp "$out/results.json" "$tmp/results1.json"
touch "$out/flame-diff-stale-vs-old.svg" "$out/stale.png"
expect_rc 0 generate-again $py reports/generate.py "$tmp/base" "$out"
if [ -e "$out/flame-diff-stale-vs-old.svg" ] || [ -e "$out/stale.png" ]; then
	bad "a second report in the same directory keeps stale plots"
else
	ok "a second report in the same directory removes stale plots"
fi
if cmp -s "$tmp/results1.json" "$out/results.json"; then ok "results.json identical on a second run"; else bad "results.json differs between two runs"; fi

out=$tmp/report-skipped
expect_rc 0 generate-skipped $py reports/generate.py "$tmp/skipped" "$out"
has "skipped: verdict not measured" "$out/summary.md" 'seqread throughput.*not measured \(btrfs-extent skipped: kernel has no btrfs encryption'
has "skipped: own section" "$out/summary.md" '^- \*\*btrfs-inode\*\*: kernel has no btrfs'
has "skipped: profiles not collected" "$out/summary.md" 'not collected'
if [ -s "$out/ratio_extent_inode.png" ]; then ok "skipped: ratio plot still made"; else bad "skipped: no ratio plot"; fi
has "skipped: ratio plot labelled not measured" "$out/summary.md" 'per-extent / per-inode ratio: not measured'
hasnt "skipped: no flame graphs without profiles" "$out/summary.md" 'flame-diff'

out=$tmp/report-skipped-prof
expect_rc 0 generate-skipped-prof $py reports/generate.py "$tmp/skipped-prof" "$out"
for f in flame-diff-ext4-inode-vs-ext4-plain.svg memory.png bpftrace_lookup_ns.png; do
	if [ -s "$out/$f" ]; then ok "skipped-prof: report has $f"; else bad "skipped-prof: report lacks $f"; fi
done
has "skipped-prof: differential flame graph says it is not the main one" "$out/summary.md" 'This is ext4-inode against ext4-plain, not btrfs-extent against btrfs-inode'
has "skipped-prof: memory rows of skipped arms" "$out/summary.md" '^\| btrfs-extent \| - \| skipped: kernel has no btrfs encryption'
has "skipped-prof: flame table row of skipped arm" "$out/summary.md" '^\| btrfs-inode \| skipped: kernel has no btrfs'

out=$tmp/report-scal
expect_rc 0 generate-scaling $py reports/generate.py "$tmp/scal" "$out"
if [ -s "$out/scaling.png" ]; then ok "scaling: cost plot"; else bad "scaling: no scaling.png"; fi
if $py - "$out/results.json" <<'EOF'; then ok "scaling: cost per 4 KiB and FIEMAP extents (known answer)"; else bad "scaling: results.json"; fi
import json, sys
s = json.load(open(sys.argv[1]))["scaling"]
assert s["source"] == "phases", s["source"]
pts = s["reads"]["seqread"]["btrfs-inode"]  # relative speed 1.0
assert [p["nominal"] for p in pts] == [1024, 4096]
assert [p["extents"] for p in pts] == [1044, 4116], pts  # median of n+10, n+20, n+30
assert abs(pts[0]["cost_us_per_4k"]["median"] - 10.0) < 1e-6, pts[0]
assert abs(pts[1]["cost_us_per_4k"]["median"] - 20.0) < 1e-6, pts[1]
assert pts[0]["files"][0] == "raw/btrfs-inode/rep1/seqread-e1024.json"
EOF
has "scaling: table row" "$out/summary.md" '^\| seqread \| btrfs-inode \| 4096 \| 4116 \| 3 \| .* \| 20\.0 \| 20\.0-20\.0 \| 2\.000 \|'
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
