"""Synthetic benchmark runs for the report tests: made-up fio json+
outputs in the raw run format (reports/README.md), nothing measured.

    /usr/bin/python3 -m reports.lab.synthrun RUN_DIR [--seed N] [--reps N]
        [--scale ARM=FACTOR ...] [--cpu-scale ARM=FACTOR ...] [--skip a,b]
        [--scaling-phases] [--groupsweep] [--rekey] [--rekeytime]
        [--compressible] [--extras] [--no-cpu] [--format2] [--arms-dir DIR]

The run is of the current format (runmodel.FORMAT): its meta.json has the
spec collect() writes (runmodel.build_spec of the arm files of --arms-dir,
default the lab's bench/arms, and of the workload's workload.conf), and
cpu.tsv has the CPU ticks of every timed phase. Arms run at fixed relative
speeds (btrfs-extent 0.985 of btrfs-inode, ...) and CPU costs per MiB
(btrfs-extent 1.01 of btrfs-inode, ...) with 1% noise per rep;
--cpu-scale multiplies an arm's CPU cost, --no-cpu writes no CPU data (a
guest without /proc/stat), --format2 writes a run of format 2 (no spec, no
CPU data). --scale multiplies an arm's speed (a regression),
--skip marks arms skipped, --extras adds profiles/, scaling.json and
extent counts of known values, --scaling-phases writes the scaling
workload's KIND-eN phases with exactly known throughput, --groupsweep the
groupsweep workload's seqread-gN phases (btrfs-extent and btrfs-inode
only, the others skipped) with exactly known throughput, FIEMAP checks
and count passes; --rekey the rekey workload's phases (btrfs-extent and
btrfs-extent-key only) with exactly known twokeys / onekey ratios, count
passes and the preparation's rekey; --rekeytime the rekeytime workload's
command phases rekey-n1000 and rekey-n10000 (no fio phase) with exactly
known times; --compressible the compressible workload's phases on its
compressed arms and the uncompressed btrfs ones (its spec has every arm
file, as a job ships them) with exactly known speeds and CPU costs, and
each arm's bytes on disk (raw/<arm>/disk-bytes.tsv).
"""
import argparse
import gzip
import json
import math
import os
import shutil
import tempfile
import unittest

import numpy as np

from reports.lab import runmodel as M
from reports.lab.collect import read_kv

# made-up relative throughput of each arm (btrfs-inode = 1)
SPEED = {"btrfs-extent": 0.985, "btrfs-extent-key": 0.77, "btrfs-inode": 1.0,
         "btrfs-plain": 1.10, "ext4-inode": 1.05, "ext4-plain": 1.15,
         "btrfs-extent-zstd": 0.90, "btrfs-plain-zstd": 0.95}
# made-up relative CPU cost per MiB of each arm (btrfs-inode = 1), and the
# CPU seconds per MiB of btrfs-inode per phase kind
CPU_COST = {"btrfs-extent": 1.01, "btrfs-extent-key": 1.25,
            "btrfs-inode": 1.0, "btrfs-plain": 0.6, "ext4-inode": 0.9,
            "ext4-plain": 0.5, "btrfs-extent-zstd": 1.3,
            "btrfs-plain-zstd": 1.1}
CPU_S_PER_MIB = {"seqread": 0.004, "randread": 0.02, "randwrite": 0.03}
USER_HZ = 100
# groupsweep: points N = 1, 16 and 0 (no bound); btrfs-extent reads at
# 0.5, 0.9 and 0.98 of btrfs-inode's 100e6 bytes/s
SWEEP = {1: 0.5, 16: 0.9, 0: 0.98}
# rekey: the arms that can rekey, and the throughput of twokeys over onekey
# (its CPU cost per MiB is the inverse); the count passes' reads
REKEY_TWOKEYS = {"btrfs-extent": 0.9, "btrfs-extent-key": 0.98}
REKEY_READS = {"seqread": 544, "randread": 4096}
# rekeytime: ns per name moved (rep R: x (1 + 0.01 R)), points N
REKEYTIME_NS = {"btrfs-extent": 20000, "btrfs-extent-key": 22000}
REKEYTIME_POINTS = (1000, 10000)
# compressible: the arms of a run, and the file's bytes on disk of each
# (file size 64 MiB; compsize could not read the encrypted file)
COMP_FILE = 67108864
COMP_DISK = {"btrfs-extent-zstd": 25772032, "btrfs-plain-zstd": 25690112,
             "btrfs-extent": COMP_FILE, "btrfs-plain": COMP_FILE}


