"""Tests of reports/lab/gate.py: the nightly's baseline and check, bench-ab,
the variance components, on simulated sets with known noise (and one
set of synthetic runs on disk, for the loading path)."""

import json
import math
import os
import tempfile
import unittest

import numpy as np

from reports.lab import gate as G
from reports.lab import synthrun

PHASES = ("seqread", "randread", "randwrite")
IDENT = {"accel": "icount", "qemu_version": "7.2.22", "cpus": "1",
         "prep": "once", "arms": "btrfs-extent btrfs-inode", "reps": "5",
         "kernel_base": "6.12", "workload": "fragmented", "window": "io",
         "host_cpu_model": "x", "root_image_sha256": "y",
         "order_rule": "rotate", "series_hash": "z"}
# true SDs of the log-ratio: rep to rep, boot to boot, set to set
SD = {"within": 0.004, "boot": 0.002, "set": 0.001}


def sim_set(rng, kind="nightly", boots=2, reps=5, shift=0.0,
            labels=("nightly",), premium=0.03, ident=None, sd=SD):
    """A set whose boots draw per-rep log-ratios around log(1 + premium)
    (+ shift for the boots of label "new", or of every boot of a
    nightly with a shift)."""
    set_dev = rng.normal(0, sd["set"])
    out = []
    for i in range(boots):
        label = labels[i % len(labels)]
        s = shift if label in ("new", "nightly") else 0.0
        phases = {}
        for p in PHASES:
            mu = math.log1p(premium) + s + set_dev + rng.normal(0, sd["boot"])
            phases[p] = G.PhaseValue(list(rng.normal(mu, sd["within"],
                                                     reps)),
                                     ["ab"[r % 2] for r in range(reps)])
        out.append(G.Boot(index=i + 1, label=label, run=f"boot{i + 1}",
                          ratio="btrfs-extent/btrfs-inode", phases=phases,
                          identity=dict(ident or IDENT), injected_ns=0,
                          elapsed_s=300, other_vms=0, load1=1, date="d"))
    return G.Set(name=f"set{rng.integers(1 << 30)}", kind=kind,
                 workload="fragmented", boots=out, elapsed_s=600)


