"""The CPU window of a timed phase (issue #22): the guest measures CPU time
over fio's I/O (exec_prerun to exec_postrun), not around the whole fio
process, whose start and exit are the same work for every arm and, in the
first real icount runs (2026-12-05), took 0.5-0.8 s of a random-read
phase's 1.1 s: every ratio was pulled toward 1 by them. The run records
which window it had (cpu-windows.tsv -> meta cpu.window) and the report
says so.

Run from the repo root: /usr/bin/python3 -m unittest -v reports.lab.test_cpuwindow
"""

import json
import os
import subprocess
import tempfile
import unittest

from reports.lab import history as H
from reports.lab import render
from reports.lab import collect as C
from reports.lab import runmodel as M
from reports.lab import synthrun
from reports.lab.test_runmodel import fake_guest

TOP = M.LAB_TOP


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


class GuestDir(unittest.TestCase):
    """A made-up guest output (fake_guest) and a run directory to collect
    it into, removed after each test."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        self.vm, self.job = fake_guest(self.root)
        self.bench = os.path.join(self.vm, "results", "bench")
        self.run_dir = os.path.join(self.root, "run")

    def tearDown(self):
        self.tmp.cleanup()


class Window(GuestDir):
    def collect(self, windows=None):
        if windows is not None:
            write(os.path.join(self.bench, C.CPU_WINDOWS), windows)
        return C.collect(self.vm, self.job, self.run_dir)

    def cpu_text(self):
        run = M.load_run(self.run_dir)
        return render.cpu_window_text(run)

    def test_io_window(self):
        meta = self.collect("btrfs-extent\t1\tseqread\tio\t60\n"
                            "btrfs-inode\t1\tseqread\tio\t58\n")
        self.assertEqual(meta["cpu"]["window"], "io")
        self.assertEqual(meta["cpu"]["window_counts"], {"io": 2})
        # the file travels with the run (the ticks around the process too)
        self.assertTrue(os.path.exists(os.path.join(self.run_dir,
                                                    C.CPU_WINDOWS)))
        self.assertIn("exec_prerun", self.cpu_text())
        self.assertNotIn("toward 1", self.cpu_text())
        # the metric's definition says what the window is
        self.assertIn("exec_prerun",
                      meta["spec"]["metrics"]["cpu_s"]["definition"])

    def test_guest_without_the_file_measured_around_the_process(self):
        meta = self.collect()
        self.assertEqual(meta["cpu"]["window"], "process")
        self.assertFalse(os.path.exists(os.path.join(self.run_dir,
                                                     C.CPU_WINDOWS)))
        self.assertIn("start and exit", self.cpu_text())

    def test_mixed_windows_are_said(self):
        meta = self.collect("btrfs-extent\t1\tseqread\tio\t60\n"
                            "btrfs-inode\t1\tseqread\tprocess\t58\n")
        self.assertEqual(meta["cpu"]["window"], "mixed")
        text = self.cpu_text()
        self.assertIn("for 1 phase(s) fio's I/O", text)
        self.assertIn("for 1 (job files of several jobs)", text)

    def test_run_collected_before_windows_reads_as_process(self):
        # a meta.json from before cpu.window: no key at all
        self.collect()
        run = M.load_run(self.run_dir)
        run.cpu = M.CpuInfo(source=run.cpu.source,
                            units_per_s=run.cpu.units_per_s)
        self.assertIn("start and exit", render.cpu_window_text(run))

    def test_report_renders_the_window(self):
        self.collect("btrfs-extent\t1\tseqread\tio\t60\n"
                     "btrfs-inode\t1\tseqread\tio\t58\n")
        out = os.path.join(self.root, "out")
        r = subprocess.run(["/usr/bin/python3", "-m", "reports.lab.generate",
                            self.run_dir, out], cwd=TOP,
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "summary.md"), encoding="utf-8") as f:
            md = f.read()
        self.assertIn("The window: fio's I/O", md)
        self.assertIn("window: io", md)


class HistoryKeepsWindowsApart(unittest.TestCase):
    """A run measured around the whole fio process and one measured over
    fio's I/O are two metrics in the history: never one trend."""

    def test_process_window_stored_under_its_own_name(self):
        with tempfile.TemporaryDirectory() as tmp:
            runs = []
            for i, window in enumerate(("process", "io")):
                rd = os.path.join(tmp, f"2026120{i + 1}-010000-fragmented")
                synthrun.make_run(rd, reps=4)
                meta_path = os.path.join(rd, "meta.json")
                with open(meta_path, encoding="utf-8") as f:
                    meta = json.load(f)
                if window == "process":  # a guest before cpu-windows.tsv
                    for k in ("window", "window_counts"):
                        meta["cpu"].pop(k, None)
                self.assertEqual(meta["cpu"].get("window"),
                                 None if window == "process" else "io")
                with open(meta_path, "w", encoding="utf-8") as f:
                    json.dump(meta, f)
                runs.append(rd)
            store = os.path.join(tmp, "store")
            for rd in runs:
                H.append(rd, None, store)
            s = H.series("fragmented", store)
            key = ("btrfs-extent/btrfs-inode", "seqread")
            old = s[("cpu_per_mib" + H.PROCESS_WINDOW,) + key]
            new = s[("cpu_per_mib",) + key]
            self.assertEqual([p["run"] for p in old],
                             [os.path.basename(runs[0])])
            self.assertEqual([p["run"] for p in new],
                             [os.path.basename(runs[1])])
            # throughput does not depend on the window: one trend
            self.assertEqual(len(s[("bw_bytes",) + key]), 2)
            # the trend page draws both, each with its name
            out = os.path.join(tmp, "trend")
            H.plot("fragmented", out, None, store)
            with open(os.path.join(out, "index.html"),
                      encoding="utf-8") as f:
                page = f.read()
            self.assertIn("window around the whole fio process", page)


