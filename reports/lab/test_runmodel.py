"""The run model (reports.lab.runmodel): collecting what the guest recorded,
loading runs of the one format, and what the report's Arms table shows.

Run from the repo root: /usr/bin/python3 -m unittest -v reports.lab.test_runmodel
"""

import json
import os
import shutil
import tempfile
import unittest

from reports.lab import render
from reports.lab import collect as C
from reports.lab import runmodel as M
from reports.lab import synthrun

POLICY = "policy v2 contents=1 filenames=4 flags=0x2 keys=per-file"
FIO = {"fio version": "fio-3.33", "jobs": [{
    "jobname": "seqread",
    "read": {"io_bytes": 4096, "bw_bytes": 1000, "iops": 1.0,
             "clat_ns": {"N": 1, "bins": {"1000": 1}}},
    "write": {"io_bytes": 0}}]}


def fake_guest(root, facts_extra=(), fmt="3",
               cpu="btrfs-extent\t1\tseqread\t7\nbtrfs-inode\t1\tseqread\t5\n"):
    """VM_DIR and JOB_DIR as a benchmark VM leaves them: two arms measured
    (btrfs-extent, btrfs-inode), ext4-inode skipped, one rep; the job has
    a copy of the lab's arm files, as bench/run-bench.sh ships them."""
    vm, job = os.path.join(root, "vm"), os.path.join(root, "job")
    bench = os.path.join(vm, "results", "bench")
    wl = os.path.join(job, "bench", "workloads", "fragmented")
    for d in (bench, wl):
        os.makedirs(d)
    shutil.copytree(M.ARMS_DIR, os.path.join(job, "bench", "arms"))
    files = {
        os.path.join(job, "bench.env"):
            'WORKLOAD=fragmented\nREPS=1\nARMS="btrfs-extent btrfs-inode '
            'ext4-inode"\nPROFILE=0\nINJECT_LOOKUP_DELAY_US=0\n'
            "LAB_COMMIT=0a1b2c\nLAB_DIRTY=1\n",
        os.path.join(wl, "workload.conf"):
            'description="frag"\nANALYSIS=phases\nGOAL_CPU_PER_MIB=1.02\n',
        os.path.join(wl, "seqread.fio"): "[seqread]\nrw=read\n",
        os.path.join(vm, "run.info"):
            "accel=tcg\ndate=2026-12-04T02:00:00Z\nkernel_series_hash=abc\n"
            "kernel_release=6.1.192+\nkernel_tree_head=fedcba98\n",
        os.path.join(bench, "cpu.tsv"): cpu,
        os.path.join(bench, "user-hz"): "100\n",
        os.path.join(vm, "console.log"): "boot\n",
        os.path.join(bench, "format"): fmt + "\n",
        os.path.join(bench, "phases"): "seqread\n",
        os.path.join(bench, "profile-phase"): "seqread\n",
        os.path.join(bench, "fio-version"): "fio-3.33\n",
        os.path.join(bench, "min-extents"): "16384\n",
        os.path.join(bench, "prep-mode"): "once\n",
        os.path.join(bench, "saves.tsv"):
            "btrfs-extent\tsaved\t90112\t14\n"
            "btrfs-extent\trestored\t90112\t6\n",
        os.path.join(bench, "order.tsv"):
            "btrfs-extent\t1\nbtrfs-inode\t1\n",
        os.path.join(bench, "arms.tsv"):
            "ext4-inode\tskipped\text4 says no\n"
            "btrfs-extent\tmeasured\t\nbtrfs-inode\tmeasured\t\n",
        os.path.join(bench, "extents.tsv"): "".join(
            f"{a}\t{r}\tfrag\t17000\t0\t16384\t-\t0\t/mnt/bench-{a}/bench/frag\n"
            for a in ("btrfs-extent", "btrfs-inode")
            for r in ("prepare", "1")),
    }
    facts = []
    for arm, dev, opt, mode in (
            ("btrfs-extent", "vdd", "", "per-extent"),
            ("btrfs-inode", "vde", "fscrypt_per_inode_keys", "per-inode")):
        shown = "fscrypt_per_inode_keys" if opt else "fscrypt_per_extent_keys"
        facts += [
            (arm, "1", "fs", "btrfs"),
            (arm, "1", "mkfs", f"mkfs.btrfs -q -f /dev/{dev}"),
            (arm, "1", "mount_cmd", f"mount -t btrfs{' -o ' + opt if opt else ''}"
                                    f" /dev/{dev} /mnt/bench-{arm}"),
            (arm, "1", "mount_options",
             f"rw,relatime,space_cache=v2,{shown},subvolid=5,subvol=/"),
            (arm, "1", "tuning", ""),
            (arm, "1", "policy", POLICY),
            (arm, "1", "key_mode", mode),
            (arm, "1", "key_mode_source", f"/proc/mounts: {shown}")]
    facts += list(facts_extra)
    files[os.path.join(bench, "facts.tsv")] = "".join(
        "\t".join(f) + "\n" for f in facts)
    for path, text in files.items():
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    for arm in ("btrfs-extent", "btrfs-inode"):
        d = os.path.join(bench, "raw", arm, "rep1")
        os.makedirs(d)
        with open(os.path.join(d, "seqread.json"), "w") as f:
            json.dump(FIO, f)
    return vm, job