class Baseline(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(5)
        self.sets = [sim_set(self.rng) for _ in range(10)]
        self.base = G.make_baseline(self.sets, fa=0.02, floor_pct=0.5)

    def test_needs_nightly_aa_sets_of_one_environment(self):
        with self.assertRaises(G.GateError):
            G.make_baseline(self.sets[:2])
        other = sim_set(self.rng, ident=dict(IDENT, accel="kvm"))
        with self.assertRaisesRegex(G.GateError, "accel"):
            G.make_baseline(self.sets[:5] + [other])

    def test_a_new_aa_nightly_passes_and_a_shift_alerts(self):
        calls, _ = G.check(sim_set(self.rng), self.base)
        self.assertEqual({c.status for c in calls}, {"pass"})
        calls, _ = G.check(sim_set(self.rng, shift=math.log(1.03)),
                           self.base)
        self.assertEqual({c.status for c in calls}, {"regression"})

    def test_refuses_another_environment(self):
        for key, value in (("accel", "tcg"), ("qemu_version", "8.0"),
                           ("cpus", "2"), ("prep", "each"),
                           ("arms", "btrfs-extent btrfs-plain"),
                           ("kernel_base", "6.1")):
            with self.subTest(key=key):
                st = sim_set(self.rng, ident=dict(IDENT, **{key: value}))
                with self.assertRaisesRegex(G.GateError, key):
                    G.check(st, self.base)
        # one boot where the baseline had two
        with self.assertRaisesRegex(G.GateError, "boots"):
            G.check(sim_set(self.rng, boots=1), self.base)
        # another root image: a warning only
        _, warnings = G.check(
            sim_set(self.rng, ident=dict(IDENT, root_image_sha256="w")),
            self.base)
        self.assertTrue(any("root_image" in w for w in warnings))

    def test_false_alarm_rate_is_at_most_the_target(self):
        # 600 fresh A/A nightlies against the baseline: alerts at most
        # about 2% of the time (the t bound holds over baselines; this
        # checks one, with slack for it)
        alerts = sum(any(c.status == "regression"
                         for c in G.check(sim_set(self.rng), self.base)[0])
                     for _ in range(600))
        self.assertLess(alerts / 600, 0.06)

    def test_components_recover_the_simulated_spread(self):
        rng = np.random.default_rng(9)
        sets = [sim_set(rng) for _ in range(60)]
        c = G.components(sets, "seqread")
        self.assertAlmostEqual(c["within_sd"], SD["within"], delta=0.0006)
        self.assertAlmostEqual(c["between_boot_sd"], SD["boot"],
                               delta=0.0012)
        self.assertLess(c["between_set_sd"], 0.003)
        # the predicted SD of a nightly: what the sets' values spread by
        sd = G.design_sd(c, 2, 5)
        vals = [s.value("seqread") for s in sets]
        self.assertAlmostEqual(sd, float(np.std(vals, ddof=1)), delta=0.0008)

    def test_power_grows_with_the_shift(self):
        p1 = G.power_of(self.base, "seqread", math.log(1.01))
        p3 = G.power_of(self.base, "seqread", math.log(1.03))
        self.assertLess(p1, p3)
        self.assertGreater(p3, 0.95)
        table = G.power_table(self.base)
        self.assertEqual(table[0]["boots"], 1)
        # more boots: a smaller detectable change
        mdc = {(r["boots"], r["reps"]): r["phases"]["seqread"]["mdc95_pct"]
               for r in table}
        self.assertLess(mdc[(4, 5)], mdc[(1, 5)])

    def test_bound_uses_the_larger_spread(self):
        for p in PHASES:
            e = self.base["phases"][p]
            self.assertEqual(e["sd_used_log"],
                             max(e["sd_log"], e["sd_pred_log"]))
            self.assertAlmostEqual(e["threshold_log"],
                                   self.base["k"] * e["sd_used_log"])
        # the rule with the observed spread only is counted too
        self.assertIn("alerts", self.base["loo_observed_sd_only"])

    def test_leave_one_out_counts_the_baselines_own_false_alarms(self):
        loo = self.base["loo"]
        self.assertEqual(loo["tries"], 10)
        self.assertLessEqual(loo["alerts"], 1)
        self.assertIn(f"of {loo['tries']} A/A nightlies", G.fa_text(self.base))


class AB(unittest.TestCase):
    """make bench-ab's decision. With BOOTS=4 (2 old, 2 new) the boots
    alone give 2 degrees of freedom; the nightly baseline's spread of a
    boot's value (its A/A sets, many more) is pooled in when it was made
    in the same environment, as make bench-ab does."""

    def setUp(self):
        self.rng = np.random.default_rng(17)
        self.base = G.make_baseline([sim_set(self.rng) for _ in range(10)])

    def ab(self, shift, base=True):
        st = sim_set(self.rng, kind="ab", boots=4, labels=("old", "new"),
                     shift=shift)
        return G.ab(st, self.base if base else None)[0]

    def test_flags_a_slowdown_and_passes_aa(self):
        calls = self.ab(math.log(1.03))
        self.assertEqual({c.status for c in calls}, {"regression"})
        for c in calls:
            self.assertAlmostEqual(c.change_pct, 3.0, delta=1.0)
        calls = self.ab(0.0)
        self.assertEqual({c.status for c in calls}, {"pass"})

    def test_a_faster_new_is_not_a_regression(self):
        calls = self.ab(math.log(0.97))
        self.assertEqual({c.status for c in calls}, {"faster"})

    def test_aa_false_alarms_are_rare(self):
        for base in (True, False):
            with self.subTest(baseline=base):
                flagged = sum(any(c.status == "regression"
                                  for c in self.ab(0.0, base))
                              for _ in range(400))
                self.assertLess(flagged / 400, 0.04)

    def test_without_a_baseline_only_gross_changes(self):
        # 2 degrees of freedom: a 10% slowdown is still caught
        calls = self.ab(math.log(1.10), base=False)
        self.assertEqual({c.status for c in calls}, {"regression"})

    def test_a_baseline_narrows_the_interval(self):
        st = sim_set(self.rng, kind="ab", boots=4, labels=("old", "new"),
                     shift=math.log(1.01))
        plain = G.ab(st)[0][0].ci
        pooled = G.ab(st, self.base)[0][0].ci
        self.assertLess(pooled[1] - pooled[0], plain[1] - plain[0])


class Calibration(unittest.TestCase):
    """bench-ab tried on boots of nightlies, and the order check."""

    def test_ab_calibration_counts_flags_and_catches(self):
        rng = np.random.default_rng(23)
        aa = [sim_set(rng) for _ in range(10)]
        base = G.make_baseline(aa)
        inj = [sim_set(rng, shift=math.log(1.03)) for _ in range(3)]
        tries, flags, caught = G.ab_calibration(base, aa, inj)
        self.assertEqual(tries, 5)
        self.assertLessEqual(flags, 1)
        self.assertEqual(len(caught), 3)
        for _, _, phases, change in caught:
            self.assertIn("seqread", phases)
            self.assertAlmostEqual(change["seqread"], 3.0, delta=1.2)

    def test_order_table(self):
        rng = np.random.default_rng(29)
        text = G.order_md([sim_set(rng) for _ in range(4)])
        self.assertIn("| seqread | 24 |", text)  # 3 of 5 reps, 2 boots, 4 sets
        self.assertIn("| 16 |", text)


class JUnit(unittest.TestCase):
    def test_regression_fails_pass_passes(self):
        calls = [G.PhaseCall("seqread", "regression", 3.0, 1.0, "slow"),
                 G.PhaseCall("randread", "pass", 0.1, 1.0, "ok")]
        with tempfile.TemporaryDirectory() as t:
            path = os.path.join(t, "j.xml")
            G.junit(path, "bench-check.fragmented", calls)
            with open(path, encoding="utf-8") as f:
                text = f.read()
        self.assertIn('tests="2" failures="1"', text)
        self.assertEqual(text.count("<failure"), 1)


class SetOnDisk(unittest.TestCase):
    """A set of synthetic runs as bench/run-boots.sh lays it out."""

    def test_load_and_summarize(self):
        with tempfile.TemporaryDirectory() as t:
            boots = []
            for i, label in enumerate(("old", "new", "old", "new"), 1):
                run = f"boot{i}-{label}"
                synthrun.make_run(os.path.join(t, run), seed=40 + i, reps=5)
                boots.append({"index": i, "label": label, "run": run})
            with open(os.path.join(t, "set.json"), "w") as f:
                json.dump({"format": 1, "kind": "ab", "workload":
                           "fragmented", "boots": boots}, f)
            st = G.load_set(t)
            self.assertEqual([b.label for b in st.boots],
                             ["old", "new", "old", "new"])
            self.assertEqual(st.boots[0].ratio.split("/")[0],
                             "btrfs-extent")
            out = G.summarize(t)
            self.assertTrue(os.path.exists(os.path.join(t, "summary.md")))
            self.assertEqual({r["label"] for r in out["rows"]},
                             {"old", "new"})
            self.assertEqual(G.main(["ab", t]) in (0, 1), True)


if __name__ == "__main__":
    unittest.main()