class CpuSource(GuestDir):
    """A guest with /proc/schedstat records nanoseconds (cpu-source
    "schedstat"); a run without cpu-source counted /proc/stat ticks."""

    def test_schedstat_nanoseconds(self):
        write(os.path.join(self.bench, "cpu-source"), "schedstat\n")
        with open(os.path.join(self.bench, "cpu.tsv"),
                  encoding="utf-8") as f:
            first = f.readline().split("\t")
        meta = C.collect(self.vm, self.job, self.run_dir)
        self.assertEqual(meta["cpu"]["source"], "schedstat")
        clock = M.CpuInfo.from_json(meta["cpu"])
        self.assertEqual((clock.source, clock.units_per_s),
                         ("schedstat", 10 ** 9))
        cpu = M.read_cpu(self.run_dir, meta, [])
        key = (first[0], int(first[1]), first[2])
        self.assertAlmostEqual(cpu[key], int(first[3]) / 1e9)
        run = M.load_run(self.run_dir)
        self.assertIn("/proc/schedstat", render.cpu_source_text(run))

    def test_old_run_is_stat_ticks(self):
        meta = C.collect(self.vm, self.job, self.run_dir)
        meta["cpu"].pop("source")
        meta["cpu"].pop("units_per_s")
        clock = M.CpuInfo.from_json(meta["cpu"])
        self.assertEqual((clock.source, clock.units_per_s),
                         ("stat", meta["cpu"]["user_hz"]))

    def test_unknown_source_is_unusable(self):
        meta = {"cpu": {"source": "rdtsc", "units_per_s": 1}}
        clock = M.CpuInfo.from_json(meta["cpu"])
        self.assertEqual((clock.source, clock.units_per_s), ("rdtsc", None))
        warnings = []
        os.makedirs(self.run_dir)
        write(os.path.join(self.run_dir, "cpu.tsv"), "a\t1\tp\t5\n")
        self.assertEqual(M.read_cpu(self.run_dir, meta, warnings), {})
        self.assertIn("no usable unit", warnings[0])


class GuestCpuLine(unittest.TestCase):
    """The guest reads fio's prerun/postrun files with cpu_now's rule."""

    def ticks(self, line):
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write(line)
            f.flush()
            script = (". bench/guest/lib.sh; cpu_source=stat; "
                      "PROC_STAT=$1 cpu_now; echo \"[$cpu_ticks]\"")
            r = subprocess.run(["bash", "-c", script, "-", f.name], cwd=TOP,
                               capture_output=True, text=True, check=True)
        return r.stdout.strip()

    def test_user_nice_system_irq_softirq(self):
        # what `read l </proc/stat && echo "$l"` writes (one space after cpu)
        self.assertEqual(self.ticks("cpu 1 2 3 4 5 6 7 8 9 10\n"), "[19]")
        self.assertEqual(self.ticks("cpu  10 0 30 99 99 1 2 0 0 0\n"),
                         "[43]")

    def test_not_a_cpu_line(self):
        self.assertEqual(self.ticks("sh: 1: cannot open /proc/stat\n"), "[]")
        self.assertEqual(self.ticks(""), "[]")


if __name__ == "__main__":
    unittest.main()
