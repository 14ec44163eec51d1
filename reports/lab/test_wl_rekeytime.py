"""Tests of reports/lab/wl_rekeytime.py and of command phases in the run model
(no VM): the rekey's results per rep, time and cost per name against the
names, the exponent, the log-log plot and the report of a run without a
fio phase, end to end.

    /usr/bin/python3 -m unittest reports.lab.test_wl_rekeytime
"""

import json
import math
import os
import shutil
import tempfile
import unittest

from reports.lab import synthrun
from reports.lab import wl_rekeytime as W
from reports.lab.analysis import analyze
from reports.lab.doc import Doc
from reports.lab.generate import generate
from reports.lab.runmodel import load_run, read_command_result

ARMS = ("btrfs-extent", "btrfs-extent-key")
PHASES = [f"rekey-n{n}" for n in synthrun.REKEYTIME_POINTS]


class RekeyTimeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="wl-rekeytime-")
        self.dir = os.path.join(self.tmp, "run")
        synthrun.make_run(self.dir, seed=2, reps=3, rekeytime=True)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_run_model(self):
        run = load_run(self.dir)
        self.assertEqual(run.phases, [])
        self.assertEqual(run.command_phases, PHASES)
        self.assertEqual(sorted(run.measured), sorted(ARMS))
        d = run.commands["btrfs-extent"]["rekey-n1000"][2]
        self.assertEqual(d["file"], "raw/btrfs-extent/rep2/rekey-n1000.tsv")
        self.assertEqual((d["nr_names"], d["nr_dirs"], d["nr_files"]),
                         (1001, 2, 1000))
        self.assertEqual(d["cpu_source"], "schedstat")
        self.assertAlmostEqual(d["cpu_s"], d["elapsed_ns"] // 2 / 1e9)
        el = run.command_values("btrfs-extent", "rekey-n10000", "elapsed_ns")
        self.assertEqual(sorted(el), [1, 2, 3])
        self.assertEqual(el[1], round(10010 * 20000 * 1.01))
        # strings are not numbers
        self.assertEqual(run.command_values("btrfs-extent", "rekey-n1000",
                                        "cpu_source"), {})
        self.assertEqual(run.warnings, [])

    def test_missing_result_is_a_data_problem(self):
        os.remove(os.path.join(self.dir, "raw", "btrfs-extent", "rep3",
                               "rekey-n1000.tsv"))
        run = load_run(self.dir)
        self.assertIn("missing raw/btrfs-extent/rep3/rekey-n1000.tsv",
                      run.warnings)
        self.assertEqual(sorted(run.commands["btrfs-extent"]
                                ["rekey-n1000"]), [1, 2])

    def test_read_command_result(self):
        path = os.path.join(self.tmp, "r.tsv")
        with open(path, "w") as f:
            f.write("a\t12\nb\t-3\nc\t1.5\nd\tK1 to K2\nnot a line\n"
                    "e\tx\ty\na\t13\ncpu_units\t250\ncpu_units_per_s\t100\n")
        got = read_command_result(path)
        self.assertEqual(got, {"a": 13, "b": -3, "c": 1.5, "d": "K1 to K2",
                               "cpu_units": 250, "cpu_units_per_s": 100,
                               "cpu_s": 2.5})

    def test_points(self):
        run = load_run(self.dir)
        wl = analyze(run, 5.0)["workload"]
        json.dumps(wl)
        self.assertEqual(wl["dir_names"], 1000)
        for arm, ns in synthrun.REKEYTIME_NS.items():
            e = wl["arms"][arm]
            self.assertEqual([p["nominal"] for p in e["points"]],
                             list(synthrun.REKEYTIME_POINTS))
            p = e["points"][1]
            self.assertEqual(p["names"], 10010)
            self.assertEqual(p["counts"], p["expected"])
            self.assertEqual(p["directions"], ["K1 to K2"])
            self.assertEqual(p["elapsed_ns"]["n"], 3)
            # rep 2 is the median: x 1.02
            self.assertAlmostEqual(p["ns_per_name"]["median"], ns * 1.02,
                                   places=0)
            self.assertAlmostEqual(p["cpu_s"]["median"],
                                   10010 * ns * 1.02 / 2 / 1e9, places=6)
            # time proportional to the names: exponent 1
            self.assertAlmostEqual(e["exponent"], 1.0, places=3)
            self.assertAlmostEqual(e["slopes"][0], 1.0, places=3)
        self.assertEqual(run.warnings, [])

    def test_unexpected_counts_warn(self):
        def moved(reps, files):
            for rep in reps:
                with open(os.path.join(self.dir, "raw", "btrfs-extent",
                                       f"rep{rep}", "rekey-n1000.tsv"),
                          "a") as f:
                    f.write(f"nr_files\t{files}\n")
        # one rep moved other counts than the others
        moved([1], 999)
        run = load_run(self.dir)
        analyze(run, 5.0)
        self.assertEqual(run.warnings, ["btrfs-extent rekey-n1000: the "
                                           "reps moved different nr_files"])
        # every rep moved other counts than the layout gives
        moved([1, 2, 3], 999)
        run = load_run(self.dir)
        analyze(run, 5.0)
        self.assertEqual(len(run.warnings), 1, run.warnings)
        self.assertIn("btrfs-extent rekey-n1000: the rekey moved",
                      run.warnings[0])
        self.assertIn("'nr_files': 999", run.warnings[0])

    def test_fit(self):
        self.assertAlmostEqual(W.fit_exponent([10, 100, 1000],
                                              [5, 500, 50000]), 2.0)
        self.assertIsNone(W.fit_exponent([10], [5]))
        self.assertIsNone(W.fit_exponent([10, 10], [5, 6]))
        self.assertAlmostEqual(W.slope(10, 1, 1000, 10), 0.5)
        self.assertIsNone(W.slope(10, 0, 100, 1))
        self.assertEqual(W.expected_counts(2500, 1000),
                         {"nr_dirs": 4, "nr_names": 2503, "nr_symlinks": 0,
                          "nr_files": 2500})

    def test_verdicts_and_interface(self):
        run = load_run(self.dir)
        res = analyze(run, 5.0)
        self.assertEqual(W.judged_phases(run.phases), [])
        self.assertFalse(W.owns_phases(PHASES))
        self.assertEqual(len(res["verdicts"]), 1)
        self.assertIn("command phase", res["verdicts"][0].text)
        self.assertEqual(res["comparisons"], [])

    def test_render_and_plot(self):
        run = load_run(self.dir)
        res = analyze(run, 5.0)
        out = os.path.join(self.tmp, "plots")
        os.makedirs(out)
        plots = W.plot(run, res, out, {})
        self.assertTrue(os.path.getsize(os.path.join(out,
                                                     plots["rekeytime"])))
        doc = Doc()
        W.render(doc, run, res, plots)
        md = doc.to_md()
        self.assertIn("Rekey time against names", md)
        self.assertIn("10010/11/10000/0", md)
        self.assertIn("fit 1.00", md)
        self.assertIn("20.4", md)     # btrfs-extent µs per name, rep 2
        self.assertIn("skipped:", md)
        empty = Doc()
        W.render(empty, run, {"workload": None}, {})
        self.assertIn("not measured", empty.to_md())

    def test_report_without_fio_phases(self):
        out = os.path.join(self.tmp, "report")
        res = generate(self.dir, out)
        self.assertEqual(res["workload_kind"], "rekeytime")
        self.assertTrue(os.path.exists(os.path.join(out, "rekeytime.png")))
        for name in ("throughput.png", "latency.png", "cpu.png",
                     "ratio_main.png", "run_order.png"):
            self.assertFalse(os.path.exists(os.path.join(out, name)), name)
        with open(os.path.join(out, "summary.md"), encoding="utf-8") as f:
            md = f.read()
        self.assertIn("## Rekey time against names", md)
        self.assertIn("## Phases", md)
        self.assertNotIn("## Throughput", md)
        self.assertIn("`rekey-n1000, rekey-n10000`", md)
        self.assertIn("none run by fio", md)
        self.assertTrue(math.isclose(
            res["workload"]["arms"]["btrfs-extent"]["exponent"], 1.0,
            abs_tol=1e-3))


if __name__ == "__main__":
    unittest.main()
