"""The embedded engine reads landing files in batches, each line tagged with its file
(fleet_engine.tagged_lines), and falls back to DuckDB reading them one by one. Seeded fuzz: landing
files mutated at random (bytes flipped, cut, lines doubled, emptied, joined, blank lines, a
source_file of their own) give the rows of the file-by-file reading exactly, or the same refusal,
naming the file.

Needs duckdb (SDC_FLEET_ENGINES_PYTHON: the fleet_engines_venv fixture's python).
"""

import json
import os
import random
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from sdcprobe import fleet_engine as fe  # noqa: E402

CASES = int(os.environ.get("SDC_LANDING_FUZZ_CASES", "150"))


def result_row(i):
    row = {c: None for c, _ in fe.COLUMNS["results"]}
    row.update(schema_version=1, run_key=f"{i:016x}", time=f"2026-12-01T0{i % 10}:00:00.000000Z", host=f"node{i % 3}",
               mode="sweep", device_uuid=f"GPU-{i}", model="NVIDIA H100 80GB HBM3", backend="cuda",
               class_key="cuda|H100|seed 7", probe="alu.fma32", family="alu", level="standard", run_seed="0x07",
               attempt=0, outcome="pass" if i % 5 else "fail", duration_s=60.5 + i, checked=1024, mismatches=0,
               digest=f"{i % 4:032x}", injected=False, temperature_c=50.0 + i)
    return row


def mutate(rng, text):
    lines = text.split(b"\n")
    kind = rng.randrange(9)
    if kind == 0:  # a byte flipped
        at = rng.randrange(len(text))
        return text[:at] + bytes([rng.randrange(256)]) + text[at + 1:]
    if kind == 1:  # cut short
        return text[:rng.randrange(len(text))]
    if kind == 2:  # a line twice
        at = rng.randrange(len(lines) - 1)
        return b"\n".join(lines[:at + 1] + lines[at:])
    if kind == 3:  # an empty object
        return b"{}\n" + text
    if kind == 4:  # two objects on one line
        return text.replace(b"}\n{", b"}{", 1)
    if kind == 5:  # a blank line
        at = rng.randrange(len(lines))
        return b"\n".join(lines[:at] + [b""] + lines[at:])
    if kind == 6:  # a source_file of its own
        return text.replace(b"{", b'{"source_file": "day=2026-12-01/other.ndjson", ', 1)
    if kind == 7:  # no newline at the end
        return text.rstrip(b"\n")
    return text.replace(b'"duration_s": ', b'"duration_s": "', 1)  # a wrong type


class LandingBatches(unittest.TestCase):
    def setUp(self):
        self.store = tempfile.mkdtemp(prefix="fleet-landing-")
        self.day = os.path.join(self.store, "results", "day=2026-12-01")
        os.makedirs(self.day)

    def tearDown(self):
        shutil.rmtree(self.store)

    def read(self, batched):
        """The landing rows as the engine loads them, sorted, or its refusal."""
        engine = fe.DuckDBEngine()
        original = fe.tagged_lines
        if not batched:  # every file is then read by DuckDB alone
            fe.tagged_lines = lambda path: None
        try:
            engine.load("results", fe.store_files(fe.day_files(self.store, "results", None, None)))
            return sorted(engine.rows("SELECT * EXCLUDE (t_us) FROM results"), key=repr)
        except fe.StoreError as e:
            return ("refused", str(e))
        finally:
            fe.tagged_lines = original

    def write(self, name, text):
        with open(os.path.join(self.day, name), "wb") as f:
            f.write(text)

    def test_clean_files_in_one_batch_are_the_files_rows(self):
        for n in range(3):
            self.write(f"node{n}.ndjson", b"".join(json.dumps(result_row(10 * n + i)).encode() + b"\n"
                                                   for i in range(4)))
        rows = self.read(batched=True)
        self.assertEqual(len(rows), 12)
        self.assertEqual(rows, self.read(batched=False))
        # Each row's source_file is its own file's.
        sources = {r[-1] for r in rows}
        self.assertEqual(sources, {f"day=2026-12-01/node{n}.ndjson" for n in range(3)})
        # A batch per file: the same rows.
        kept, fe.LANDING_BATCH = fe.LANDING_BATCH, 1
        try:
            self.assertEqual(self.read(batched=True), rows)
        finally:
            fe.LANDING_BATCH = kept

    def test_mutated_files_are_read_as_duckdb_reads_them_one_by_one(self):
        rng = random.Random(20261205)
        clean = b"".join(json.dumps(result_row(i)).encode() + b"\n" for i in range(5))
        refused = 0
        for case in range(CASES):
            for name in os.listdir(self.day):
                os.remove(os.path.join(self.day, name))
            self.write("good.ndjson", clean)
            text = clean
            for _ in range(rng.randrange(1, 3)):
                text = mutate(rng, text)
            self.write("mutated.ndjson", text)
            batched, one_by_one = self.read(batched=True), self.read(batched=False)
            if isinstance(one_by_one, tuple):
                refused += 1
                self.assertIsInstance(batched, tuple, f"case {case}: {text!r}")
                self.assertIn("mutated.ndjson", batched[1], f"case {case}")
            else:
                self.assertEqual(batched, one_by_one, f"case {case}: {text!r}")
        # Both kinds were met: the property is not vacuous.
        self.assertGreater(refused, CASES // 10)
        self.assertLess(refused, CASES)


if __name__ == "__main__":
    unittest.main()