def compressible_extras(run_dir, measured):
    """raw/<arm>/disk-bytes.tsv of the compressible workload's arms, as
    bench/workloads/compressible/hooks.sh writes it: 1024 extents of 64
    KiB, all compressed on the zstd arms; compsize's numbers on the
    unencrypted arms, its error on the encrypted ones."""
    for arm in measured:
        disk = COMP_DISK[arm]
        zstd = arm.endswith("-zstd")
        lines = [("file_bytes", COMP_FILE),
                 ("mount_compress", "zstd:3" if zstd else "none"),
                 ("bytes_source", "btrfs inspect-internal dump-tree -t 5"),
                 ("referenced_bytes", COMP_FILE),
                 ("uncompressed_bytes", COMP_FILE), ("disk_bytes", disk),
                 ("extents", 1024), ("extent_refs", 1024),
                 ("compressed_extents", 1024 if zstd else 0),
                 ("compressed_disk_bytes", disk if zstd else 0),
                 ("compressed_uncompressed_bytes", COMP_FILE if zstd else 0),
                 ("inline_extents", 0), ("compressed_inline_extents", 0)]
        if arm.startswith("btrfs-extent"):
            lines.append(("compsize_error", "/m/bench/comp: Regular "
                          "extent's header not 53 bytes (93) long?!?"))
        else:
            lines += [("compsize_disk_bytes", disk),
                      ("compsize_uncompressed_bytes", COMP_FILE),
                      ("compsize_referenced_bytes", COMP_FILE)]
        write_tsv(os.path.join(run_dir, "raw", arm, "disk-bytes.tsv"), lines)


# fio's percentiles, named as fio names them ("99.900000")
PCTS = [f"{p:f}" for p in (1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99,
                           99.5, 99.9, 99.95, 99.99)]
# fio json+'s record of a direction that moved nothing
FIO_IDLE = {"io_bytes": 0, "io_kbytes": 0, "bw_bytes": 0, "bw": 0,
            "iops": 0.0, "runtime": 0, "total_ios": 0,
            "clat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0,
                        "N": 0}}


def _bucket(v):
    """fio-like latency bins: 6 significant bits per bin."""
    v = int(v)
    s = max(0, v.bit_length() - 7)
    return (v >> s) << s


