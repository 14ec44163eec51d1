"""Honest verdicts: with too few reps for a CI or a significance test,
every verdict and the regression check say "not conclusive (n = N)" and
show no CI (issue 15, items 4 and 7).

Run from the repo root: /usr/bin/python3 -m unittest -v reports.lab.test_verdicts
"""

import json
import math
import os
import tempfile
import unittest
import xml.etree.ElementTree as ET

from reports.lab import labstats as L
from reports.lab import synthrun
from reports.lab import analysis as A
from reports.lab import fmt
from reports.lab import generate
from reports.lab import runmodel as M


class Rules(unittest.TestCase):
    def test_median_at_extreme_known_values(self):
        # n = 3: at least 2 of 3 draws are the minimum: 3 (1/3)^2 (2/3) +
        # (1/3)^3 = 7/27
        self.assertEqual(L.median_at_extreme(1), 1.0)
        self.assertAlmostEqual(L.median_at_extreme(2), 0.25, places=12)
        self.assertAlmostEqual(L.median_at_extreme(3), 7 / 27, places=12)
        # n = 4: at least 3 of 4: 4 (1/4)^3 (3/4) + (1/4)^4 = 13/256
        self.assertAlmostEqual(L.median_at_extreme(4), 13 / 256, places=12)

    def test_median_at_extreme_matches_simulation(self):
        import numpy as np
        rng = np.random.default_rng(7)
        x = np.arange(5.0)
        draws = rng.integers(0, 5, size=(200000, 5))
        freq = float(np.mean(np.median(x[draws], axis=1) == 0.0))
        self.assertAlmostEqual(freq, L.median_at_extreme(5), delta=0.003)

    def test_ci_needs_four_reps_per_arm(self):
        self.assertFalse(L.ci_supported(1, 1))
        self.assertFalse(L.ci_supported(3, 3))
        self.assertFalse(L.ci_supported(3, 10))  # the smaller arm decides
        self.assertTrue(L.ci_supported(4, 4))
        self.assertTrue(L.ci_supported(5, 5))
        self.assertEqual(L.reps_for_ci(), 4)

    def test_test_needs_four_reps_per_arm(self):
        self.assertEqual(L.reps_for_test(), 4)
        self.assertLess(L.min_mw_p(4, 4), L.ALPHA)
        self.assertGreaterEqual(L.min_mw_p(3, 3), L.ALPHA)

    def test_conclusive_text(self):
        self.assertEqual(L.conclusive_n(1, 1), "not conclusive (n = 1)")
        self.assertEqual(L.conclusive_n(2, 5), "not conclusive (n = 2 vs 5)")
        self.assertIsNone(L.conclusive_n(5, 5))
        self.assertIn("at least 4 paired reps", L.reps_needed_text())


def _analyze(run_dir):
    run = M.load_run(run_dir)
    return A.analyze(run, A.DEFAULT_THRESHOLD)


class ThreeValued(unittest.TestCase):
    """A verdict with a CI is "met" only when the whole CI is on the
    goal's side, "not met" when all of it is on the other side, and
    "undecided" when it contains the goal (issue 34, review H3: an
    undecided verdict used to be stored as "met" from its point estimate);
    the metrics beside it follow the same rule."""

    @staticmethod
    def ratio(value, lo, hi):
        return {"ratio": value, "ci_lo": lo, "ci_hi": hi,
                "not_conclusive": None}

    def test_lower_is_better(self):
        for lo, hi, want in ((1.010, 1.025, "met"), (1.031, 1.040, "not met"),
                             (1.021, 1.036, "undecided"),
                             (1.000, 1.030, "met")):
            status, text, fields = A._judge(self.ratio(1.028, lo, hi), 1.03,
                                            "lower")
            self.assertEqual(status, want, (lo, hi))
            self.assertIn(f"**{want}**", text)
            self.assertEqual(fields["conclusive"], want != "undecided")

    def test_higher_is_better(self):
        for lo, hi, want in ((0.975, 0.99, "met"), (0.90, 0.96, "not met"),
                             (0.96, 0.99, "undecided")):
            status, _, _ = A._judge(self.ratio(0.98, lo, hi), 0.97, "higher")
            self.assertEqual(status, want, (lo, hi))

    def test_point_estimate_alone_never_says_met(self):
        # the point estimate meets the goal, the CI does not decide
        status, _, _ = A._judge(self.ratio(1.028, 1.021, 1.036), 1.03, "lower")
        self.assertNotEqual(status, "met")

    def test_beside_follows_the_same_rule(self):
        text, status = A._beside(self.ratio(0.98, 0.96, 0.99), 0.97, "higher",
                                 "throughput", True)
        self.assertEqual(status, "undecided")
        self.assertIn("goal ≥ 0.97: undecided", text)
        _, status = A._beside(self.ratio(0.98, 0.975, 0.99), 0.97, "higher",
                              "throughput", True)
        self.assertEqual(status, "met")
        _, status = A._beside(self.ratio(0.98, 0.96, 0.99), 0.97, "higher",
                              "throughput", False)
        self.assertIsNone(status)


