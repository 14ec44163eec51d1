"""A run describes itself (issue #22, item 2): everything the report, the
gate and the history need is read from the run directory, so changing
the lab's arm and workload definitions after a run changes none of its
numbers.

Run from the repo root:
    /usr/bin/python3 -m unittest -v reports.lab.test_selfdescribing
"""

import contextlib
import io
import json
import os
import shutil
import tempfile
import unittest
from unittest import mock

from reports.lab import gate as GT
from reports.lab import generate as G
from reports.lab import history as H
from reports.lab import runmodel as M
from reports.lab import synthrun


def _edit(path, old, new):
    with open(path) as f:
        text = f.read()
    assert old in text, (path, old)
    with open(path, "w") as f:
        f.write(text.replace(old, new))


def _quiet(fn, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(io.StringIO()):
        rc = fn(*args)
    return rc, out.getvalue()


class SelfDescribing(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        t = self.tmp.name
        # the arm and workload definitions a run is made from: copies of
        # the lab's, which the test then changes
        self.arms = os.path.join(t, "arms")
        self.workloads = os.path.join(t, "workloads")
        shutil.copytree(M.ARMS_DIR, self.arms)
        shutil.copytree(M.WORKLOADS_DIR, self.workloads)

    def tearDown(self):
        self.tmp.cleanup()

    def change_definitions(self):
        """Change what the lab's definitions say, every way the report
        could show: the main comparison, references, order, descriptions,
        goals and the analysis kind."""
        a = self.arms
        # btrfs-plain becomes the first comparison, against btrfs-inode
        _edit(os.path.join(a, "btrfs-plain.conf"), "REFERENCE=ext4-plain",
              "REFERENCE=btrfs-inode")
        _edit(os.path.join(a, "btrfs-plain.conf"), "COMPARISON_ORDER=5",
              "COMPARISON_ORDER=0")
        _edit(os.path.join(a, "btrfs-extent.conf"), "REFERENCE=btrfs-inode",
              "REFERENCE=btrfs-extent-key")
        _edit(os.path.join(a, "btrfs-extent.conf"), "ORDER=1", "ORDER=9")
        _edit(os.path.join(a, "btrfs-extent.conf"), 'DESCRIPTION="btrfs',
              'DESCRIPTION="CHANGED btrfs')
        _edit(os.path.join(a, "btrfs-extent.conf"), "KEY_MODE=per-extent",
              "KEY_MODE=changed")
        conf = os.path.join(self.workloads, "fragmented", "workload.conf")
        _edit(conf, "ANALYSIS=phases", "ANALYSIS=scaling\nGOAL_BW=0.5\n"
              "GOAL_CPU_PER_MIB=2")
        _edit(conf, 'description="files', 'description="CHANGED files')

    def outputs(self, run_dir, out_dir, base):
        """Everything the lab says about a run: the report's results.json
        and summary.md, what the gate reads of it, the history's points."""
        rc, _ = _quiet(G.main, [run_dir, out_dir])
        self.assertEqual(rc, 0)
        with open(os.path.join(out_dir, "results.json")) as f:
            results = f.read()
        with open(os.path.join(out_dir, "summary.md")) as f:
            summary = f.read()
        try:
            boot = GT.load_boot(run_dir)
            check = json.dumps({"ratio": boot.ratio,
                                "phases": {p: v.logs for p, v
                                           in boot.phases.items()}})
        except GT.GateError as e:
            check = str(e)
        store = os.path.join(self.tmp.name, "store-" + os.path.basename(
            out_dir))
        H.append(run_dir, out_dir, store)
        hist = {k: [(p["value"], p["ci_lo"], p["ci_hi"], p["ord"])
                    for p in v]
                for k, v in H.series("fragmented", store).items()}
        return results, summary, check, hist

    def same_after_change(self, run_dir):
        base = None
        # point the working-tree lookups at the copies
        with mock.patch.object(M, "ARMS_DIR", self.arms), \
                mock.patch.object(M, "WORKLOADS_DIR", self.workloads):
            before = self.outputs(run_dir, os.path.join(self.tmp.name, "r1"),
                                  base)
            self.change_definitions()
            # the lab now reads the changed definitions...
            self.assertEqual(M.comparisons_of(M.read_arm_specs())[0]["a"],
                             "btrfs-plain")
            # ...and never reads them for a run: a lookup would fail
            with mock.patch.object(M, "read_arm_specs",
                                   side_effect=AssertionError(
                                       "read the arm definitions")):
                after = self.outputs(run_dir,
                                     os.path.join(self.tmp.name, "r1"), base)
        names = ("results.json", "summary.md", "gate", "history")
        for name, b, a in zip(names, before, after):
            self.assertEqual(b, a, f"{name} changed with the definitions")
        return before

    def test_format3_run_reads_only_its_own_spec(self):
        run_dir = os.path.join(self.tmp.name, "run")
        with mock.patch.object(M, "WORKLOADS_DIR", self.workloads):
            synthrun.make_run(run_dir, seed=5, reps=5, arms_dir=self.arms)
        results, summary, check, hist = self.same_after_change(run_dir)
        # and it is the run's description the report used
        self.assertNotIn("CHANGED", summary)
        self.assertIn("per-extent ÷ per-inode (btrfs-extent/btrfs-inode)",
                      summary)
        self.assertEqual(json.loads(results)["goals"]["cpu_per_mib_max"],
                         1.03)
        self.assertEqual(json.loads(check)["ratio"],
                         "btrfs-extent/btrfs-inode")
        self.assertIn(("cpu_per_mib", "btrfs-extent/btrfs-inode",
                       "seqread"), hist)

    def test_format2_run_reads_its_fallbacks_only(self):
        run_dir = os.path.join(self.tmp.name, "run2")
        synthrun.make_run(run_dir, seed=6, reps=5, format2=True)
        _, summary, _, hist = self.same_after_change(run_dir)
        self.assertIn("FORMAT2_ARMS", summary)
        self.assertIn("[old metric: a format-2 run has no CPU data]",
                      summary)
        self.assertFalse(any(k[0] == "cpu_per_mib" for k in hist))


if __name__ == "__main__":
    unittest.main()