class Collect(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_arms_are_what_the_guest_recorded(self):
        vm, job = fake_guest(self.root)
        run_dir = os.path.join(self.root, "run")
        meta = C.collect(vm, job, run_dir)
        self.assertEqual(meta["format"], M.FORMAT)
        inode = meta["arms"]["btrfs-inode"]
        self.assertIn("fscrypt_per_inode_keys", inode["mount_options"])
        self.assertEqual(inode["key_mode"], "per-inode")
        self.assertEqual(inode["mkfs"], "mkfs.btrfs -q -f /dev/vde")
        self.assertTrue(inode["encrypted"])
        self.assertEqual(meta["arms"]["btrfs-extent"]["key_mode"],
                         "per-extent")
        self.assertEqual(meta["arms"]["ext4-inode"],
                         {"status": "skipped", "reason": "ext4 says no"})
        # the preparation's FIEMAP check is kept, not counted as a rep
        self.assertEqual(meta["extent_counts"]["btrfs-inode"], [17000])
        self.assertEqual([c["rep"] for c in meta["extent_checks"]
                          if c["arm"] == "btrfs-inode"], ["prepare", 1])
        self.assertEqual(meta["prep"], "once")
        self.assertEqual(meta["saves"][1], {"arm": "btrfs-extent",
                                            "what": "restored",
                                            "kib": 90112, "seconds": 6})
        doc = render.Doc()
        render.section_run(doc, M.load_run(run_dir))
        self.assertIn("each arm prepared once", doc.to_md())
        self.assertIn("a restore took 6-6 s", doc.to_md())
        run = M.load_run(run_dir)
        self.assertEqual(run.measured, ["btrfs-extent", "btrfs-inode"])
        self.assertEqual(run.values("btrfs-inode", "seqread", "bw_bytes"),
                         {1: 1000.0})

    def test_arms_table_shows_the_guests_mount_options(self):
        # the bug of issue 15: the table said "(defaults)" for btrfs-inode
        vm, job = fake_guest(self.root)
        run_dir = os.path.join(self.root, "run")
        C.collect(vm, job, run_dir)
        doc = render.Doc()
        render.section_arms(doc, M.load_run(run_dir))
        md = doc.to_md()
        row = [ln for ln in md.splitlines() if ln.startswith("| btrfs-inode")]
        self.assertEqual(len(row), 1, md)
        self.assertIn("fscrypt_per_inode_keys,subvolid=5", row[0])
        self.assertIn("**per-inode**", row[0])
        self.assertNotIn("(defaults)", md)

    def test_command_phases(self):
        # a guest before command phases wrote no command-phases file
        vm, job = fake_guest(os.path.join(self.root, "old"))
        meta = C.collect(vm, job, os.path.join(self.root, "old-run"))
        self.assertEqual(meta["command_phases"], [])
        # a phase that ran the workload's command, not fio: its result is
        # rep<N>/PHASE.tsv, never read as fio output, and not judged
        vm, job = fake_guest(self.root)
        bench = os.path.join(vm, "results", "bench")
        with open(os.path.join(bench, "phases"), "w") as f:
            f.write("seqread rekey-n10\n")
        with open(os.path.join(bench, "command-phases"), "w") as f:
            f.write("rekey-n10\n")
        for arm in ("btrfs-extent", "btrfs-inode"):
            with open(os.path.join(bench, "raw", arm, "rep1",
                                   "rekey-n10.tsv"), "w") as f:
                f.write("nr_names\t11\nelapsed_ns\t5000\nfrom_key\tab\n"
                        "cpu_units\t3\ncpu_units_per_s\t100\n"
                        "cpu_source\tstat\n")
        run_dir = os.path.join(self.root, "run")
        meta = C.collect(vm, job, run_dir)
        self.assertEqual(meta["phases"], ["seqread", "rekey-n10"])
        self.assertEqual(meta["command_phases"], ["rekey-n10"])
        self.assertEqual(meta["spec"]["workload"]["goals"]["judged_phases"],
                         ["seqread"])
        run = M.load_run(run_dir)
        self.assertEqual(run.phases, ["seqread"])
        self.assertEqual(run.command_phases, ["rekey-n10"])
        self.assertEqual(run.warnings, [])
        got = run.commands["btrfs-inode"]["rekey-n10"][1]
        self.assertEqual((got["nr_names"], got["elapsed_ns"], got["from_key"],
                          got["cpu_s"]), (11, 5000, "ab", 0.03))
        self.assertEqual(run.command_values("btrfs-extent", "rekey-n10",
                                          "elapsed_ns"), {1: 5000})
        self.assertEqual(run.values("btrfs-inode", "seqread", "bw_bytes"),
                         {1: 1000.0})
        self.assertNotIn("rekey-n10", run.data["btrfs-inode"])
        # the Run table lists them
        doc = render.Doc()
        render.section_run(doc, run)
        self.assertIn("| command phases (the workload's command, not fio) "
                      "| `rekey-n10` |", doc.to_md())

    def test_other_format_refused(self):
        vm, job = fake_guest(self.root, fmt="1")
        with self.assertRaisesRegex(M.RunError, "format '1'"):
            C.collect(vm, job, os.path.join(self.root, "run"))

    def test_measured_arm_without_facts_refused(self):
        vm, job = fake_guest(self.root)
        path = os.path.join(vm, "results", "bench", "facts.tsv")
        with open(path) as f:
            keep = [ln for ln in f if not ln.startswith("btrfs-inode")]
        with open(path, "w") as f:
            f.writelines(keep)
        with self.assertRaisesRegex(M.RunError, "btrfs-inode .*no facts"):
            C.collect(vm, job, os.path.join(self.root, "run"))

    def test_reps_set_up_differently_are_reported(self):
        vm, job = fake_guest(self.root, facts_extra=[
            ("btrfs-inode", "profiled", "mount_options", "rw,other"),
            ("btrfs-inode", "profiled", "key_mode", "per-inode")])
        meta = C.collect(vm, job, os.path.join(self.root, "run"))
        self.assertEqual(len(meta["arm_fact_problems"]), 2,
                         meta["arm_fact_problems"])
        self.assertIn("mount_options of rep profiled",
                      meta["arm_fact_problems"][0])

    def test_load_run_refuses_other_formats(self):
        run_dir = os.path.join(self.root, "s")
        synthrun.make_run(run_dir, reps=1)
        M.load_run(run_dir)
        path = os.path.join(run_dir, "meta.json")
        with open(path) as f:
            meta = json.load(f)
        del meta["format"]
        with open(path, "w") as f:
            json.dump(meta, f)
        with self.assertRaisesRegex(M.RunError, "run format None"):
            M.load_run(run_dir)

    def test_the_run_describes_itself(self):
        vm, job = fake_guest(self.root)
        run_dir = os.path.join(self.root, "run")
        meta = C.collect(vm, job, run_dir)
        spec = meta["spec"]
        # the job's arm files, in their order, with the comparisons
        self.assertEqual(spec["arm_order"], [
            "btrfs-extent", "btrfs-extent-key", "btrfs-inode", "btrfs-plain",
            "ext4-inode", "ext4-plain", "btrfs-extent-ctxitem",
            "btrfs-extent-zstd", "btrfs-plain-zstd"])
        self.assertEqual([(c["a"], c["b"]) for c in spec["comparisons"][:2]],
                         [("btrfs-extent", "btrfs-inode"),
                          ("btrfs-extent-key", "btrfs-inode")])
        self.assertEqual(spec["arms"]["btrfs-extent-key"]["MOUNT_OPTS"],
                         "fscrypt_extents_per_key=1")
        wl = spec["workload"]
        self.assertEqual((wl["name"], wl["analysis"]),
                         ("fragmented", "phases"))
        self.assertEqual(wl["goals"]["cpu_per_mib_max"], 1.02)  # the conf's
        self.assertEqual(wl["goals"]["bw_min"], 0.97)            # default
        self.assertEqual(wl["goals"]["judged_phases"], ["seqread"])
        self.assertEqual(spec["metrics"]["cpu_per_mib"]["better"], "lower")
        self.assertEqual(spec["ratio"]["function"], "reports.lab.labstats.ratio")
        self.assertEqual(meta["kernel"]["tree_head"], "fedcba98")
        self.assertEqual(meta["kernel"]["release"], "6.1.192+")
        self.assertEqual((meta["kernel"]["lab_commit"],
                          meta["kernel"]["lab_dirty"]), ("0a1b2c", True))
        # CPU: 7 ticks at 100 Hz for 4096 bytes moved in 1 I/O
        self.assertEqual(meta["cpu"]["user_hz"], 100)
        run = M.load_run(run_dir)
        d = run.data["btrfs-extent"]["seqread"][1]
        self.assertAlmostEqual(d.cpu_s, 0.07)
        self.assertAlmostEqual(d.cpu_per_mib, 0.07 * 256)
        self.assertAlmostEqual(d.cpu_per_op, 0.07)
        self.assertTrue(run.has_cpu)
        self.assertEqual((run.main.a, run.main.b), ("btrfs-extent", "btrfs-inode"))

    def test_profile_passes_recorded(self):
        # a guest before PROFILE_PASSES ran one pass
        vm, job = fake_guest(self.root)
        self.assertEqual(C.collect(vm, job, os.path.join(
            self.root, "run"))["profile_passes"], 1)
        self.assertEqual(M.load_run(os.path.join(
            self.root, "run")).profile_passes, 1)
        env = os.path.join(job, "bench.env")
        with open(env, "a") as f:
            f.write("PROFILE_PASSES=20\n")
        run_dir = os.path.join(self.root, "run20")
        C.collect(vm, job, run_dir)
        self.assertEqual(M.load_run(run_dir).profile_passes, 20)

    def test_spec_comes_from_the_job_not_the_working_tree(self):
        vm, job = fake_guest(self.root)
        conf = os.path.join(job, "bench", "arms", "btrfs-plain.conf")
        with open(conf) as f:
            text = f.read()
        with open(conf, "w") as f:  # now the first comparison
            f.write(text.replace("COMPARISON_ORDER=5", "COMPARISON_ORDER=0"))
        meta = C.collect(vm, job, os.path.join(self.root, "run"))
        self.assertEqual(meta["spec"]["comparisons"][0]["a"], "btrfs-plain")
        self.assertEqual(meta["spec"]["workload"]["goals"]["comparison"],
                         ["btrfs-plain", "ext4-plain"])

    def test_guest_without_cpu_data(self):
        # a guest that could not read /proc/stat wrote an empty cpu.tsv
        vm, job = fake_guest(self.root, cpu="")
        run_dir = os.path.join(self.root, "run")
        meta = C.collect(vm, job, run_dir)
        self.assertIsNone(meta["cpu"])
        run = M.load_run(run_dir)
        self.assertFalse(run.has_cpu)
        self.assertIsNone(run.data["btrfs-inode"]["seqread"][1].cpu_s)
        self.assertEqual(run.values("btrfs-inode", "seqread",
                                         "cpu_per_mib"), {})

    def test_arm_files_as_read(self):
        # the lab's own arm files: order and comparisons, main one first
        specs = M.read_arm_specs()
        self.assertEqual(list(specs), ["btrfs-extent", "btrfs-extent-key",
                                       "btrfs-inode", "btrfs-plain",
                                       "ext4-inode", "ext4-plain",
                                       "btrfs-extent-ctxitem",
                                       "btrfs-extent-zstd",
                                       "btrfs-plain-zstd"])
        # a prototype arm runs only when named
        self.assertEqual(specs["btrfs-extent-ctxitem"]["DEFAULT"], "0")
        self.assertEqual(specs["btrfs-inode"]["MOUNT_OPTS"],
                         "fscrypt_per_inode_keys")
        self.assertEqual(specs["btrfs-extent-key"]["KEY_MODE"],
                         "per-extent-key")
        # one key per extent (the upstream design) against per-inode keys,
        # right after the main comparison
        self.assertEqual([(c["a"], c["b"])
                          for c in M.comparisons_of(specs)[:2]],
                         [("btrfs-extent", "btrfs-inode"),
                          ("btrfs-extent-key", "btrfs-inode")])
        # a directory of other arms: read as they are
        d = os.path.join(self.root, "arms")
        os.makedirs(d)
        for name, text in (("b.conf", 'ORDER=2\nFS=x\nREFERENCE=a\n'
                                      'COMPARISON="b over a"\n'),
                           ("a.conf", "ORDER=1\nFS=y\nFS=z\n"),
                           ("notes.txt", "ORDER=0\n")):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        specs = M.read_arm_specs(d)
        self.assertEqual(list(specs), ["a", "b"])
        self.assertEqual(specs["b"]["COMPARISON"], "b over a")
        self.assertEqual(specs["a"]["FS"], "y")  # first line, as arms.sh
        self.assertEqual(M.comparisons_of(specs),
                         [{"a": "b", "b": "a", "label": "b over a"}])


class Format2(unittest.TestCase):
    """Runs of format 2 (no spec, no CPU data) are still read, with the
    documented fallbacks."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_fallback_arm_table(self):
        run_dir = os.path.join(self.root, "f2")
        synthrun.make_run(run_dir, reps=2, format2=True)
        run = M.load_run(run_dir)
        self.assertEqual(run.format, 2)
        self.assertEqual(run.arm_order, list(M.FORMAT2_ARMS))
        self.assertEqual((run.main.a, run.main.b), ("btrfs-extent", "btrfs-inode"))
        self.assertFalse(run.has_cpu)
        self.assertEqual(run.goals.decide, "bw_bytes+p99")
        self.assertNotIn("cpu_per_mib", run.metrics)
        self.assertTrue(any("FORMAT2_ARMS" in n for n in run.spec_notes))

    def test_job_arm_files_kept_in_the_run_directory(self):
        # bench/run-bench.sh keeps the job in the run directory: its arm
        # files are those that ran, and win over the frozen table
        run_dir = os.path.join(self.root, "f2")
        synthrun.make_run(run_dir, reps=2, format2=True)
        arms = os.path.join(run_dir, "job", "bench", "arms")
        shutil.copytree(M.ARMS_DIR, arms)
        conf = os.path.join(arms, "btrfs-extent.conf")
        with open(conf) as f:
            text = f.read()
        with open(conf, "w") as f:
            f.write(text.replace("DESCRIPTION=",
                                 'DESCRIPTION="what this old run called '
                                 'it"\nOLD_DESCRIPTION='))
        run = M.load_run(run_dir)
        self.assertEqual(run.definition("btrfs-extent")["DESCRIPTION"],
                         "what this old run called it")
        self.assertTrue(any("job/bench/arms" in n for n in run.spec_notes))

    def test_groupsweep_analysis_inferred(self):
        run_dir = os.path.join(self.root, "gs")
        synthrun.make_run(run_dir, reps=1, groupsweep=True, format2=True)
        run = M.load_run(run_dir)
        self.assertEqual(run.analysis, "groupsweep")
        self.assertEqual(run.goals.judged_phases, ["seqread-g0"])


if __name__ == "__main__":
    unittest.main()
