"""Unit tests of reports.wl_containers on a made-up run (no VM)."""

import os
import tempfile
import unittest

from reports import wl_containers as W
from reports.doc import Doc


def write_prep(path, gens):
    with open(path, "w", encoding="utf-8") as f:
        for prep in (1, 2):
            for g, kv in enumerate(gens):
                for k, v in kv.items():
                    f.write(f"{prep}\t{g}\t{k}\t{v}\n")
        f.write("garbage line\n")


def fake_run(d):
    snap = [{"make": "base", "make_ms": 9000, "tree_bytes": 100 * 2**20,
             "du_exclusive": 0, "df_used_kib": 120 * 1024}] + [
        {"make": "snapshot", "make_ms": 200, "overwrite_ms": 3000,
         "overwrite_bytes": 5 * 2**20, "tree_bytes": 100 * 2**20,
         "du_exclusive": 5 * 2**20, "df_used_kib": 120 * 1024}
        for _ in range(3)]
    copy = [dict(g, make="copy", make_ms=8000) if i else dict(g)
            for i, g in enumerate(snap)]
    for i, g in enumerate(copy):
        g["df_used_kib"] = 420 * 1024
        g["du_exclusive"] = 100 * 2**20
    for arm, gens in (("btrfs-extent", snap), ("btrfs-inode", copy)):
        os.makedirs(os.path.join(d, "raw", arm))
        write_prep(os.path.join(d, "raw", arm, W.PREP_FILE), gens)

    def rep(bw):
        return {"bw_bytes": bw}
    return {"dir": d, "measured": ["btrfs-extent", "btrfs-inode"],
            "not_measured": {"ext4-plain": "ext4 has no snapshots"},
            "phases": ["readall", "readnew"],
            "data": {"btrfs-extent": {"readall": {1: rep(3 * 2**20),
                                                  2: rep(5 * 2**20)},
                                      "readnew": {1: rep(2**20)}},
                     "btrfs-inode": {"readall": {1: rep(2**20)},
                                     "readnew": {1: rep(2**20)}}}}


class TestContainers(unittest.TestCase):
    def test_interface(self):
        self.assertEqual(W.KIND, "containers")
        self.assertFalse(W.owns_phases(["readall"]))
        self.assertIsNone(W.judged_phases({}))

    def test_analyze_plot_render(self):
        with tempfile.TemporaryDirectory() as d:
            run = fake_run(d)
            w = W.analyze(run, {})
            a, b = w["arms"]["btrfs-extent"], w["arms"]["btrfs-inode"]
            self.assertEqual(a["preps"], 2)
            self.assertEqual(len(a["generations"]), 4)
            self.assertEqual(a["make"], ["snapshot"])
            self.assertEqual(b["make"], ["copy"])
            self.assertEqual(a["make_ms_later"], 600)
            self.assertEqual(b["make_ms_later"], 24000)
            self.assertEqual(a["overwrite_ms"], 9000)
            self.assertAlmostEqual(a["space_over_gen0"], 1.2)
            self.assertAlmostEqual(b["space_over_gen0"], 4.2)
            self.assertEqual(a["logical_bytes"], 400 * 2**20)
            self.assertEqual(a["bw_median"]["readall"], 4 * 2**20)
            self.assertEqual(w["skipped"], {"ext4-plain":
                                            "ext4 has no snapshots"})
            res = {"workload": w}
            plots = W.plot(run, res, d, {"btrfs-extent": "#1f77b4"})
            self.assertTrue(os.path.exists(os.path.join(
                d, plots["containers"])))
            doc = Doc()
            W.render(doc, run, res, plots)
            md = doc.to_md()
            self.assertIn("| btrfs-inode | copy | 24.0 |", md)
            self.assertIn("| btrfs-extent | snapshot | 0.6 |", md)
            self.assertIn("skipped: ext4 has no snapshots", md)
            self.assertIn("4.20", md)

    def test_no_prep_data(self):
        with tempfile.TemporaryDirectory() as d:
            run = {"dir": d, "measured": ["btrfs-plain"], "not_measured": {},
                   "phases": ["readall"], "data": {}}
            self.assertIsNone(W.analyze(run, {}))
            doc = Doc()
            W.render(doc, run, {"workload": None}, {})
            self.assertIn("nothing to show", doc.to_md())


if __name__ == "__main__":
    unittest.main()
