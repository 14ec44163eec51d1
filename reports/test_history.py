"""History store and trend page (reports.history) and the reports index
(reports.index), on synthetic runs.

Run from the repo root: /usr/bin/python3 -m unittest -v reports.test_history
"""

import contextlib
import io
import json
import os
import re
import sqlite3
import tempfile
import unittest

from reports import history as H
from reports import index as I
from reports import synthrun


def _run(root, name, date, **kw):
    d = os.path.join(root, "runs", name)
    synthrun.make_run(d, **kw)
    path = os.path.join(d, "meta.json")
    with open(path) as f:
        meta = json.load(f)
    meta["date"] = date
    with open(path, "w") as f:
        json.dump(meta, f)
    return d


class History(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        t = cls.tmp.name
        cls.store = os.path.join(t, "store")
        cls.reports = os.path.join(t, "reports")
        # two nightly-like runs, the second 10% slower on btrfs-extent,
        # and a one-rep run
        cls.runs = [
            _run(t, "20261201-013000-fragmented", "2026-12-01T01:30:00Z",
                 seed=1, reps=5),
            _run(t, "20261202-013000-fragmented", "2026-12-02T01:30:00Z",
                 seed=2, reps=5, scale=["btrfs-extent=0.9"]),
            _run(t, "20261203-013000-fragmented", "2026-12-03T01:30:00Z",
                 seed=3, reps=1),
        ]
        for r in cls.runs:
            rep = os.path.join(cls.reports, os.path.basename(r)[:8])
            os.makedirs(rep)
            with open(os.path.join(rep, "index.html"), "w") as f:
                f.write("<html></html>")
            H.append(r, rep, cls.store)
        cls.baseline = os.path.join(t, "base.json")
        with open(cls.baseline, "w") as f:
            json.dump({"threshold_pct": 5.0, "ratios": {
                "btrfs-extent/btrfs-inode": {
                    "seqread": {"samples": [0.98, 0.99, 0.985]}}}}, f)
        cls.out = os.path.join(cls.reports, "history-fragmented")
        cls.n = H.plot("fragmented", cls.out, cls.baseline, cls.store)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_store_rows(self):
        db = sqlite3.connect(os.path.join(self.store, "history.sqlite"))
        runs = db.execute("SELECT run, accel, kernel_series_hash, "
                          "kernel_config_sha256, reps FROM runs ORDER BY "
                          "date").fetchall()
        self.assertEqual([r[0] for r in runs],
                         [os.path.basename(r) for r in self.runs])
        self.assertEqual(runs[0][1:], ("tcg", "0123abc", "feedbeef", 5))
        # 5 comparisons (bench/arms/) x 3 phases, all arms measured
        n = db.execute("SELECT COUNT(*) FROM ratios").fetchone()[0]
        self.assertEqual(n, 3 * 15)
        db.close()

    def test_values_and_ci(self):
        s = H.series("fragmented", self.store)
        pts = s[("btrfs-extent/btrfs-inode", "seqread")]
        self.assertEqual(len(pts), 3)
        first, slower, one = pts
        self.assertLess(first["ci_lo"], first["value"])
        self.assertGreater(first["ci_hi"], first["value"])
        # synthrun: btrfs-extent at 0.985 of btrfs-inode, then x 0.9
        self.assertAlmostEqual(first["value"], 0.985, delta=0.03)
        self.assertAlmostEqual(slower["value"], 0.985 * 0.9, delta=0.03)
        self.assertEqual(len(slower["samples"]), 5)
        # one rep: a point, no CI, and it says why
        self.assertIsNone(one["ci_lo"])
        self.assertEqual(one["not_conclusive"], "not conclusive (n = 1)")

    def test_append_again_replaces(self):
        H.append(self.runs[0], None, self.store)
        s = H.series("fragmented", self.store)
        self.assertEqual(len(s[("btrfs-extent/btrfs-inode", "seqread")]), 3)
        # put the report link back for the other tests
        H.append(self.runs[0], os.path.join(self.reports, "20261201"),
                 self.store)

    def test_trend_page_links_every_point_to_its_report(self):
        self.assertEqual(self.n, 15)
        with open(os.path.join(self.out, "index.html")) as f:
            page = f.read()
        svg_links = re.findall(r'<a xlink:href="([^"]+)"', page)
        # the two 5-rep runs and the 1-rep run, in each of the 15 plots
        self.assertEqual(len(svg_links), 3 * 15)
        for link in set(svg_links):
            self.assertTrue(os.path.exists(os.path.join(self.out, link)),
                            link)
        self.assertIn("../20261202/index.html", svg_links)
        self.assertTrue("none: not conclusive (n = 1)" in page,
                        "the one-rep point does not say why it has no CI")

    def test_trend_page_draws_baseline_and_threshold(self):
        with open(os.path.join(self.out, "index.html")) as f:
            page = f.read()
        self.assertTrue("baseline 0.9850" in page, "no baseline label")
        self.assertTrue("regression threshold (-5%)" in page,
                        "no threshold label")

    def test_store_inside_build_refused(self):
        top = os.path.dirname(os.path.dirname(os.path.abspath(H.__file__)))
        with self.assertRaises(H.HistoryError):
            H.store_dir(os.path.join(top, "build", "history"))
        self.assertEqual(H.store_dir(self.store), self.store)

    def test_default_dir_outside_clone(self):
        top = os.path.dirname(os.path.dirname(os.path.abspath(H.__file__)))
        self.assertFalse(H.default_dir().startswith(top + os.sep))

    def test_index_lists_reports_and_trends(self):
        rep = os.path.join(self.reports, "2026-12-02-fragmented")
        os.makedirs(rep, exist_ok=True)
        with open(os.path.join(rep, "index.html"), "w") as f:
            f.write("<html></html>")
        with open(os.path.join(rep, "results.json"), "w") as f:
            json.dump({"meta": {"workload": "fragmented", "reps": 5,
                                "date": "2026-12-02T01:30:00Z",
                                "run_info": {"accel": "icount"}},
                       "verdicts": [{"phase": "seqread",
                                     "metric": "throughput",
                                     "status": "not met"}]}, f)
        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(I.main([self.reports]), 0)
        with open(os.path.join(self.reports, "index.html")) as f:
            page = f.read()
        self.assertIn('<a href="2026-12-02-fragmented/index.html">', page)
        self.assertIn("seqread throughput: not met", page)
        self.assertIn('<a href="history-fragmented/index.html">', page)


if __name__ == "__main__":
    unittest.main()
