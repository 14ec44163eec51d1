"""Tests of reports/lab/wl_scaling.py on a made-up run (no VM): cost per extent
from CPU time and bytes read, slab memory from PHASE.slabinfo files, the
log-log plots and the report section.

    /usr/bin/python3 -m unittest reports.lab.test_wl_scaling
"""

import json
import os
import shutil
import tempfile
import unittest
from dataclasses import replace

from reports.lab import wl_scaling as W
from reports.lab.doc import Doc
from reports.lab.runmodel import Arm, RepValue, Run

POINTS = (1024, 4096, 16384)
ARMS = ("btrfs-extent", "btrfs-inode")
SLAB_HEAD = ("slabinfo - version: 2.1\n# name <active_objs> <num_objs> "
             "<objsize> <objperslab> <pagesperslab> : tunables <limit> "
             "<batchcount> <sharedfactor> : slabdata <active_slabs> "
             "<num_slabs> <sharedavail>\n")


def slab_line(name, num, size):
    return (f"{name} {num} {num} {size} 32 1 : tunables 0 0 0 : "
            f"slabdata 1 1 0\n")


class ScalingTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="wl-scaling-")
        data, checks = {}, []
        for arm in ARMS:
            data[arm] = {}
            for kind in ("seqread", "randread"):
                for n in POINTS:
                    phase = f"{kind}-e{n}"
                    data[arm][phase] = {}
                    for rep in (1, 2):
                        rel = f"raw/{arm}/rep{rep}/{phase}.json"
                        # 1024 extents touched (4 MiB); CPU grows with N
                        # for btrfs-extent only: 1 µs per extent at 1024,
                        # times (1 + log4(N / 1024)), rep 2 10 % dearer
                        steps = POINTS.index(n)
                        us = (1 + steps if arm == "btrfs-extent" else 1) \
                            * (1.1 if rep == 2 else 1.0)
                        data[arm][phase][rep] = RepValue(
                            file=rel, bw_bytes=1e8, io_bytes=1024 * 4096,
                            total_ios=1024, cpu_s=us * 1024 / 1e6)
                        if kind != "seqread":
                            continue
                        d = os.path.join(self.dir, os.path.dirname(rel))
                        os.makedirs(d, exist_ok=True)
                        with open(os.path.join(d, phase + ".slabinfo"),
                                  "w") as f:
                            f.write(SLAB_HEAD)
                            if arm == "btrfs-extent":
                                f.write(slab_line("fscrypt_extent_info",
                                                  n + rep, 128))
                                f.write(slab_line("fscrypt_extent_key",
                                                  n // 4, 64))
                            f.write(slab_line("fscrypt_info", 8, 256))
                            f.write(slab_line("btrfs_extent_map",
                                              n, 112))
                            f.write(slab_line("btrfs_inode", 100, 1024))
                            f.write("bad line\n")
                for n in POINTS:
                    checks.append({"arm": arm, "rep": 1, "label": f"e{n}",
                                   "extents": n + 3})
                    checks.append({"arm": arm, "rep": "prepare",
                                   "label": f"e{n}", "extents": 1})
        # btrfs-inode's rep 2 of randread-e16384 has no CPU time
        no_cpu = data["btrfs-inode"]["randread-e16384"]
        no_cpu[2] = replace(no_cpu[2], cpu_s=None)
        phases = ([f"seqread-e{n}" for n in POINTS] +
                  [f"randread-e{n}" for n in POINTS])
        arms = {a: Arm(a) for a in ARMS}
        arms["btrfs-extent-key"] = Arm("btrfs-extent-key", "skipped",
                                       "made up")
        self.run_ = Run(dir=self.dir, phases=phases, analysis="scaling",
                        arms=arms, data=data, extent_checks=checks)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_counts_are_written_whole(self):
        # a million extents is 1048576 in tables and ticks, not 1.04858e+06
        self.assertEqual(W._count(1048576.0), "1048576")
        self.assertEqual(W._count(4096), "4096")
        self.assertEqual(W._count(4096.5), "4096.5")

    def test_owns(self):
        self.assertTrue(W.owns_phases(["seqread-e1024"]))
        self.assertFalse(W.owns_phases(["seqread", "seqread-g4"]))
        self.assertIsNone(W.judged_phases(self.run_.phases))

    def test_cost_per_extent(self):
        sc = W.analyze(self.run_, {})
        json.dumps(sc)  # stored in the results
        ext = {p["nominal"]: p for p in sc["reads"]["seqread"]["btrfs-extent"]}
        self.assertEqual(sorted(ext), list(POINTS))
        # x is the FIEMAP count of the timed reps, not the prepare check
        self.assertEqual(ext[4096]["extents"], 4099)
        c = ext[16384]["cost_per_extent"]
        self.assertEqual(c["extents_touched"], [1024, 1024])
        self.assertAlmostEqual(c["per_rep"][0], 3.0)
        self.assertAlmostEqual(c["per_rep"][1], 3.3)
        self.assertAlmostEqual(c["summary"]["min"], 3.0)
        self.assertAlmostEqual(c["summary"]["max"], 3.3)
        ino = {p["nominal"]: p for p in sc["reads"]["randread"]["btrfs-inode"]}
        # a rep without CPU time is left out, not counted as 0
        self.assertEqual(ino[16384]["cost_per_extent"]["per_rep"], [1.0])
        self.assertEqual(ino[16384]["cost_per_extent"]["summary"]["n"], 1)

    def test_cost_per_extent_edge(self):
        self.assertIsNone(W.cost_per_extent([RepValue(
            cpu_s=None, io_bytes=4096)])["summary"])
        self.assertIsNone(W.cost_per_extent([RepValue(
            cpu_s=1.0, io_bytes=0)])["summary"])

    def test_slab(self):
        sc = W.analyze(self.run_, {})
        ext = {p["nominal"]: p for p in sc["reads"]["seqread"]["btrfs-extent"]}
        s = ext[4096]["slab"]
        # median over reps of num_objs x objsize: (4097 + 4098) / 2 x 128
        self.assertAlmostEqual(s["fscrypt_extent_info"], 4097.5 * 128)
        self.assertEqual(s["btrfs_extent_map"], 4096 * 112)
        self.assertAlmostEqual(s["fscrypt"], 4097.5 * 128 + 1024 * 64 + 8 * 256)
        ino = {p["nominal"]: p for p in sc["reads"]["seqread"]["btrfs-inode"]}
        self.assertNotIn("fscrypt_extent_info", ino[1024]["slab"])
        self.assertEqual(ino[1024]["slab"]["fscrypt"], 8 * 256)
        # the randread phases have no slabinfo here
        rnd = sc["reads"]["randread"]["btrfs-extent"][0]
        self.assertEqual(rnd["slab"], {})
        rows = W.slab_rows(sc)
        self.assertEqual(len(rows), len(ARMS) * len(POINTS))

    def test_plots_and_section(self):
        out = os.path.join(self.dir, "out")
        os.makedirs(out)
        res = {"workload": W.analyze(self.run_, {})}
        plots = W.plot(self.run_, res, out, {})
        self.assertEqual(set(plots), {"scaling", "scaling-cpu",
                                      "scaling-slab"})
        for path in plots.values():
            self.assertTrue(os.path.getsize(os.path.join(out, os.path.basename(path))) > 0)
        doc = Doc()
        W.render(doc, self.run_, res, plots)
        md = doc.to_md()
        self.assertIn("Read cost per extent", md)
        self.assertIn("Slab memory", md)
        self.assertIn("3.00", md)       # btrfs-extent seqread at 16384: 3 µs
        self.assertIn("skipped: made up", md)

    def test_no_cpu_no_slab(self):
        for arm in ARMS:
            for phase in self.run_.data[arm].values():
                for rep, d in phase.items():
                    phase[rep] = replace(d, cpu_s=None)
        shutil.rmtree(os.path.join(self.dir, "raw"))
        res = {"workload": W.analyze(self.run_, {})}
        out = os.path.join(self.dir, "out")
        os.makedirs(out)
        plots = W.plot(self.run_, res, out, {})
        self.assertEqual(set(plots), {"scaling"})
        doc = Doc()
        W.render(doc, self.run_, res, plots)
        md = doc.to_md()
        self.assertNotIn("Read cost per extent", md)
        self.assertNotIn("Slab memory", md)


if __name__ == "__main__":
    unittest.main()
