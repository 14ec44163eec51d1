"""Known-answer tests of reports/lab/profiles.py's reading of bench.bt maps.

Run from the repo root: /usr/bin/python3 -m unittest -v reports.lab.test_profiles
"""

import unittest

from reports.lab import profiles as P


def _bt(**maps):
    return {"maps": maps, "probes": 8}


class KeyWork(unittest.TestCase):
    def test_extent_key_setups(self):
        kw = P.key_work(_bt(**{"@extent_key_setup": {"derived": 2,
                                                      "cached": 40}}))
        self.assertEqual((kw["key_setups_derived"], kw["key_setups_cached"]),
                         (2, 40))

    def test_runs_of_the_6_1_series_keep_their_counts(self):
        # fscrypt_extent_info_setup became fscrypt_extent_key_setup on 6.12
        kw = P.key_work(_bt(**{"@extent_info_setup": {"derived": 3,
                                                       "cached": 7}}))
        self.assertEqual((kw["key_setups_derived"], kw["key_setups_cached"]),
                         (3, 7))

    def test_missing_map_counts_zero(self):
        kw = P.key_work(_bt(**{"@lookups": 5}))
        self.assertEqual((kw["lookups"], kw["key_setups_derived"]), (5, 0))

    def test_bpftrace_that_did_not_run(self):
        self.assertIsNone(P.key_work({}))


if __name__ == "__main__":
    unittest.main()