def fio_job(rng, phase, direction, bw, bs, lat_scale, n=4000):
    """fio json+'s jobs[0] of a phase that moved bw bytes/s in blocks of bs
    for 30 s in one direction: n completion latencies, lognormal around
    bs / bw x lat_scale with 0.5% of them 8 times slower, in fio's bins
    and percentiles; the other directions idle."""
    lat = rng.lognormal(math.log(bs / bw * 1e9), 0.35, n) * lat_scale
    lat[: n // 200] *= 8
    b = np.sort([_bucket(v) for v in lat])
    keys, counts = np.unique(b, return_counts=True)
    io = int(bw * 30)
    job = {"jobname": phase, "groupid": 0, "error": 0,
           "read": FIO_IDLE, "write": FIO_IDLE, "trim": FIO_IDLE}
    job[direction] = {
        "io_bytes": io, "io_kbytes": io // 1024, "bw_bytes": int(bw),
        "bw": int(bw / 1024), "iops": bw / bs, "runtime": 30000,
        "total_ios": n,
        "clat_ns": {"min": int(lat.min()), "max": int(lat.max()),
                    "mean": float(lat.mean()), "stddev": float(lat.std()),
                    "N": n,
                    "percentile": {p: int(b[max(0, math.ceil(
                        float(p) / 100 * n) - 1)]) for p in PCTS},
                    "bins": {str(int(k)): int(c)
                             for k, c in zip(keys, counts)}}}
    return job


def write_tsv(path, rows):
    """A tab-separated file of the guest, one row a line; its directory
    made."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.writelines("\t".join(map(str, row)) + "\n" for row in rows)


def fiemap_check(arm, rep, label, extents, lo, path, hi=None):
    """One FIEMAP check of meta.json extent_checks (as collect() reads a
    line of extents.tsv), of a file without shared extents."""
    return {"arm": arm, "rep": rep, "label": label, "extents": extents,
            "shared": 0, "min": lo, "max": hi, "path": path}


def arm_facts(specs, arm, i):
    """What a guest records for a measured arm (facts.tsv), the i-th of
    the run, as a kernel with key groups would show it for the mount
    options of its arm file (specs[arm])."""
    dev, mnt = f"/dev/vd{'defghijk'[i]}", f"/mnt/bench-{arm}"
    fs, mkfs = specs[arm]["FS"], specs[arm]["MKFS"]
    enc = specs[arm].get("ENCRYPTED") == "1"
    opts = specs[arm].get("MOUNT_OPTS", "")
    per_key = opts.partition("fscrypt_extents_per_key=")[2].split(",")[0]
    keys = ("fscrypt_per_inode_keys" if "fscrypt_per_inode_keys" in opts
            else "fscrypt_per_extent_keys"
            + (f",fscrypt_extents_per_key={per_key}"
               if per_key not in ("", "0") else ""))
    mounted = (f"rw,relatime,space_cache=v2,{keys},subvolid=5,subvol=/"
               if fs == "btrfs" else "rw,relatime")
    policy = ("policy v2 contents=1 filenames=4 flags=0x2 keys=per-file"
              if enc else "")
    mode, source = (("none", "no encryption policy") if not enc else
                    ("per-inode", f"policy read back: {policy}")
                    if fs != "btrfs" else
                    (specs[arm]["KEY_MODE"], f"/proc/mounts: {keys}"))
    return {"status": "measured", "fs": fs, "mkfs": f"{mkfs} {dev}",
            "mount_cmd": f"mount -t {fs}{' -o ' + opts if opts else ''} "
                         f"{dev} {mnt}",
            "mount_options": mounted,
            "tuning": (f"echo 1000000 > /sys/fs/ext4/{dev[5:]}/mb_stream_req"
                       if fs == "ext4" else ""),
            "policy": policy, "key_mode": mode, "key_mode_source": source,
            "encrypted": enc}


def rekey_extras(run_dir, measured):
    """The rekey workload's count passes (counts.tsv and the fio output of
    each pass, of known reads) and the preparation's rekey record.
    btrfs-extent: onekey derives 1 key and programs 1 slot per file,
    twokeys 2 and 2; btrfs-extent-key: a key per extent read, 17408 in the
    seqread and 4096 in the randread of either file, one derivation more
    for twokeys (the second master key)."""
    for arm in measured:
        d = os.path.join(run_dir, "profiles", arm)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "counts.tsv"), "w") as fh:
            for kind, reads in REKEY_READS.items():
                ext = 17408 if kind == "seqread" else 4096
                for f, keys in (("onekey", 1), ("twokeys", 2)):
                    ph = f"{kind}-{f}"
                    n = keys if arm == "btrfs-extent" else ext + keys - 1
                    for k, v in (("lookups", ext), ("derivations", n),
                                 ("key_setups_derived", n),
                                 ("slot_programs", n), ("slot_evicts", 0),
                                 ("lost_events", 0)):
                        fh.write(f"{ph}\t{k}\t{v}\n")
                    with open(os.path.join(d, f"count-{ph}.json"), "w") as j:
                        json.dump({"fio version": "fio-3.33", "jobs": [{
                            "jobname": kind, "read": {
                                "io_bytes": 71303168 if kind == "seqread"
                                else reads * 4096,
                                "bw_bytes": 1e7, "iops": 1.0,
                                "total_ios": reads,
                                "clat_ns": {"N": reads}},
                            "write": {"io_bytes": 0}}]}, j)
        with open(os.path.join(run_dir, "raw", arm, "prep-rekey.tsv"),
                  "w") as fh:
            fh.write("from_seed\t1\nto_seed\t2\nfrom_key\taa\nto_key\tbb\n"
                     "nr_dirs\t1\nnr_names\t1\nnr_symlinks\t0\n"
                     "nr_files\t1\nelapsed_ns\t2500000\n")


def rekeytime_results(run_dir, measured, reps):
    """The rekeytime workload's command results: per arm, rep R and point
    N, raw/<arm>/rep<R>/rekey-nN.tsv with N + ceil(N / 1000) names moved
    in REKEYTIME_NS[arm] x (1 + 0.01 R) ns each, and CPU time of the
    driver (0.5 x the time, schedstat ns)."""
    for arm in measured:
        for rep in range(1, reps + 1):
            d = os.path.join(run_dir, "raw", arm, f"rep{rep}")
            os.makedirs(d, exist_ok=True)
            for n in REKEYTIME_POINTS:
                dirs = -(-n // 1000)
                names = n + dirs
                ns = int(round(names * REKEYTIME_NS[arm] * (1 + 0.01 * rep)))
                with open(os.path.join(d, f"rekey-n{n}.tsv"), "w") as fh:
                    fh.write(f"from_seed\t1\nto_seed\t2\nfrom_key\taa\n"
                             f"to_key\tbb\nnr_dirs\t{dirs + 1}\n"
                             f"nr_names\t{names}\nnr_symlinks\t0\n"
                             f"nr_files\t{n}\nelapsed_ns\t{ns}\n"
                             f"cpu_units\t{ns // 2}\n"
                             "cpu_units_per_s\t1000000000\n"
                             "cpu_source\tschedstat\n")


def groupsweep_counts(run_dir, measured):
    """The groupsweep workload's count passes (profiles/<arm>/counts.tsv):
    btrfs-extent's read of each file derives one key per group and
    programs a slot per extent up to N = 16, its writing derived the keys
    and started the groups (none for N = 1: one key per extent);
    btrfs-inode derives one key and starts no group."""
    for arm in measured:
        ext, rows = arm == "btrfs-extent", []
        for n in SWEEP:
            groups = -(-17408 // n) if n else 1
            keys = groups if ext else 0
            starts = groups if ext and n != 1 else 0
            slots = 17408 if n and n <= 16 else groups
            rows += [(f"write-g{n}", k, v) for k, v in (
                ("key_setups_derived", keys), ("group_starts", starts),
                ("group_starts_new", 1 if starts else 0),
                ("group_starts_extents", max(starts - 1, 0)),
                ("lost_events", 0))]
            rows += [(f"seqread-g{n}", k, v) for k, v in (
                ("lookups", 17408 if ext else 0), ("key_setups_derived", keys),
                ("slot_programs", slots if ext else 0),
                ("derivations", groups + 1 if ext else 1), ("lost_events", 0))]
        write_tsv(os.path.join(run_dir, "profiles", arm, "counts.tsv"), rows)


def profile_extras(run_dir, measured, encrypted):
    """profiles/<arm>/ of the profiled rep, of known answers: bpftrace's
    maps and histograms (encrypted arms), slabinfo before and after the
    read, perf script -g output and perf stat."""
    for arm in measured:
        d = os.path.join(run_dir, "profiles", arm)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "bpftrace.json"), "w") as fh:
            fh.write('{"type": "attached_probes", "data": {"probes": 4}}\n')
            if encrypted[arm]:
                der = 16400 if arm.startswith("btrfs-extent") else 3
                fh.write(json.dumps({"type": "map", "data": {
                    "@derive_by_context": {"1": der, "2": 1}}}) + "\n")
                if arm == "btrfs-extent":
                    # key work of a read of one key group (known answers)
                    for name, val in (
                            ("@lookups", 16400),
                            ("@lookup_key", {"derived": 1, "cached": 16399}),
                            ("@extent_key_setup", {"derived": 1,
                                                    "cached": 16399}),
                            ("@slot_programs", 2),
                            ("@group_starts", {"new": 1, "extents": 3})):
                        fh.write(json.dumps({"type": "map", "data": {
                            name: val}}) + "\n")
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
                ext = 16400 if after and arm.startswith("btrfs-extent") else 0
                # derived keys: one key group, or one key per extent
                keys = (0 if not after else 1 if arm == "btrfs-extent"
                        else 16400 if arm == "btrfs-extent-key" else 0)
                inf = 60 + (1 if after and encrypted[arm] else 0)
                for cache, size, n in (("fscrypt_extent_info", 128, ext),
                                       ("fscrypt_extent_key", 128, keys),
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


class TwoRunsCase(unittest.TestCase):
    """Base of a workload's report tests: a synthetic run of five
    repetitions (cls.five) and one of one repetition (cls.one), made with
    make_run(**SYNTH), removed after the class's tests; analyzed(run_dir)
    loads a run and analyzes it at a 5% threshold."""

    SYNTH = {}

    @classmethod
    def setUpClass(cls):
        if cls is TwoRunsCase:
            raise unittest.SkipTest("a base class")
        cls.tmp = tempfile.mkdtemp(prefix="wl-synth-")
        cls.five = os.path.join(cls.tmp, "five")
        cls.one = os.path.join(cls.tmp, "one")
        make_run(cls.five, seed=3, reps=5, **cls.SYNTH)
        make_run(cls.one, seed=4, reps=1, **cls.SYNTH)

    @classmethod
    def tearDownClass(cls):
        if cls is not TwoRunsCase:
            shutil.rmtree(cls.tmp)

    def analyzed(self, run_dir):
        from reports.lab.analysis import analyze
        run = M.load_run(run_dir)
        return run, analyze(run, 5.0)

    def report_md(self, kind, plot):
        """The report of the five-rep run (generate()): its workload kind
        and its plot checked, its summary.md returned."""
        from reports.lab.generate import generate
        out = os.path.join(self.tmp, "report")
        res = generate(self.five, out)
        self.assertEqual(res["workload_kind"], kind)
        self.assertTrue(os.path.exists(os.path.join(out, plot)))
        with open(os.path.join(out, "summary.md"), encoding="utf-8") as f:
            return f.read()


def make_run(run_dir, seed=1, reps=5, scale=(), skip="",
             scaling_phases=False, extras=False, groupsweep=False,
             cpu=True, cpu_scale=(), format2=False, arms_dir=None,
             rekey=False, rekeytime=False, compressible=False):
    """Write a synthetic RUN_DIR (see the module docstring)."""
    cpu = cpu and not format2
    rng = np.random.default_rng(seed)
    # CPU noise from a generator of its own: throughput stays as it was
    crng = np.random.default_rng(seed + 1000)
    scale = {k: float(v) for k, v in (s.split("=") for s in scale)}
    cpu_scale = {k: float(v) for k, v in (s.split("=") for s in cpu_scale)}
    skip = set(filter(None, skip.split(",")))
    # the arm files (bench/arms/*.conf, or a copy), as collect() reads the
    # job's, of the arms a run without ARMS makes (not the DEFAULT=0
    # prototypes)
    specs = {a: spec for a, spec in M.read_arm_specs(arms_dir).items()
             if spec.get("DEFAULT") != "0"}
    names = list(specs)
    if compressible:
        # every arm file in the spec, as a job ships them; the run's arms
        # are the workload's compressed ones and the uncompressed btrfs ones
        specs = M.read_arm_specs(arms_dir)
        names = [x for x in specs if x in COMP_DISK]
    encrypted = {x: specs[x].get("ENCRYPTED") == "1" for x in names}
    PHASES = {"seqread": ("read", 40e6, 131072), "randread": ("read", 6e6, 4096),
              "randwrite": ("write", 4e6, 4096)}
    if scaling_phases:
        # 4096 bytes per 10 us, and per 20 us: cost 10 and 20 us per 4 KiB
        PHASES = {"seqread-e1024": ("read", 409.6e6, 131072),
                  "seqread-e4096": ("read", 204.8e6, 131072)}
    if groupsweep:
        PHASES = {f"seqread-g{n}": ("read", 100e6, 131072) for n in SWEEP}
        skip |= {x for x in names if x not in ("btrfs-extent", "btrfs-inode")}
    if rekey:
        PHASES = {f"{kind}-{f}": ("read", base, bs) for kind, base, bs in
                  (("seqread", 40e6, 131072), ("randread", 6e6, 4096))
                  for f in ("onekey", "twokeys")}
        skip |= {x for x in names if x not in REKEY_TWOKEYS}
    if rekeytime:
        PHASES = {}
        skip |= {x for x in names if x not in REKEYTIME_NS}
    exact = scaling_phases or groupsweep or rekey or compressible
    meta_arms = {arm: {"status": "skipped", "reason": "kernel has no btrfs "
                       "encryption yet (issue #4)"} if arm in skip else
                 arm_facts(specs, arm, i) for i, arm in enumerate(names)}
    measured = [x for x in names if x not in skip]
    order, cpu_rows = [], []
    for rep in range(1, reps + 1):
        for arm in measured:
            order.append([arm, rep])
            f = SPEED[arm] * scale.get(arm, 1.0)
            d = os.path.join(run_dir, "raw", arm, f"rep{rep}")
            os.makedirs(d, exist_ok=True)
            for ph, (direction, base, bs) in PHASES.items():
                noise = 1.0 if exact else rng.normal(1.0, 0.01)
                g = (SWEEP[int(ph.partition("-g")[2])] / SPEED[arm]
                     if groupsweep and arm == "btrfs-extent" else 1.0)
                if rekey and ph.endswith("-twokeys"):
                    g = REKEY_TWOKEYS[arm]
                job = fio_job(rng, ph, direction, base * f * g * noise, bs,
                              1 / f)
                # CPU ticks: made-up seconds per MiB x MiB moved, 1% noise
                mib = job[direction]["io_bytes"] / (1024.0 * 1024.0)
                per_mib = (CPU_S_PER_MIB.get(ph.partition("-")[0], 0.004)
                           * CPU_COST[arm] * cpu_scale.get(arm, 1.0)
                           * (1.0 / g if rekey else 1.0)
                           * (1.0 if exact else crng.normal(1.0, 0.004)))  # icount-like
                cpu_rows.append((arm, rep, ph,
                                 int(round(per_mib * mib * USER_HZ))))
                with open(os.path.join(d, ph + ".json"), "w") as fh:
                    fh.write("note: both iodepth >= 1 and synchronous I/O engine "
                             "are selected, queue depth will be capped at 1\n")
                    json.dump({"fio version": "fio-3.33", "jobs": [job]}, fh)
    meta = {"format": 2 if format2 else M.FORMAT, "arm_fact_problems": [],
            "workload": "fragmented", "date": "2026-12-03T02:00:00Z",
            "reps": reps, "phases": list(PHASES), "arms": meta_arms,
            "order": order,
            "run_info": {"accel": "tcg", "cpus": "2", "mem_mb": "3072",
                         "qemu_cmdline": "qemu-system-x86_64 -accel tcg -smp 2 -m 3072",
                         "kernel_release": "6.1.192+", "kernel_series_hash": "0123abc",
                         "kernel_config_sha256": "feedbeef", "elapsed_s": "1234"},
            "fio_version": "fio-3.33",
            "jobfiles": {ph + ".fio": f"[{ph}]\nrw={ph}\nfilename=/mnt/test/file\n"
                         for ph in PHASES},
            "min_extents": 16384, "prep": "once", "saves": []}
    if scaling_phases:
        meta["workload"] = "scaling"
        meta["extent_checks"] = [
            fiemap_check(arm, rep, f"e{n}", n + 10 * rep, n, f"/m/frag-e{n}")
            for arm in measured for rep in range(1, reps + 1)
            for n in (1024, 4096)]
    if groupsweep:
        meta["workload"] = "groupsweep"
        # btrfs-extent: a file per point, 17408 extents; btrfs-inode: one
        meta["extent_checks"] = [
            fiemap_check("btrfs-extent", rep, f"g{n}", 17408, 16384,
                         f"/m/bench/frag-g{n}")
            for rep in range(1, reps + 1) for n in SWEEP] + [
            fiemap_check("btrfs-inode", rep, "frag", 17408, 16384,
                         "/m/bench/frag") for rep in range(1, reps + 1)]
        groupsweep_counts(run_dir, measured)
    if rekey:
        meta["workload"] = "rekey"
        meta["profile_phase"] = "seqread-twokeys"
        meta["extent_checks"] = [
            fiemap_check(arm, rep, f, 17408, 16384, f"/m/sv/bench/{f}")
            for arm in measured for rep in range(1, reps + 1)
            for f in ("twokeys", "onekey")]
        rekey_extras(run_dir, measured)
    if rekeytime:
        meta["workload"] = "rekeytime"
        meta["phases"] = meta["command_phases"] = [
            f"rekey-n{n}" for n in REKEYTIME_POINTS]
        meta["profile_phase"] = f"rekey-n{REKEYTIME_POINTS[-1]}"
        meta["workload_params"] = {
            "REKEY_NAMES": " ".join(map(str, REKEYTIME_POINTS)),
            "REKEY_DIR_NAMES": "1000"}
        meta["min_extents"] = 0
        meta["extent_checks"] = [
            fiemap_check(arm, rep, f"n{n}", 0, 0,
                         f"/m/rk-n{n}/d/dir-0000/file-000000", hi=0)
            for arm in measured for rep in range(1, reps + 1)
            for n in REKEYTIME_POINTS]
        meta["jobfiles"] = {}
        rekeytime_results(run_dir, measured, reps)
    if compressible:
        meta["workload"] = "compressible"
        meta["profile_phase"] = "seqread"
        meta["min_extents"] = 960
        meta["extent_checks"] = [
            fiemap_check(arm, rep, "comp", 1024, 960, "/m/bench/comp")
            for arm in measured for rep in range(1, reps + 1)]
        compressible_extras(run_dir, measured)
    if extras:
        meta["extent_counts"] = {arm: [16400 + r for r in range(reps)]
                                 for arm in measured}
        meta["profile_phase"] = "randread"
        meta["profiled_extent_counts"] = {arm: {"frag": 16400}
                                          for arm in measured}
        profile_extras(run_dir, measured, encrypted)
        with open(os.path.join(run_dir, "scaling.json"), "w") as fh:
            json.dump({arm: [{"extents": e, "bw_bytes": [
                40e6 * SPEED[arm] / (1 + (0.02 if arm == "btrfs-extent" else 0.005)
                                       * math.log10(e)) * rng.normal(1, 0.01)
                for _ in range(3)]} for e in (1, 100, 1000, 10000, 100000)]
                       for arm in measured if arm.startswith("btrfs")}, fh)
    if not format2:
        # what collect() adds: the spec (from the arm files and the
        # workload.conf of the lab, as a job would ship them), the kernel
        # and the CPU data
        wl = read_kv(os.path.join(M.WORKLOADS_DIR, meta["workload"],
                                     "workload.conf"), strip_quotes=True)
        meta["description"] = wl.get("description", "")
        meta["spec"] = M.build_spec(specs, meta["workload"], wl,
                                    [p for p in meta["phases"] if p not in
                                     meta.get("command_phases", [])],
                                    "synthetic: " + (arms_dir or "bench/arms"))
        meta["kernel"] = M.kernel_of(
            dict(meta["run_info"], kernel_tree_head="0123abc" * 5 + "01234"),
            {"LAB_COMMIT": "f00dfeed" * 5, "LAB_DIRTY": "0"})
        meta["cpu"] = None
        if cpu and cpu_rows:
            write_tsv(os.path.join(run_dir, "cpu.tsv"), cpu_rows)
            meta["cpu"] = {"file": "cpu.tsv", "user_hz": USER_HZ,
                           "user_hz_source": "synthetic",
                           "lines": len(cpu_rows), "window": "io",
                           "window_counts": {"io": len(cpu_rows)}}
    with open(os.path.join(run_dir, "meta.json"), "w") as fh:
        json.dump(meta, fh, indent=1)


def main(argv=None):
    """The command line; the module docstring, its --help, says what each
    option does."""
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--skip", default="", help="arms, comma-separated")
    ap.add_argument("--arms-dir", default=None)
    for opt in ("--scale", "--cpu-scale"):
        ap.add_argument(opt, action="append", default=[],
                        metavar="ARM=FACTOR")
    for opt in ("--scaling-phases", "--groupsweep", "--rekey", "--rekeytime",
                "--compressible", "--extras", "--format2"):
        ap.add_argument(opt, action="store_true")
    ap.add_argument("--no-cpu", dest="cpu", action="store_false")
    make_run(**vars(ap.parse_args(argv)))


if __name__ == "__main__":
    main()