class Verdicts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.one = os.path.join(cls.tmp.name, "one")
        cls.five = os.path.join(cls.tmp.name, "five")
        synthrun.make_run(cls.one, seed=11, reps=1)
        synthrun.make_run(cls.five, seed=12, reps=5)
        cls.res1 = _analyze(cls.one)
        cls.res5 = _analyze(cls.five)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_one_rep_every_verdict_not_conclusive(self):
        vs = self.res1["verdicts"]
        # one per phase, reads and the write, on CPU cost per MiB
        self.assertEqual([v.phase for v in vs],
                         ["seqread", "randread", "randwrite"])
        for v in vs:
            self.assertEqual(v.status, A.NOT_CONCLUSIVE, v)
            self.assertEqual(v.basis, "cpu_per_mib")
            self.assertIn("**not conclusive (n = 1)**", v.text)
            self.assertNotIn("(95% CI", v.text)
            self.assertNotIn("met", v.text)
            self.assertIn("at least 4 paired reps", v.text)
            self.assertIsNone(v.ci_lo)
            self.assertNotIn("ci_lo", v.to_json())

    def test_one_rep_no_ci_anywhere(self):
        for c in self.res1["comparisons"]:
            if not c.measured:
                continue
            self.assertTrue(math.isnan(c.bw["ci_lo"]), c)
            self.assertFalse(c.bw["ci_supported"])
            for q in ("p50", "p99", "p99.9"):
                self.assertTrue(math.isnan(c.latency[q]["ci_lo"]))
                self.assertEqual(c.latency[q]["not_conclusive"],
                                 "not conclusive (n = 1)")

    def test_one_rep_cells_say_why(self):
        c = [c for c in self.res1["comparisons"]
             if c.a == "btrfs-extent" and c.phase == "seqread"][0]
        self.assertEqual(fmt.fmt_ci_of(c.bw), "none: not conclusive (n = 1)")

    def test_five_reps_verdicts_with_ci(self):
        for v in self.res5["verdicts"]:
            self.assertIn(v.status, A.JUDGED, v)
            self.assertTrue(v.judged)
            self.assertIn("95% CI", v.text)
            self.assertLessEqual(v.ci_lo, v.ci_hi)

    def test_statuses_are_the_documented_ones(self):
        for res in (self.res1, self.res5):
            self.assertTrue(res["verdicts"])
            for v in res["verdicts"]:
                self.assertIsInstance(v, A.Verdict)
                self.assertIn(v.status, A.STATUSES, v)
            for c in res["comparisons"]:
                self.assertIsInstance(c, A.PhaseComparison)
                self.assertIn(c.status, (A.MEASURED, A.NOT_MEASURED), c)

    def test_records_read_back_from_results_json(self):
        # what generate writes (jsonable of to_json) reads back into
        # records that write the same JSON again; verdicts read back equal
        for res in (self.res1, self.res5):
            disk = json.loads(json.dumps(generate.jsonable(res)))
            for cls, key in ((A.Verdict, "verdicts"),
                             (A.PhaseComparison, "comparisons")):
                for d in disk[key]:
                    self.assertEqual(generate.jsonable(cls.from_json(d)), d)
            self.assertEqual([A.Verdict.from_json(d)
                              for d in disk["verdicts"]], res["verdicts"])

    def test_results_json_keys_in_their_order(self):
        # the keys, and their order, of the results.json of every report
        # since the three-valued verdicts (2026-12-07)
        v = self.res5["verdicts"][0]
        self.assertEqual(list(v.to_json()), [
            "metric", "phase", "goal", "goal_text", "decides", "basis",
            "status", "text", "value", "ci_lo", "ci_hi", "conclusive",
            "beside"])
        c = next(c for c in self.res5["comparisons"] if c.measured)
        self.assertEqual(list(c.to_json()), [
            "a", "b", "label", "phase", "status", "n_a", "n_b", "bw", "cpu",
            "cpu_per_op", "per_rep_ratio", "latency"])
        c = A.PhaseComparison(M.Comparison("x", "y"), "seqread",
                              A.NOT_MEASURED, "x skipped: no")
        self.assertEqual(c.to_json(), {
            "a": "x", "b": "y", "label": "", "phase": "seqread",
            "status": "not measured", "reason": "x skipped: no"})

    def test_old_verdicts_load(self):
        # a verdict of an old report: keys missing, a key not written now
        v = A.Verdict.from_json({"phase": "seqread", "metric": "throughput",
                                 "status": "met", "old_key": 1})
        self.assertEqual((v.phase, v.metric, v.status, v.text),
                         ("seqread", "throughput", "met", ""))
        self.assertFalse(v.note)
        self.assertTrue(A.Verdict.from_json({"status": "not judged"}).note)


