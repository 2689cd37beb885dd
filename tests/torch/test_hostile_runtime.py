#!/usr/bin/python3
"""The runtime's hostile catalogue (scripts/hostile_runtime_catalogue.py) as a test: every
malformed plan and option refused with one line naming the file and JSON path (or the
option), the right exit code, no traceback, no process started or left behind.

    test_hostile_runtime.py --binary build/pulse-plan

The catalogue prints a failing case's line and a count table by class.
"""

import os
import sys
import unittest

import common

OPTS = None
SCRIPTS = os.path.join(common.ROOT, "scripts")


class Catalogue(unittest.TestCase):
    def test_every_case_is_refused_as_it_must_be(self):
        sys.path.insert(0, SCRIPTS)
        import hostile_runtime_catalogue
        status = hostile_runtime_catalogue.main(["--binary", OPTS.binary, "--python",
                                                 sys.executable])
        self.assertEqual(status, 0, "cases failed (the lines above say which and why)")


if __name__ == "__main__":
    OPTS, argv = common.main([])
    unittest.main(argv=argv)
