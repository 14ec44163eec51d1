"""Known-answer tests of reports/lab/flame.py on fixed synthetic perf output.

Run from the repo root: /usr/bin/python3 -m unittest -v reports.lab.test_flame
"""

import math
import re
import unittest

from reports.lab import flame as F

# perf script's text: a header per sample, frames leaf first, blank lines
# between samples; the fifth sample follows the fourth without a blank
# line; the sixth has a comm with a space and no frames; the seventh has a
# user-space frame repeated (bogus unwinding) over real kernel recursion.
PERF_SCRIPT = """\
fio  1234 [000]    10.000001:    2004008 cpu-clock: 
\tffffffff81000001 aesni_xts_decrypt+0x10 ([kernel.kallsyms])
\tffffffff81000002 fscrypt_crypt_block+0x22 ([kernel.kallsyms])
\tffffffff81000003 worker_thread+0x5 ([kernel.kallsyms])

kworker/u4:2-ev    77 [001]    10.000002:    2004008 cpu-clock: 
\tffffffff81000001 aesni_xts_decrypt+0x99 ([kernel.kallsyms])
\tffffffff81000002 fscrypt_crypt_block+0x1 ([kernel.kallsyms])
\tffffffff81000003 worker_thread+0x5 ([kernel.kallsyms])

fio  1234 [000]    10.000003:    2004008 cpu-clock: 
\t           159c6 [unknown] (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)
\t           159c7 [unknown] (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)
\t               0 [unknown] ([unknown])

swapper     0 [000]    10.000004:    2004008 cpu-clock: 
\tffffffff810297ce amd_e400_idle+0x1e ([kernel.kallsyms])
\tffffffff815de7f2 do_idle+0x32 ([kernel.kallsyms])
fio  1234 [001]    10.000005:    2004008 cpu-clock: 
\tffffffff81000001 aesni_xts_decrypt+0x10 ([kernel.kallsyms])
\tffffffff81000002 fscrypt_crypt_block+0x22 ([kernel.kallsyms])
\tffffffff81000003 worker_thread+0x5 ([kernel.kallsyms])

Web Content  99/100 [000]    10.000006:    2004008 cpu-clock: 

fio  1234 [000]    10.000007:    2004008 cpu-clock: 
	ffffffff81000004 rb_next+0x1 ([kernel.kallsyms])
	ffffffff81000004 rb_next+0x9 ([kernel.kallsyms])
	           22222 __gxx_personality_v0+0x5 (/usr/lib/libstdc++.so.6)
	           22222 __gxx_personality_v0+0x5 (/usr/lib/libstdc++.so.6)
	           22222 __gxx_personality_v0+0x5 (/usr/lib/libstdc++.so.6)
"""

FOLDED = {
    "fio;worker_thread;fscrypt_crypt_block;aesni_xts_decrypt": 2,
    "kworker/-ev;worker_thread;fscrypt_crypt_block;aesni_xts_decrypt": 1,
    "fio;[unknown];[ld-linux-x86-64.so.2]": 1,
    "swapper;do_idle;amd_e400_idle": 1,
    "Web Content;[no stack]": 1,
    # user-space repeats once, kernel recursion kept
    "fio;__gxx_personality_v0;rb_next;rb_next": 1,
}


class Fold(unittest.TestCase):
    def test_known_answer(self):
        self.assertEqual(F.fold_perf_script(PERF_SCRIPT.splitlines(True)),
                         FOLDED)

    def test_total_is_the_number_of_samples(self):
        self.assertEqual(sum(F.fold_perf_script(
            PERF_SCRIPT.splitlines()).values()), 7)

    def test_round_trip_through_text(self):
        text = F.format_folded(FOLDED)
        self.assertEqual(text.splitlines()[0],
                         "Web Content;[no stack] 1")  # sorted by stack
        self.assertEqual(F.read_folded(text.splitlines()), FOLDED)

    def test_split_idle(self):
        busy, idle = F.split_idle(FOLDED)
        self.assertEqual(idle, 1)
        self.assertNotIn("swapper;do_idle;amd_e400_idle", busy)
        self.assertEqual(sum(busy.values()), 6)

    def test_empty_input(self):
        self.assertEqual(F.fold_perf_script([]), {})


class Tree(unittest.TestCase):
    def test_totals_and_self(self):
        root = F.build_tree({"a;b;c": 3, "a;b": 1, "a;d": 2})
        self.assertEqual(root.total, 6)
        a = root.children["a"]
        self.assertEqual((a.total, a.self_count), (6, 0))
        self.assertEqual((a.children["b"].total, a.children["b"].self_count),
                         (4, 1))
        self.assertEqual(a.children["b"].children["c"].total, 3)