class CpuVerdicts(unittest.TestCase):
    """The main comparison's verdicts decide on CPU cost per MiB; without
    CPU data they fall back to throughput and p99, labelled so."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        t = cls.tmp.name
        synthrun.make_run(os.path.join(t, "cpu"), seed=31, reps=5)
        # 10% more CPU per MiB on btrfs-extent, throughput unchanged
        synthrun.make_run(os.path.join(t, "costly"), seed=31, reps=5,
                          cpu_scale=["btrfs-extent=1.1"])
        synthrun.make_run(os.path.join(t, "nocpu"), seed=31, reps=5,
                          cpu=False)
        synthrun.make_run(os.path.join(t, "f2"), seed=31, reps=5,
                          format2=True)
        cls.res = {n: _analyze(os.path.join(t, n))
                   for n in ("cpu", "costly", "nocpu", "f2")}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_decided_on_cpu_per_mib(self):
        vs = self.res["cpu"]["verdicts"]
        self.assertEqual([(v.phase, v.metric, v.status) for v in vs],
                         [(p, "CPU per MiB", A.MET)
                          for p in ("seqread", "randread", "randwrite")])
        for v in vs:
            self.assertIn("CPU cost per MiB", v.text)
            self.assertIn("Beside it (not deciding): throughput", v.text)
            self.assertIn("p99 latency", v.text)
            self.assertEqual(v.goal, 1.03)

    def test_costlier_cpu_fails_with_throughput_unchanged(self):
        vs = self.res["costly"]["verdicts"]
        self.assertEqual({v.status for v in vs}, {A.NOT_MET})
        for v in vs:
            self.assertAlmostEqual(v.value, 1.01 * 1.1, delta=0.02)
        # the throughput beside it is not below its goal on the reads
        # (met, or undecided where its CI reaches the goal)
        self.assertIn(vs[0].beside["throughput"], (A.MET, A.UNDECIDED))

    def test_cpu_ratio_is_the_one_definition(self):
        c = [c for c in self.res["cpu"]["comparisons"]
             if c.a == "btrfs-extent" and c.phase == "seqread"][0]
        run = M.load_run(os.path.join(self.tmp.name, "cpu"))
        want = L.ratio(run.values("btrfs-extent", "seqread",
                                       "cpu_per_mib"),
                       run.values("btrfs-inode", "seqread",
                                       "cpu_per_mib"))
        self.assertEqual(c.cpu["ratio"], want["value"])
        self.assertEqual((c.cpu["ci_lo"], c.cpu["ci_hi"]),
                         (want["ci_lo"], want["ci_hi"]))

    def test_without_cpu_data_the_old_metric_labelled(self):
        for name in ("nocpu", "f2"):
            vs = self.res[name]["verdicts"]
            # 2 read phases x throughput, p99; the write is not judged
            self.assertEqual([(v.phase, v.metric) for v in vs],
                             [("seqread", "throughput"),
                              ("seqread", "p99 latency"),
                              ("randread", "throughput"),
                              ("randread", "p99 latency")], name)
            for v in vs:
                self.assertEqual(v.basis, "fallback")
                self.assertIn("[old metric:", v.text)
                self.assertIn(v.status, A.JUDGED)
        self.assertIn("format-2 run", self.res["f2"]["verdicts"][0].text)


class VerdictsJUnit(unittest.TestCase):
    """verdicts.xml: met passes, not met fails, the rest is skipped."""

    def test_three_values(self):
        verdicts = [
            A.Verdict(A.MET, "fine", "CPU per MiB", "seqread"),
            A.Verdict(A.NOT_MET, "too costly", "CPU per MiB", "randread"),
            A.Verdict(A.UNDECIDED, "CI contains the goal", "CPU per MiB",
                      "randwrite"),
            A.Verdict(A.NOT_JUDGED, "bounded points")]
        with tempfile.TemporaryDirectory() as t:
            path = os.path.join(t, "v.xml")
            generate.write_junit(path, "bench.fragmented", verdicts)
            root = ET.parse(path).getroot()
        self.assertEqual((root.get("tests"), root.get("failures"),
                          root.get("skipped")), ("4", "1", "2"))
        cases = {c.get("name"): c for c in root.iter("testcase")}
        self.assertIsNone(cases["seqread CPU per MiB"].find("failure"))
        self.assertIsNotNone(cases["randread CPU per MiB"].find("failure"))
        self.assertIn("undecided", cases["randwrite CPU per MiB"]
                      .find("skipped").get("message"))
