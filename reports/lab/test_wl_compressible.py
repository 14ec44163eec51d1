"""Tests of reports/lab/wl_compressible.py on synthetic runs (no VM): the
ratios of the pairs of arms, the bytes on disk and compression ratio per
arm, the verdicts (no phase judged) and the report end to end.

    /usr/bin/python3 -m unittest reports.lab.test_wl_compressible
"""

import json
import os
import unittest

from reports.lab import synthrun
from reports.lab import wl_compressible as W
from reports.lab.doc import Doc
from reports.lab.runmodel import load_run

S = synthrun.SPEED
C = synthrun.CPU_COST


class CompressibleTest(synthrun.TwoRunsCase):
    SYNTH = {"compressible": True}

    def test_interface(self):
        run = load_run(self.five)
        self.assertEqual(W.KIND, "compressible")
        self.assertEqual(run.analysis, "compressible")
        self.assertFalse(W.owns_phases(run.phases))
        self.assertEqual(W.judged_phases(run.phases), [])
        self.assertEqual((W.PAIRS[0].a, W.PAIRS[0].b),
                         ("btrfs-extent-zstd", "btrfs-plain-zstd"))
        # the arm files: the compressed ones, their references and order
        spec = run.arm_definitions
        self.assertEqual(spec["btrfs-extent-zstd"]["REFERENCE"],
                         "btrfs-plain-zstd")
        self.assertEqual(spec["btrfs-extent-zstd"]["REQUIRES"],
                         "/sys/fs/btrfs/features/encrypt_compress")
        self.assertIn("compress=zstd", spec["btrfs-plain-zstd"]["MOUNT_OPTS"])
        self.assertEqual(run.reference["btrfs-plain-zstd"], "btrfs-plain")

    def test_ratios(self):
        run, res = self.analyzed(self.five)
        wl = res["workload"]
        json.dumps(wl)  # stored in results.json
        self.assertEqual([(p["a"], p["b"]) for p in wl["pairs"]],
                         [(c.a, c.b) for c in W.PAIRS])
        for pair in wl["pairs"]:
            a, b = pair["a"], pair["b"]
            self.assertEqual(list(pair["phases"]),
                             ["seqread", "randread", "randwrite"])
            for c in pair["phases"].values():
                self.assertEqual(c["status"], "measured")
                self.assertAlmostEqual(c["bw"]["ratio"], S[a] / S[b],
                                       places=6)
                self.assertTrue(c["bw"]["ci_supported"])
                self.assertEqual(c["bw"]["n_pairs"], 5)
                # CPU ticks are rounded: close to the made-up costs
                self.assertAlmostEqual(c["cpu"]["ratio"], C[a] / C[b],
                                       places=2)
                self.assertIsNotNone(c["p99"]["ratio"])
        q = wl["pairs"][0]["phases"]["seqread"]["bw"]
        self.assertTrue(q["significant"])   # 5.3 % slower, above 5 %

    def test_bytes_on_disk(self):
        run, res = self.analyzed(self.five)
        disk = res["workload"]["disk"]
        self.assertEqual(list(disk), ["btrfs-extent-zstd", "btrfs-plain-zstd",
                                      "btrfs-extent", "btrfs-plain"])
        z = disk["btrfs-extent-zstd"]
        self.assertEqual((z["file_bytes"], z["disk_bytes"],
                          z["compressed_extents"], z["mount_compress"]),
                         (67108864, 25772032, 1024, "zstd:3"))
        self.assertAlmostEqual(z["ratio"], 67108864 / 25772032)
        self.assertAlmostEqual(z["disk_share"], 25772032 / 67108864)
        self.assertTrue(z["compsize"].startswith("error: "))
        self.assertEqual(disk["btrfs-plain-zstd"]["compsize"], "agrees")
        self.assertEqual(disk["btrfs-plain"]["ratio"], 1.0)
        self.assertEqual(run.warnings, [])

    def test_missing_or_disagreeing_bytes(self):
        path = os.path.join(self.five, "raw", "btrfs-plain", W.DISK_BYTES)
        with open(path) as f:
            text = f.read()
        try:
            with open(path, "w") as f:
                f.write(text.replace("compsize_disk_bytes\t67108864",
                                     "compsize_disk_bytes\t4096"))
            run, res = self.analyzed(self.five)
            self.assertEqual(res["workload"]["disk"]["btrfs-plain"][
                "compsize"], "differs")
            os.remove(path)
            run, res = self.analyzed(self.five)
            self.assertNotIn("btrfs-plain", res["workload"]["disk"])
            self.assertTrue(any(W.DISK_BYTES in w for w in run.warnings))
        finally:
            with open(path, "w") as f:
                f.write(text)

    def test_verdicts_judge_nothing(self):
        run, res = self.analyzed(self.five)
        self.assertEqual(len(res["verdicts"]), 1)
        v = res["verdicts"][0]
        self.assertIn("btrfs-extent-zstd against btrfs-plain-zstd", v.text)

    def test_too_few_reps(self):
        run, res = self.analyzed(self.one)
        r = res["workload"]["pairs"][0]["phases"]["seqread"]["bw"]
        self.assertFalse(r["ci_supported"])
        self.assertEqual(r["not_conclusive"], "not conclusive (n = 1)")

    def test_render_and_plot(self):
        run, res = self.analyzed(self.five)
        out = os.path.join(self.tmp, "plots")
        os.makedirs(out, exist_ok=True)
        plots = W.plot(run, res, out, {})
        self.assertTrue(os.path.getsize(os.path.join(out,
                                                     plots["compressible"])))
        doc = Doc()
        W.render(doc, run, res, plots)
        md = doc.to_md()
        self.assertIn("## Compression", md)
        self.assertIn("| btrfs-extent-zstd / btrfs-plain-zstd | seqread | "
                      "throughput | 0.947 |", md)
        self.assertIn("| btrfs-extent-zstd | zstd:3 | 64.00 (67108864) | "
                      "64.00 (67108864) | 64.00 (67108864) | "
                      "24.58 (25772032) | 38.40% | 2.604 | 1024 of 1024 | "
                      "error: ", md)
        self.assertIn("| 2.612 | 1024 of 1024 | agrees |", md)
        empty = Doc()
        W.render(empty, run, {"workload": None}, {})
        self.assertIn("not measured", empty.to_md())

    def test_report_end_to_end(self):
        md = self.report_md("compressible", "compressible.png")
        self.assertIn("### Bytes on disk", md)
        # the generic sections show the compressed arm against its reference
        self.assertIn("## Throughput", md)
        self.assertIn("| btrfs-extent-zstd | btrfs-plain-zstd | 5 |", md)


if __name__ == "__main__":
    unittest.main()
