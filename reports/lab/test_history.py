"""History store and trend page (reports.lab.history) and the reports index
(reports.lab.index), on synthetic runs.

Run from the repo root: /usr/bin/python3 -m unittest -v reports.lab.test_history
"""

import contextlib
import io
import json
import os
import re
import sqlite3
import tempfile
import unittest

from reports.lab import history as H
from reports.lab import index as I
from reports.lab import labstats as L
from reports.lab import runmodel as M
from reports.lab import synthrun


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
        # 5 comparisons (the runs' arm definitions) x 3 phases, all arms
        # measured, for throughput and for CPU cost per MiB
        n = db.execute("SELECT metric, COUNT(*) FROM ratios GROUP BY metric "
                       "ORDER BY metric").fetchall()
        self.assertEqual(n, [("bw_bytes", 3 * 15), ("cpu_per_mib", 3 * 15)])
        self.assertEqual(db.execute(
            "SELECT kernel_tree_head, lab_commit FROM runs LIMIT 1"
        ).fetchone(), ("0123abc" * 5 + "01234", "f00dfeed" * 5))
        db.close()

    def test_values_and_ci(self):
        s = H.series("fragmented", self.store)
        pts = s[("bw_bytes", "btrfs-extent/btrfs-inode", "seqread")]
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
        # the report's number: the one ratio definition
        self.assertEqual(first["value"],
                         L.ratio_of_samples(first["samples"])["value"])
        cpu = s[("cpu_per_mib", "btrfs-extent/btrfs-inode", "seqread")]
        self.assertAlmostEqual(cpu[0]["value"], 1.01, delta=0.02)

    def test_append_again_replaces(self):
        H.append(self.runs[0], None, self.store)
        s = H.series("fragmented", self.store)
        self.assertEqual(len(s[("bw_bytes", "btrfs-extent/btrfs-inode",
                                "seqread")]), 3)
        # put the report link back for the other tests
        H.append(self.runs[0], os.path.join(self.reports, "20261201"),
                 self.store)

    def test_trend_page_links_every_point_to_its_report(self):
        self.assertEqual(self.n, 30)  # 15 of throughput, 15 of CPU
        with open(os.path.join(self.out, "index.html")) as f:
            page = f.read()
        svg_links = re.findall(r'<a xlink:href="([^"]+)"', page)
        # the two 5-rep runs and the 1-rep run, in each of the 30 plots
        self.assertEqual(len(svg_links), 3 * 30)
        # in the runs' own order: throughput first, main comparison first
        heads = re.findall(r"<h2>([^<]+)</h2>", page)
        self.assertEqual(heads[0],
                         "btrfs-extent/btrfs-inode seqread: throughput ratio")
        self.assertEqual(heads[15], "btrfs-extent/btrfs-inode seqread: CPU "
                                    "cost per MiB ratio")
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
        self.assertTrue("alert bound (-5.00%)" in page,
                        "no threshold label")

    def test_schema_1_store_upgraded_with_todays_definition(self):
        d = os.path.join(self.tmp.name, "old-store")
        os.makedirs(d)
        db = sqlite3.connect(os.path.join(d, "history.sqlite"))
        db.executescript("""
            CREATE TABLE runs (id INTEGER PRIMARY KEY, run TEXT NOT NULL
                UNIQUE, workload TEXT NOT NULL, date TEXT NOT NULL, accel
                TEXT, kernel_release TEXT, kernel_series_hash TEXT,
                kernel_config_sha256 TEXT, reps INTEGER,
                injected_lookup_delay_us INTEGER, report TEXT);
            CREATE TABLE ratios (run_id INTEGER NOT NULL REFERENCES runs(id)
                ON DELETE CASCADE, ratio TEXT NOT NULL, phase TEXT NOT NULL,
                value REAL NOT NULL, ci_lo REAL, ci_hi REAL, n_a INTEGER NOT
                NULL, n_b INTEGER NOT NULL, not_conclusive TEXT, samples TEXT
                NOT NULL, PRIMARY KEY (run_id, ratio, phase));
            INSERT INTO runs VALUES (1, 'old', 'fragmented',
                '2026-12-01T00:00:00Z', 'icount', NULL, NULL, NULL, 5, 0,
                NULL);
            INSERT INTO ratios VALUES (1, 'btrfs-extent/btrfs-inode',
                'seqread', 0.5, 0.4, 0.6, 5, 5, NULL,
                '[1.0, 2.0, 4.0, 1.0, 2.0]');""")
        db.commit()
        db.close()
        pts = H.series("fragmented", d)[("bw_bytes",
                                         "btrfs-extent/btrfs-inode",
                                         "seqread")]
        want = L.ratio_of_samples([1.0, 2.0, 4.0, 1.0, 2.0])
        self.assertEqual(len(pts), 1)
        self.assertAlmostEqual(pts[0]["value"], want["value"], places=12)
        self.assertAlmostEqual(pts[0]["ci_lo"], want["ci_lo"], places=12)
        # and a new run goes in beside it
        H.append(self.runs[0], None, d)
        self.assertEqual(len(H.series("fragmented", d)[(
            "bw_bytes", "btrfs-extent/btrfs-inode", "seqread")]), 2)

    def test_store_inside_build_refused(self):
        top = M.LAB_TOP
        with self.assertRaises(H.HistoryError):
            H.store_dir(os.path.join(top, "build", "history"))
        self.assertEqual(H.store_dir(self.store), self.store)

    def test_default_dir_outside_clone(self):
        top = M.LAB_TOP
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