def _rects(svg):
    """{title's name: (width, fill)} of the frames of an SVG."""
    out = {}
    for m in re.finditer(r'<g><title>([^:<]+):[^<]*</title><rect x="[^"]+" '
                         r'y="[^"]+" width="([^"]+)" height="[^"]+" '
                         r'fill="([^"]+)"', svg):
        out[m.group(1)] = (float(m.group(2)), m.group(3))
    return out


class Svg(unittest.TestCase):
    def test_widths_are_shares(self):
        svg = F.flame_svg({"p;a;x": 3, "p;a;y": 1}, "t", width=1000)
        r = _rects(svg)
        self.assertAlmostEqual(r["a"][0], 1000.0)
        self.assertAlmostEqual(r["x"][0], 750.0)
        self.assertAlmostEqual(r["y"][0], 250.0)
        self.assertIn("x: 3 samples, 75.00%", svg)

    def test_escapes_names(self):
        svg = F.flame_svg({"p;a<b>&c": 1}, "t & u")
        self.assertIn("a&lt;b&gt;&amp;c", svg)
        self.assertNotIn("a<b>", svg)

    def test_no_samples(self):
        self.assertIn("(no samples)", F.flame_svg({}, "t"))


class Diff(unittest.TestCase):
    TARGET = {"p;a;x": 3, "p;a;y": 1}
    BASE = {"p;a;x": 1, "p;a;y": 1}

    def test_frame_deltas(self):
        rows = F.frame_deltas(self.TARGET, self.BASE)
        self.assertEqual([r["function"] for r in rows[:2]], ["x", "y"])
        x, y = rows[0], rows[1]
        self.assertAlmostEqual(x["self_target"], 0.75)
        self.assertAlmostEqual(x["self_base"], 0.5)
        self.assertAlmostEqual(x["self_delta"], 0.25)
        self.assertAlmostEqual(y["self_delta"], -0.25)
        a = [r for r in rows if r["function"] == "a"][0]
        self.assertAlmostEqual(a["incl_delta"], 0.0)
        self.assertAlmostEqual(a["self_target"], 0.0)

    def test_colors_follow_the_change(self):
        r = _rects(F.diff_flame_svg(self.TARGET, self.BASE, "d", width=1000))
        self.assertEqual(r["x"][1], "rgb(250,50,50)")    # grew: full red
        self.assertEqual(r["y"][1], "rgb(50,50,250)")    # shrank: full blue
        self.assertEqual(r["a"][1], "rgb(250,250,250)")  # same: white
        self.assertAlmostEqual(r["x"][0], 750.0)         # target's widths

    def test_identical_profiles_are_all_white(self):
        r = _rects(F.diff_flame_svg(self.BASE, self.BASE, "d"))
        self.assertEqual({f for _, f in r.values()}, {"rgb(250,250,250)"})


if __name__ == "__main__":
    unittest.main()


class Premium(unittest.TestCase):
    # 100 samples in the base; the target has 10 more key-slot samples
    # (their innermost category frame), 4 more AES ones under the same
    # decryption frames, and 1 more of a function no category names.
    BASE = {"fio;filemap_read;aes_xts_decrypt_aesni_avx": 60,
            "kworker;btrfs_decrypt_read_range;fscrypt_get_key_slot": 10,
            "fio;vfs_read;mystery": 30}
    TARGET = {"fio;filemap_read;aes_xts_decrypt_aesni_avx": 60,
              "kworker;btrfs_decrypt_read_range;fscrypt_get_key_slot": 20,
              "kworker;btrfs_decrypt_read_range;fscrypt_crypt_extent_run;"
              "aes_xts_decrypt_aesni_avx": 4,
              "fio;vfs_read;mystery": 31}

    def test_rows_partition_the_premium(self):
        p = F.premium_by_category(self.TARGET, self.BASE)
        self.assertAlmostEqual(p["total"]["premium"], 0.15)
        self.assertAlmostEqual(sum(r["premium"] for r in p["rows"]),
                               p["total"]["premium"])
        by = {r["category"]: r for r in p["rows"]}
        slot = [c for c in by if c.startswith("per-block key lookup")][0]
        self.assertEqual((by[slot]["target"], by[slot]["base"]), (20, 10))
        self.assertAlmostEqual(by["AES"]["premium"], 0.04)
        self.assertAlmostEqual(by["other"]["premium"], 0.01)
        self.assertEqual(p["rows"][0]["category"], slot)
        self.assertAlmostEqual(by[slot]["sd"], math.sqrt(30) / 100)

    def test_empty_base(self):
        self.assertIsNone(F.premium_by_category(self.TARGET, {}))
