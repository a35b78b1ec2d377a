#!/usr/bin/env python3
"""`sdcprobe hang` and torch's own analyser, torchfrtrace, name the same ranks on the dumps that
data/flight_recorder/record.py recorded (torch 2.15, gloo).

torchfrtrace cannot read gloo's dumps as they are: gloo writes pg_config under the key "" (one
entry, the last group made), and torchfrtrace looks each group up by its name (KeyError). The test
gives torchfrtrace copies whose pg_config names the groups that record.py made; sdcprobe reads the
dumps as recorded. Run with torch 2.15's python; SDCPROBE_BINARY is the sdcprobe binary.
"""
import json
import logging
import os
import pickle
import re
import subprocess
import tempfile
import unittest

from torch.distributed.flight_recorder.fr_trace import main as torchfrtrace

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "flight_recorder")
# The groups record.py makes, in the order torch names them: the world, then the mesh's
# tensor-parallel {0, 1}, {2, 3} and data-parallel {0, 2}, {1, 3}.
GROUPS = {"0": ("default_pg", [0, 1, 2, 3]), "1": ("undefined", [0, 1]), "2": ("undefined", [2, 3]),
          "3": ("undefined", [0, 2]), "4": ("undefined", [1, 3])}


class Messages(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def torchfrtrace_ranks(scenario):
    """(the ranks torchfrtrace calls missing, the ranks it says it has no dump of)."""
    with tempfile.TemporaryDirectory() as tmp:
        for name in os.listdir(os.path.join(DATA, scenario)):
            if not name.startswith("nccl_trace_rank_"):
                continue
            with open(os.path.join(DATA, scenario, name), "rb") as f:
                dump = pickle.load(f)
            dump["pg_config"] = {g: {"name": g, "desc": desc, "ranks": str(ranks)} for g, (desc, ranks) in GROUPS.items()}
            with open(os.path.join(tmp, name), "wb") as f:
                pickle.dump(dump, f)
        messages = Messages()
        logger = logging.getLogger("Flight Recorder")
        logger.addHandler(messages)
        try:
            torchfrtrace([tmp, "--allow-incomplete-ranks"])
        finally:
            logger.removeHandler(messages)
    text = "\n".join(messages.lines)
    missing, no_dump = set(), set()
    block = r"sequence number: (\d+)\n.*?group info: (\w+)[^\n]*\n.*?missing ranks: \{([\d, ]*)\}"
    for m in re.finditer(block, text, re.S):
        missing.add((m.group(2), int(m.group(1)), frozenset(int(r) for r in m.group(3).split(","))))
    for m in re.finditer(r"missed FR dumps from ranks \(\{([\d, ]*)\}\)", text):
        no_dump |= {int(r) for r in m.group(1).split(",")}
    return missing, no_dump


def sdcprobe_report(scenario):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "hang.json")
        subprocess.run([os.environ["SDCPROBE_BINARY"], "hang", os.path.join(DATA, scenario), "--json", out],
                       check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            report = json.load(f)
    return report


class SameRanksAsTorchfrtrace(unittest.TestCase):
    def check(self, scenario, culprits, no_dump=()):
        """Per group, the first collective not every rank enqueued and the ranks missing from it
        are torchfrtrace's; the ranks without a dump too. Of the missing ranks, sdcprobe names as
        culprits only those that wait in no other group (torchfrtrace names every one)."""
        their_missing, their_no_dump = torchfrtrace_ranks(scenario)
        report = sdcprobe_report(scenario)
        our_missing = {(g["group"], g["first_incomplete"], frozenset(g["missing"]))
                       for g in report["groups"] if g["missing"]}
        self.assertEqual(our_missing, their_missing)
        self.assertEqual({u["rank"] for u in report["undecided"]}, their_no_dump)
        self.assertEqual({c["rank"] for c in report["culprits"]}, set(culprits))
        self.assertEqual(their_no_dump, set(no_dump))

    def test_stop(self):
        self.check("stop", [2])

    def test_sleep_in_step(self):
        self.check("sleep_in_step", [1])

    def test_two_stuck(self):
        self.check("two_stuck", [1, 3])

    def test_sizes_differ(self):
        self.check("sizes_differ", [2])

    def test_mesh_stop(self):
        self.check("mesh_stop", [3])

    def test_killed(self):
        self.check("killed", [], [3])

    def test_clean(self):
        self.check("clean", [])


if __name__ == "__main__":
    unittest.main()