def _on_kernel(run_dir, release):
    """Make RUN_DIR a run of a kernel of RELEASE (both places a run keeps
    it: the runner's run.info and the kernel the run recorded)."""
    path = os.path.join(run_dir, "meta.json")
    with open(path) as f:
        meta = json.load(f)
    meta["run_info"]["kernel_release"] = release
    meta["kernel"]["release"] = release
    with open(path, "w") as f:
        json.dump(meta, f)


class KernelBase(unittest.TestCase):
    """No trend and no check joins runs of two Linux bases (6.1, 6.12)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        t = self.tmp.name
        self.store = os.path.join(t, "store")
        self.runs = []
        for i, rel in enumerate(("6.1.192+", "6.1.192+", "6.12.118+")):
            r = _run(t, f"2026120{i + 1}-013000-fragmented",
                     f"2026-12-0{i + 1}T01:30:00Z", seed=10 + i, reps=5)
            _on_kernel(r, rel)
            H.append(r, None, self.store)
            self.runs.append(r)
        self.baseline = os.path.join(t, "base.json")

    def tearDown(self):
        self.tmp.cleanup()

    def test_trends_split_by_base_and_baseline_on_its_own(self):
        # a nightly baseline (reports/lab/gate.py) made on 6.1
        with open(self.baseline, "w") as f:
            json.dump({"format": "gate-1", "metric": "cpu_per_mib",
                       "ratio": "btrfs-extent/btrfs-inode", "floor_pct": 0.5,
                       "identity": {"kernel_base": "6.1"},
                       "phases": {p: {"mean_ratio": 1.01,
                                      "threshold_log": 0.004}
                                  for p in ("seqread", "randread",
                                            "randwrite")}}, f)
        out = os.path.join(self.tmp.name, "trend")
        H.plot("fragmented", out, self.baseline, self.store)
        with open(os.path.join(out, "index.html")) as f:
            page = f.read()
        heads = re.findall(r"<h2>([^<]+)</h2>", page)
        self.assertIn("btrfs-extent/btrfs-inode seqread (Linux 6.1): "
                      "throughput ratio", heads)
        self.assertIn("btrfs-extent/btrfs-inode seqread (Linux 6.12): "
                      "throughput ratio", heads)
        self.assertFalse(any(h.startswith("btrfs-extent/btrfs-inode seqread:")
                             for h in heads), "a trend joins both bases")
        # the 6.1 baseline's line is drawn on 6.1 trends only
        for svg in re.findall(r"<h2>([^<]+)</h2>\s*<div class=\"plot\">(.*?)"
                              r"</div>", page, re.S):
            if "(Linux 6.12)" in svg[0]:
                self.assertNotIn("baseline ", svg[1], svg[0])

    def test_trends_split_by_accel_and_run_kind(self):
        # a nightly boot under icount beside make bench runs under tcg
        t = self.tmp.name
        r = _run(t, "20261207-013000-fragmented", "2026-12-07T01:30:00Z",
                 seed=20, reps=5)
        _on_kernel(r, "6.12.118+")
        path = os.path.join(r, "meta.json")
        with open(path) as f:
            meta = json.load(f)
        meta["run_info"]["accel"] = "icount"
        meta["boot"] = {"boot_label": "nightly", "boot_index": "1"}
        with open(path, "w") as f:
            json.dump(meta, f)
        H.append(r, None, self.store)
        out = os.path.join(t, "trend2")
        H.plot("fragmented", out, None, self.store)
        with open(os.path.join(out, "index.html")) as f:
            heads = re.findall(r"<h2>([^<]+)</h2>", f.read())
        self.assertIn("btrfs-extent/btrfs-inode seqread (Linux 6.12, "
                      "icount, nightly): CPU cost per MiB ratio", heads)
        self.assertIn("btrfs-extent/btrfs-inode seqread (Linux 6.12, tcg, "
                      "bench): CPU cost per MiB ratio", heads)
