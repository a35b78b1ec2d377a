#!/usr/bin/env python3
"""Rewrites a Slurm 22.05 `sacct --json` dump in the forms Slurm 23.02 and later write, as their
OpenAPI schema (data_parser v0.0.39 and later) documents them: each time of a record's "time"
object becomes {"set", "infinite", "number"} (an unset 0 or null: "set": false), and
"state"."current" a list of states. Nothing else changes. Not a real producer's output: it tests
that the forms give the same ledger. Usage: sacct_as_23.py IN.json OUT.json"""
import json
import sys

TIMES = ("eligible", "start", "end", "submission")


def number(value):
    return {"set": bool(value), "infinite": False, "number": value or 0}


dump = json.load(open(sys.argv[1]))
for job in dump["jobs"]:
    for key in TIMES:
        if key in job["time"]:
            job["time"][key] = number(job["time"][key])
    current = job["state"]["current"]
    job["state"]["current"] = current if isinstance(current, list) else [current]
with open(sys.argv[2], "w") as out:
    json.dump(dump, out, indent=2)
    out.write("\n")
