"""Tests of reports/lab/wl_rekey.py on synthetic runs (no VM): each arm's
ratio twokeys / onekey, the key work per read of the count passes, the
preparation's rekey, the verdicts (no phase judged) and the report end to
end.

    /usr/bin/python3 -m unittest reports.lab.test_wl_rekey
"""

import json
import os
import unittest

from reports.lab import synthrun
from reports.lab import wl_rekey as W
from reports.lab.doc import Doc
from reports.lab.runmodel import Run, load_run

ARMS = ("btrfs-extent", "btrfs-extent-key")


class RekeyTest(synthrun.TwoRunsCase):
    SYNTH = {"rekey": True}

    def test_interface(self):
        run = load_run(self.five)
        self.assertEqual(W.KIND, "rekey")
        self.assertFalse(W.owns_phases(run.phases))
        self.assertEqual(W.judged_phases(run.phases), [])
        self.assertEqual(W.read_kinds(run), [
            ("seqread", "seqread-onekey", "seqread-twokeys"),
            ("randread", "randread-onekey", "randread-twokeys")])
        # a kind with one file only is no pair
        self.assertEqual(W.read_kinds(Run(phases=["seqread-onekey",
                                                  "randread-twokeys"])), [])

    def test_ratios(self):
        run, res = self.analyzed(self.five)
        wl = res["workload"]
        json.dumps(wl)  # stored in results.json
        self.assertEqual(sorted(wl["arms"]), sorted(ARMS))
        for arm, want in synthrun.REKEY_TWOKEYS.items():
            for kind in ("seqread", "randread"):
                r = wl["arms"][arm]["reads"][kind]["ratios"]
                self.assertAlmostEqual(r["bw_bytes"]["ratio"], want, places=6)
                self.assertTrue(r["bw_bytes"]["ci_supported"])
                self.assertEqual(r["bw_bytes"]["n_pairs"], 5)
                # CPU ticks are rounded: close to the inverse
                self.assertAlmostEqual(r["cpu_per_mib"]["ratio"], 1 / want,
                                       places=2)
                self.assertIsNotNone(wl["arms"][arm]["reads"][kind]["p99"])
        # 10 % slower is significant, 2 % is under the threshold
        seq = wl["arms"]["btrfs-extent"]["reads"]["seqread"]["ratios"]
        self.assertTrue(seq["bw_bytes"]["significant"])
        key = wl["arms"]["btrfs-extent-key"]["reads"]["seqread"]["ratios"]
        self.assertFalse(key["bw_bytes"]["significant"])

    def test_counts_per_read(self):
        run, res = self.analyzed(self.five)
        cnt = res["workload"]["arms"]["btrfs-extent"]["counts"]
        two = cnt["seqread-twokeys"]
        self.assertEqual(two["reads"], 544)
        self.assertEqual(two["counters"]["derivations"], 2)
        self.assertAlmostEqual(two["per_read"]["slot_programs"], 2 / 544)
        self.assertEqual(cnt["randread-onekey"]["per_read"]["lookups"], 1.0)
        key = res["workload"]["arms"]["btrfs-extent-key"]["counts"]
        self.assertAlmostEqual(key["seqread-onekey"]["per_read"]["derivations"],
                               17408 / 544)
        self.assertEqual(key["randread-twokeys"]["counters"]["derivations"],
                         4097)
        # without the pass's fio output there is no per-read value
        os.remove(os.path.join(self.five, "profiles", "btrfs-extent",
                               "count-randread-onekey.json"))
        try:
            run, res = self.analyzed(self.five)
            cp = res["workload"]["arms"]["btrfs-extent"]["counts"][
                "randread-onekey"]
            self.assertIsNone(cp["reads"])
            self.assertIsNone(cp["per_read"]["lookups"])
        finally:
            synthrun.rekey_extras(self.five, list(ARMS))

    def test_prep_rekey(self):
        run, res = self.analyzed(self.five)
        pr = res["workload"]["arms"]["btrfs-extent"]["prep_rekey"]
        self.assertEqual((pr["from_seed"], pr["to_seed"], pr["nr_files"],
                          pr["elapsed_ns"]), (1, 2, 1, 2500000))
        self.assertEqual(run.warnings, [])

    def test_verdicts_judge_nothing(self):
        run, res = self.analyzed(self.five)
        self.assertEqual(len(res["verdicts"]), 1)
        v = res["verdicts"][0]
        self.assertEqual(v.status, "not judged")
        self.assertIn("twokeys / onekey", v.text)

    def test_too_few_reps(self):
        run, res = self.analyzed(self.one)
        r = res["workload"]["arms"]["btrfs-extent"]["reads"]["seqread"][
            "ratios"]["bw_bytes"]
        self.assertFalse(r["ci_supported"])
        self.assertEqual(r["not_conclusive"], "not conclusive (n = 1)")
        self.assertAlmostEqual(r["ratio"], 0.9, places=6)

    def test_render_and_plot(self):
        run, res = self.analyzed(self.five)
        out = os.path.join(self.tmp, "plots")
        os.makedirs(out, exist_ok=True)
        plots = W.plot(run, res, out, {})
        self.assertTrue(os.path.getsize(os.path.join(out, plots["rekey"])))
        doc = Doc()
        W.render(doc, run, res, plots)
        md = doc.to_md()
        self.assertIn("Reads across a rekey", md)
        self.assertIn("| btrfs-extent | seqread | throughput, MiB/s |", md)
        self.assertIn("0.900", md)
        self.assertIn("1.111", md)
        self.assertIn("2 (0.00368)", md)     # twokeys' seqread slots
        self.assertIn("K1 to K2", md)
        self.assertIn("skipped:", md)
        empty = Doc()
        W.render(empty, run, {"workload": None}, {})
        self.assertIn("not measured", empty.to_md())

    def test_report_end_to_end(self):
        md = self.report_md("rekey", "rekey.png")
        self.assertIn("## Reads across a rekey", md)
        self.assertIn("### Key work per read", md)
        # the generic sections of fio's numbers are there too
        self.assertIn("## Throughput", md)


if __name__ == "__main__":
    unittest.main()
