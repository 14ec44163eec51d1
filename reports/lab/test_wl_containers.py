"""Tests of reports/lab/wl_containers.py on a made-up run (no VM):

    /usr/bin/python3 -m unittest reports.lab.test_wl_containers
"""

import json
import os
import shutil
import tempfile
import unittest

from reports.lab import wl_containers as W
from reports.lab.doc import Doc
from reports.lab.runmodel import Arm, RepValue, Run

MIB = 1 << 20
HEADER = "\t".join(W.GEN_FIELDS) + "\n"


def gen_line(*fields):
    return "\t".join(str(f) for f in fields) + "\n"


class ContainersTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="wl-containers-")
        # btrfs-extent: snapshots (each generation adds about what it
        # overwrote); btrfs-inode: full copies (each adds the whole tree)
        tables = {
            "btrfs-extent": [
                gen_line(0, "base", 10.0, 70 * MIB, 71 * MIB, 70 * MIB, 70 * MIB, 0, "1003 files"),
                gen_line(1, "snapshot", 2.0, 5 * MIB, 76 * MIB, 70 * MIB, 5 * MIB, 65 * MIB, ""),
                gen_line(2, "snapshot", 3.0, 5 * MIB, 81 * MIB, 70 * MIB, 5 * MIB, 65 * MIB, ""),
            ],
            "btrfs-inode": [
                gen_line(0, "base", 11.0, 70 * MIB, 71 * MIB, 70 * MIB, 70 * MIB, 0, "1003 files"),
                gen_line(1, "copy", 20.0, 5 * MIB, 141 * MIB, 70 * MIB, 70 * MIB, 0,
                         "snapshot refused: Operation not supported"),
                gen_line(2, "copy", 22.0, 5 * MIB, 211 * MIB, "-", "-", "-", "x"),
            ],
        }
        for arm, lines in tables.items():
            d = os.path.join(self.dir, "raw", arm)
            os.makedirs(d)
            with open(os.path.join(d, "generations.tsv"), "w") as f:
                f.write(HEADER + "".join(lines) + "not a row\n")
        with open(os.path.join(self.dir, "raw", "btrfs-extent",
                               "subvol-probe.txt"), "w") as f:
            f.write("refused: ERROR: made up\n")

        def reps(bw0, bw2):
            return {"treeread-gen0": {r: RepValue(bw_bytes=bw0 * r, cpu_per_mib=0.01,
                                                  io_bytes=70 * MIB) for r in (1, 2, 3)},
                    "treeread-gen2": {r: RepValue(bw_bytes=bw2 * r, cpu_per_mib=0.02,
                                                  io_bytes=70 * MIB) for r in (1, 2, 3)}}
        checks = []
        for arm, shared in (("btrfs-extent", 40), ("btrfs-inode", 0)):
            for rep in ("prepare", 1, 2, 3):
                for g in (0, 2):
                    checks.append({"arm": arm, "rep": rep, "label": f"gen{g}-L3",
                                   "extents": 100 + g + (1000 if rep == "prepare" else 0),
                                   "shared": shared})
        self.run_ = Run(
            dir=self.dir, extent_checks=checks,
            phases=["treeread-gen0", "treeread-gen2"],
            arms={"btrfs-extent": Arm("btrfs-extent"),
                  "btrfs-inode": Arm("btrfs-inode"),
                  "ext4-plain": Arm("ext4-plain", "skipped",
                                    "ext4 has no snapshots")},
            arm_order=["btrfs-extent", "btrfs-inode", "btrfs-plain"],
            data={"btrfs-extent": reps(100 * MIB, 50 * MIB),
                  "btrfs-inode": reps(100 * MIB, 80 * MIB)},
            analysis="containers")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_interface(self):
        self.assertEqual(W.KIND, "containers")
        self.assertFalse(W.owns_phases(["treeread-gen0"]))
        self.assertIsNone(W.judged_phases(self.run_.phases))

    def test_read_generations(self):
        rows = W.read_generations(os.path.join(self.dir, "raw", "btrfs-inode",
                                               "generations.tsv"))
        self.assertEqual([r["gen"] for r in rows], [0, 1, 2])
        self.assertEqual(rows[1]["method"], "copy")
        self.assertEqual(rows[1]["seconds"], 20.0)
        self.assertEqual(rows[2]["du_total"], None)
        self.assertIn("refused", rows[1]["note"])
        self.assertIsNone(W.read_generations(os.path.join(self.dir, "nope")))

    def test_analyze_space_and_sharing(self):
        wl = W.analyze(self.run_, {})
        json.dumps(wl)  # stored in results.json
        ext, ino = wl["space"]["btrfs-extent"], wl["space"]["btrfs-inode"]
        self.assertEqual(ext["methods"], ["snapshot"])
        self.assertEqual(ino["methods"], ["copy"])
        self.assertEqual(ext["growth"], [5 * MIB, 5 * MIB])
        self.assertEqual(ino["growth_mean"], 70 * MIB)
        self.assertAlmostEqual(ext["added_per_overwritten"], 1.0)
        self.assertAlmostEqual(ino["added_per_overwritten"], 14.0)
        self.assertEqual(ino["gen_seconds_total"], 42.0)
        # the prepare checks do not count
        self.assertEqual(wl["sharing"]["btrfs-extent"][2],
                         {"extents": 102, "shared": 40})
        self.assertEqual(wl["sharing"]["btrfs-inode"][0]["shared"], 0)
        self.assertIn("made up", wl["probe"]["btrfs-extent"])
        self.assertEqual(self.run_.warnings, [])

    def test_analyze_reads(self):
        wl = W.analyze(self.run_, {})
        r = wl["reads"]["btrfs-extent"]
        self.assertAlmostEqual(r["newest_over_oldest"]["median"], 0.5)
        self.assertEqual(r["phases"]["treeread-gen2"]["bw"]["n"], 3)
        self.assertAlmostEqual(
            wl["reads"]["btrfs-inode"]["newest_over_oldest"]["median"], 0.8)

    def test_missing_generations_warns(self):
        self.run_.arms["btrfs-plain"] = Arm("btrfs-plain")
        self.run_.data["btrfs-plain"] = {}
        wl = W.analyze(self.run_, {})
        self.assertNotIn("btrfs-plain", wl["generations"])
        self.assertTrue(any("btrfs-plain" in w for w in self.run_.warnings))
        shutil.rmtree(os.path.join(self.dir, "raw"))
        self.assertIsNone(W.analyze(self.run_, {}))

    def test_render_and_plot(self):
        res = {"workload": W.analyze(self.run_, {})}
        plots = W.plot(self.run_, res, self.dir, {})
        self.assertTrue(os.path.exists(os.path.join(self.dir,
                                                    plots["containers"])))
        doc = Doc()
        W.render(doc, self.run_, res, plots)
        md = doc.to_md()
        self.assertIn("Container image generations", md)
        self.assertIn("skipped: ext4 has no snapshots", md)
        self.assertIn("14.000", md)  # added / overwritten of the copies
        self.assertIn("0.500", md)   # newest / oldest of btrfs-extent
        self.assertIn("ERROR: made up", md)  # the subvolume probe
        empty = Doc()
        W.render(empty, self.run_, {"workload": None}, {})
        self.assertIn("no arm recorded", empty.to_md())


if __name__ == "__main__":
    unittest.main()
