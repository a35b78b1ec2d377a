"""The fleet store's aggregations (docs/fleet.md), on DuckDB or on Spark, from one definition.

The heavy part of `sdcprobe fleet sdc` is group-bys over every result: exposure and failures per
device and family, distinct devices per vote and digest, the devices each digest names, fault sites,
failures per day. An engine runs them over the store and writes small aggregate tables; sdcprobe
reads those (`fleet sdc --aggregates DIR`, or `fleet sdc --store DIR`, which runs DuckDB here) and
does the statistics, decisions and outputs itself, as it does for files.

    python -m sdcprobe.fleet_engine aggregate --store DIR --out AGG [--since DAY] [--until DAY]
    spark-submit fleet_engine.py aggregate --engine spark --store PATH --out PATH [...]
    python -m sdcprobe.fleet_engine compact --store DIR
    python -m sdcprobe.fleet_engine jobs --store DIR --out FILE

Every aggregation is SQL that both engines run as written, in three steps: partials() groups each
day's rows into partial aggregates that merge across days exactly, MERGED makes each vote's digests
from them, AGGREGATES the tables sdcprobe reads. Only the reading of the store differs (each
engine's load), and where a day's partial aggregates come from: DuckDB reads those a compaction
stored for a day that did not change since, Spark groups every day's rows. Bad input exits 2
naming the file.
"""

import argparse
import glob
import json
import os
import re
import shutil
import sys
import tempfile
import time

# The store's schema version this reads (docs/fleet.md#versions), and the aggregates' own.
STORE_SCHEMA_VERSION = 1
AGGREGATES_VERSION = 1
# Devices named per digest and fault sites kept per device, as sdcprobe keeps them from files.
MAX_NAMED_PER_DIGEST = 64
MAX_SITES_PER_DEVICE = 64

# The store's tables, their columns in order and their SQL types (docs/fleet.md#tables). `time` is
# read as text and turned into microseconds by each engine's view.
COLUMNS = {
    "results": [
        ("schema_version", "INTEGER"), ("run_key", "STRING"), ("time", "STRING"), ("host", "STRING"),
        ("mode", "STRING"), ("device_uuid", "STRING"), ("pci_bus_id", "STRING"), ("model", "STRING"),
        ("driver", "STRING"), ("backend", "STRING"), ("class_key", "STRING"), ("probe", "STRING"),
        ("family", "STRING"), ("level", "STRING"), ("size_bytes", "BIGINT"), ("iterations", "BIGINT"),
        ("run_seed", "STRING"), ("seed", "STRING"), ("attempt", "INTEGER"), ("outcome", "STRING"),
        ("duration_s", "DOUBLE"), ("checked", "BIGINT"), ("mismatches", "BIGINT"), ("digest", "STRING"),
        ("golden_digest", "STRING"), ("injected", "BOOLEAN"), ("temperature_c", "DOUBLE"),
        ("sm_clock_mhz", "DOUBLE"), ("power_w", "DOUBLE"), ("power_limit_w", "DOUBLE"),
    ],
    "sites": [
        ("schema_version", "INTEGER"), ("run_key", "STRING"), ("time", "STRING"), ("host", "STRING"),
        ("device_uuid", "STRING"), ("probe", "STRING"), ("attempt", "INTEGER"), ("record", "INTEGER"),
        ("element_index", "BIGINT"), ("byte_offset", "BIGINT"), ("unit", "INTEGER"), ("lane", "INTEGER"),
        ("width_bits", "INTEGER"), ("expected", "STRING"), ("observed", "STRING"), ("bits", "ARRAY<INTEGER>"),
        ("preempted", "BOOLEAN"),
    ],
    "devices": [
        ("schema_version", "INTEGER"), ("run_key", "STRING"), ("time", "STRING"), ("host", "STRING"),
        ("uuid", "STRING"), ("pci_bus_id", "STRING"), ("model", "STRING"), ("backend", "STRING"),
        ("compute_units", "INTEGER"), ("compute_capability", "STRING"), ("memory_bytes", "BIGINT"),
        ("driver", "STRING"), ("runtime_version", "STRING"), ("open_error", "STRING"),
    ],
    "quarantine": [
        ("schema_version", "INTEGER"), ("time", "STRING"), ("host", "STRING"), ("device_uuid", "STRING"),
        ("quarantine_id", "BIGINT"), ("event", "STRING"), ("reason", "STRING"), ("released_by", "STRING"),
    ],
    "jobs": [("schema_version", "INTEGER"), ("time", "STRING"), ("job_id", "BIGINT"), ("wall_ns", "BIGINT"),
             ("productive_ns", "BIGINT")]
    + [(f"{c}{part}", "BIGINT") for c in ("queue", "detection_teardown", "restart_warmup", "rework",
                                          "blocking_overhead") for part in ("_ns", "_sdc_ns")]
    + [("summary", "STRING")],
}

# A compacted Parquet file carries, besides the table's columns, each row's landing file as
# `source_file` ("day=YYYY-MM-DD/NAME.ndjson"). A landing file of that name found later (a report
# imported again, a history's day file rewritten with more rows) replaces those rows: each engine's
# view takes the landing file's rows and drops the Parquet rows of the same source. Nothing else is
# ever written twice, so no row is compared with another.
SOURCE = r"(day=[^/]+/[^/]+)$"

VOTE = "class_key, probe, level, size_bytes, iterations, run_seed, digest"
VOTE_KEY = "class_key, probe, level, size_bytes, iterations, run_seed"  # a vote, without its digests
# Equal keys, nulls included (a size or iteration count left to the probes' default is null).
VOTE_JOIN = " AND ".join(f"d.{c} IS NOT DISTINCT FROM v.{c}" for c in VOTE_KEY.split(", "))
VOTE_OF_K = ", ".join(f"k.{c}" for c in VOTE.split(", "))  # a vote and digest from vote_keys
# A result of attempt 0 that ran: what the rates count (a history's re-run after a failure is the same fault).
RAN = "attempt = 0 AND outcome <> 'skipped'"

# A row's UTC day, as days since the epoch.
DAY = "CAST(floor(t_us / 86400000000.0) AS BIGINT)"
# The tables a day's partial aggregates are made from (jobs are read by `jobs` alone).
RAW_TABLES = ("results", "sites", "devices", "quarantine")


def partials(hash64):
    """Per day, the group-bys that merge across days exactly (docs/fleet.md#partial-aggregates), in the
    SQL both engines run over the views `results`, `sites`, `devices` and `quarantine` (each row once,
    with `t_us`: its time in microseconds since the epoch). A compaction stores them for each day it
    finishes, so an analysis reads a day that did not change as these small tables alone; the rest of
    a store (and every day, on Spark) is grouped here at the analysis.

    Each vote and digest is keyed by a 64-bit hash of them (`hash64`, the engine's own: a key of
    seven text columns made the per-device table three times slower); two votes in one hash stop the
    analysis (check_stages). Sums are cast to BIGINT: DuckDB sums integers into 128 bits, which
    its Parquet writer stores as DOUBLE."""
    # Sizes and iteration counts left to the probes' default are null, which Spark's hash skips.
    vote_hash = (f"{hash64}(class_key, probe, level, coalesce(size_bytes, -1), coalesce(iterations, -1), "
                 "run_seed, digest)")
    voted = f"{RAN} AND class_key IS NOT NULL AND digest IS NOT NULL"
    return {
        "day_inputs": f"""
            SELECT {DAY} AS day_number, count(*) AS results,
              CAST(sum(CASE WHEN attempt = 0 AND outcome = 'skipped' THEN 1 ELSE 0 END) AS BIGINT) AS skipped,
              CAST(sum(CASE WHEN {RAN} AND class_key IS NULL THEN 1 ELSE 0 END) AS BIGINT) AS results_without_digests,
              count(DISTINCT CASE WHEN injected THEN run_key END) AS reports_with_injections
            FROM results GROUP BY {DAY}
        """,
        # A report's rows all carry its start time, so each report is in one day.
        "day_reports": f"""
            SELECT {DAY} AS day_number, count(DISTINCT run_key) AS reports FROM devices
            WHERE run_key IS NOT NULL GROUP BY {DAY}
        """,
        # A history's results are in many days: its host, per day, for the distinct count.
        "day_history_hosts": f"SELECT DISTINCT {DAY} AS day_number, host FROM results WHERE injected IS NULL",
        # A device as its earliest record of the day gives it, and the day's first and last run.
        "day_devices": f"""
            SELECT {DAY} AS day_number, host, uuid, min_by(pci_bus_id, t_us) AS pci_bus_id,
              min_by(model, t_us) AS model, min_by(driver, t_us) AS driver, min_by(backend, t_us) AS backend,
              min(t_us) AS first_us, max(t_us) AS last_us
            FROM (
              SELECT host, device_uuid AS uuid, pci_bus_id, model, driver, backend, t_us FROM results WHERE {RAN}
              UNION ALL
              SELECT host, uuid, pci_bus_id, model, driver, backend, t_us FROM devices WHERE run_key IS NOT NULL
            ) GROUP BY {DAY}, host, uuid
        """,
        "day_releases": f"""
            SELECT {DAY} AS day_number, host, device_uuid AS uuid, max(t_us) AS released_us FROM quarantine
            WHERE event = 'released' GROUP BY {DAY}, host, device_uuid
        """,
        # Real failures by time, to count those before and after the device's last release.
        "day_device_failures": f"""
            SELECT {DAY} AS day_number, host, device_uuid AS uuid, t_us, count(*) AS failures FROM results
            WHERE attempt = 0 AND outcome IN ('fail', 'device_error') AND injected IS NULL
            GROUP BY {DAY}, host, device_uuid, t_us
        """,
        # Durations are summed in whole nanoseconds, exactly, so that no engine's order of addition
        # changes a rate.
        "day_families": f"""
            SELECT {DAY} AS day_number, host, device_uuid AS uuid, family, count(*) AS results,
              CAST(sum(CAST(round(duration_s * 1e9) AS BIGINT)) AS BIGINT) AS tested_ns,
              CAST(sum(CASE WHEN outcome <> 'pass' THEN 1 ELSE 0 END) AS BIGINT) AS failures,
              min(CASE WHEN outcome <> 'pass' THEN t_us END) AS first_failure_us
            FROM results WHERE {RAN}
            GROUP BY {DAY}, host, device_uuid, family
        """,
        "day_failures_by_model": f"""
            SELECT {DAY} AS day_number, model, count(*) AS failures
            FROM results WHERE {RAN} AND outcome <> 'pass' GROUP BY {DAY}, model
        """,
        # By whole degree C, and by power draw in bands of 10% of the enforced limit (the same
        # arithmetic as sdcprobe's FleetDevice::add_conditions).
        "day_conditions": f"""
            SELECT {DAY} AS day_number, host, device_uuid AS uuid, 'degree' AS kind,
              CAST(floor(temperature_c) AS BIGINT) AS value, count(*) AS results,
              CAST(sum(CASE WHEN outcome <> 'pass' THEN 1 ELSE 0 END) AS BIGINT) AS failures,
              CAST(sum(CAST(round(duration_s * 1e9) AS BIGINT)) AS BIGINT) AS tested_ns
            FROM results WHERE {RAN} AND temperature_c IS NOT NULL
            GROUP BY {DAY}, host, device_uuid, CAST(floor(temperature_c) AS BIGINT)
            UNION ALL
            SELECT {DAY} AS day_number, host, device_uuid AS uuid, 'power_pct' AS kind,
              CAST(floor(power_w / power_limit_w * 10) AS BIGINT) * 10 AS value, count(*) AS results,
              CAST(sum(CASE WHEN outcome <> 'pass' THEN 1 ELSE 0 END) AS BIGINT) AS failures,
              CAST(sum(CAST(round(duration_s * 1e9) AS BIGINT)) AS BIGINT) AS tested_ns
            FROM results WHERE {RAN} AND power_w IS NOT NULL AND power_limit_w > 0
            GROUP BY {DAY}, host, device_uuid, CAST(floor(power_w / power_limit_w * 10) AS BIGINT) * 10
        """,
        # Each device's earliest mismatch records of the day: the earliest of all days are among them.
        "day_sites": f"""
            SELECT day_number, host, uuid, probe, t_us, record, byte_offset, unit, lane, bits FROM (
              SELECT {DAY} AS day_number, host, device_uuid AS uuid, probe, t_us, record, byte_offset, unit,
                lane, bits,
                row_number() OVER (PARTITION BY {DAY}, host, device_uuid ORDER BY t_us, probe, record) AS n
              FROM sites WHERE attempt = 0
            ) WHERE n <= {MAX_SITES_PER_DEVICE}
        """,
        # Each hash with its vote, digest and the hosts' golden digest.
        "day_vote_keys": f"""
            SELECT {DAY} AS day_number, {vote_hash} AS vh, {VOTE}, max(golden_digest) AS golden_digest
            FROM results WHERE {voted} GROUP BY {DAY}, {vote_hash}, {VOTE}
        """,
        # Each vote's digest per device, with its runs and earliest run. first_key: the earliest run's
        # time, doubled, plus 1 where it passed; even: it failed (of two at one time, the failed one,
        # as neither engine orders ties by itself).
        "day_vote_devices": f"""
            SELECT {DAY} AS day_number, {vote_hash} AS vh, host, device_uuid AS uuid, count(*) AS runs,
              min(t_us) AS first_us, min(2 * t_us + CAST(outcome = 'pass' AS BIGINT)) AS first_key
            FROM results WHERE {voted}
            GROUP BY {DAY}, {vote_hash}, host, device_uuid
        """,
        # Each vote's digest in the day: a vote held within one day (a fleet seed changes every hour)
        # is counted from this alone.
        "day_digests": """
            SELECT day_number, vh, CAST(sum(runs) AS BIGINT) AS runs, count(*) AS devices,
              count(DISTINCT host) AS hosts
            FROM day_vote_devices GROUP BY day_number, vh
        """,
    }


# Tables both engines make from the days' partial aggregates, before the aggregate tables (DuckDB a
# temporary table, Spark a cached view):
# - vote_keys: each hash with its vote, digest and the hosts' golden digest;
# - vote_digests: each hash's runs, distinct devices and hosts; a vote's digest seen in more than
#   one day has its devices counted again from those days' day_vote_devices, once each;
# - vote_members: the devices of each digest the vote may not choose, at their earliest run: every
#   digest but the vote's golden digest, or without one the digest of more than half of three or
#   more devices (FleetVote's decision; sdcprobe names a winner's devices nowhere).
MERGED = {
    "vote_keys": f"SELECT vh, {VOTE}, max(golden_digest) AS golden_digest FROM day_vote_keys GROUP BY vh, {VOTE}",
    "vote_digests": """
        WITH spanning AS (SELECT vh FROM day_digests GROUP BY vh HAVING count(*) > 1)
        SELECT vh, runs, devices, hosts FROM day_digests WHERE vh NOT IN (SELECT vh FROM spanning)
        UNION ALL
        SELECT vh, sum(runs) AS runs, count(*) AS devices, count(DISTINCT host) AS hosts FROM (
          SELECT vh, host, uuid, sum(runs) AS runs FROM day_vote_devices
          WHERE vh IN (SELECT vh FROM spanning) GROUP BY vh, host, uuid
        ) GROUP BY vh
    """,
    "vote_members": f"""
        WITH digests AS (
          SELECT k.*, d.devices FROM vote_digests d JOIN vote_keys k ON d.vh = k.vh
        ), votes AS (
          SELECT {VOTE_KEY}, sum(devices) AS devices, max(golden_digest) AS golden_digest
          FROM digests GROUP BY {VOTE_KEY}
        ), winners AS (
          SELECT d.vh FROM digests d JOIN votes v ON {VOTE_JOIN}
          WHERE d.digest = v.golden_digest
             OR (v.golden_digest IS NULL AND v.devices >= 3 AND 2 * d.devices > v.devices)
        )
        SELECT vh, host, uuid, min(first_us) AS first_us, min(first_key) AS first_key FROM day_vote_devices
        WHERE vh NOT IN (SELECT vh FROM winners) GROUP BY vh, host, uuid
    """,
}


def check_stages(engine):
    """Refuses a store where two votes share a hash, which would count them as one."""
    collided = engine.rows("SELECT vh FROM vote_keys GROUP BY vh HAVING count(*) > 1 LIMIT 1")
    if collided:
        raise StoreError(f"two votes share the hash {collided[0][0]}: this store cannot be aggregated")


# The aggregate tables, from the days' partial aggregates and the tables above, in the SQL both
# engines run as written; docs/fleet.md lists their columns.
AGGREGATES = {
    "inputs": """
        SELECT
          (SELECT coalesce(sum(results), 0) FROM day_inputs) AS results,
          (SELECT coalesce(sum(skipped), 0) FROM day_inputs) AS skipped,
          (SELECT coalesce(sum(results_without_digests), 0) FROM day_inputs) AS results_without_digests,
          (SELECT coalesce(sum(reports), 0) FROM day_reports) AS reports,
          (SELECT coalesce(sum(reports_with_injections), 0) FROM day_inputs) AS reports_with_injections,
          (SELECT count(DISTINCT host) FROM day_history_hosts) AS histories
    """,
    # A device as its earliest record gives it; seen from the first to the last of its runs (a
    # report's devices, a history's results that ran); its last release and failures around it.
    "devices": """
        WITH earliest AS (
          SELECT host, uuid, min_by(pci_bus_id, first_us) AS pci_bus_id, min_by(model, first_us) AS model,
            min_by(driver, first_us) AS driver, min_by(backend, first_us) AS backend,
            min(first_us) AS first_us, max(last_us) AS last_us
          FROM day_devices GROUP BY host, uuid
        ), released AS (
          SELECT host, uuid, max(released_us) AS released_us FROM day_releases GROUP BY host, uuid
        ), refailed AS (
          SELECT f.host, f.uuid,
            sum(CASE WHEN f.t_us < q.released_us THEN f.failures ELSE 0 END) AS failures_before_release,
            sum(CASE WHEN f.t_us < q.released_us THEN 0 ELSE f.failures END) AS failures_after_release
          FROM day_device_failures f JOIN released q ON f.host = q.host AND f.uuid = q.uuid
          GROUP BY f.host, f.uuid
        )
        SELECT d.host, d.uuid, d.pci_bus_id, d.model, d.driver, d.backend, d.first_us, d.last_us,
          coalesce(q.released_us, 0) AS released_us,
          coalesce(f.failures_before_release, 0) AS failures_before_release,
          coalesce(f.failures_after_release, 0) AS failures_after_release
        FROM earliest d
        LEFT JOIN released q ON d.host = q.host AND d.uuid = q.uuid
        LEFT JOIN refailed f ON d.host = f.host AND d.uuid = f.uuid
    """,
    # Exposure and failures per device and probe family.
    "families": """
        SELECT host, uuid, family, sum(results) AS results, sum(tested_ns) AS tested_ns,
          sum(failures) AS failures, min(first_failure_us) AS first_failure_us
        FROM day_families GROUP BY host, uuid, family
    """,
    "failures_by_day": """
        SELECT model, day_number, sum(failures) AS failures FROM day_failures_by_model GROUP BY model, day_number
    """,
    # Each vote's digests: its runs, distinct devices and hosts, and the host's golden digest.
    "digests": f"""
        SELECT {VOTE_OF_K}, k.golden_digest, d.runs, d.devices, d.hosts
        FROM vote_digests d JOIN vote_keys k ON d.vh = k.vh
    """,
    # The devices each digest names, the earliest first, each at its earliest run of the digest with
    # whether that run failed its own checks.
    "members": f"""
        SELECT {VOTE_OF_K}, n.host, n.uuid, n.first_us AS t_us, n.first_key % 2 = 0 AS failed FROM (
          SELECT vh, host, uuid, first_us, first_key,
            row_number() OVER (PARTITION BY vh ORDER BY first_us, host, uuid) AS m
          FROM vote_members
        ) n JOIN vote_keys k ON n.vh = k.vh WHERE n.m <= {MAX_NAMED_PER_DIGEST}
    """,
    # Results with a burn's conditions, per device and band.
    "conditions": """
        SELECT host, uuid, kind, value, sum(results) AS results, sum(failures) AS failures,
          sum(tested_ns) AS tested_ns
        FROM day_conditions GROUP BY host, uuid, kind, value
    """,
    # Each device's earliest mismatch records, for where on the chip its faults lie.
    "sites": f"""
        SELECT host, uuid, probe, t_us, record, byte_offset, unit, lane, bits FROM (
          SELECT host, uuid, probe, t_us, record, byte_offset, unit, lane, bits,
            row_number() OVER (PARTITION BY host, uuid ORDER BY t_us, probe, record) AS n
          FROM day_sites
        ) WHERE n <= {MAX_SITES_PER_DEVICE}
    """,
}


class StoreError(Exception):
    """Bad input: exit 2, naming the file."""


DAY_TEXT = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def day_files(store, table, since, until):
    """The table's published files in the days asked for, listed now, by day: `ndjson` the landing
    files; `parquet` the newest compacted file (or none), and `stale` the older ones: a compaction
    merges the older one into its own and removes it only after publishing. Temporary files (a
    leading '.') never end in .ndjson or .parquet."""
    days = {}
    for folder in sorted(glob.glob(os.path.join(store, table, "day=*"))):
        day = os.path.basename(folder)[4:]
        if not DAY_TEXT.match(day):
            raise StoreError(f"{folder}: not a day folder (day=YYYY-MM-DD)")
        if (since and day < since) or (until and day > until):
            continue
        landing, parquet = [], []
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.startswith((".", "_")):
                    continue
                if entry.name.endswith(".ndjson"):
                    landing.append(entry.path)
                elif entry.name.endswith(".parquet"):
                    parquet.append((entry.stat().st_mtime_ns, entry.path))
        parquet.sort()
        days[day] = {"folder": folder, "ndjson": landing, "parquet": [path for _, path in parquet[-1:]],
                     "stale": [path for _, path in parquet[:-1]]}
    return days


def store_files(days):
    """The files of `days` (from day_files) together, with `ndjson_days` a glob per day folder that
    holds landing files, for Spark, which lists them once itself as it plans."""
    files = {"ndjson": [], "ndjson_days": [], "parquet": [], "stale": []}
    for day in days.values():
        for kind in ("ndjson", "parquet", "stale"):
            files[kind] += day[kind]
        if day["ndjson"]:
            files["ndjson_days"].append(os.path.join(day["folder"], "*.ndjson"))
    return files


# A day's partial aggregates, as a compaction stores them: STORE/partials/day=D/partials-TIME-PID/,
# one Parquet file per table of partials() and sources.json, which names what they were made from.
# They stand for the day while the day's files are those (docs/fleet.md#partial-aggregates).
PARTIALS_VERSION = 1


def partials_sources(listing, day, engine_name):
    """What a day's partial aggregates are made from: the day's newest Parquet file of each table,
    and the engine whose hash keys their votes."""
    return {"partials_version": PARTIALS_VERSION, "engine": engine_name,
            "files": {t: [os.path.basename(p) for p in listing[t].get(day, {}).get("parquet", [])]
                      for t in RAW_TABLES}}


def stored_partials(store, day, listing, engine_name):
    """The folder of the day's newest stored partial aggregates if they stand for the day as listed
    (no landing file, the same Parquet files, the same engine), else None."""
    if any(listing[t].get(day, {}).get("ndjson") for t in RAW_TABLES):
        return None
    folder = os.path.join(store, "partials", f"day={day}")
    try:
        names = sorted(n for n in os.listdir(folder) if n.startswith("partials-"))
    except FileNotFoundError:
        return None
    if not names:
        return None
    newest = os.path.join(folder, names[-1])
    sources = os.path.join(newest, "sources.json")
    try:
        with open(sources) as f:
            made_from = json.load(f)
    except (OSError, ValueError) as e:
        raise StoreError(f"{sources}: {e}") from e
    return newest if made_from == partials_sources(listing, day, engine_name) else None


def fsync_path(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def column_list(table):
    """The table's columns, in order, for a SELECT."""
    return ", ".join(c for c, _ in COLUMNS[table])


def sql_text(text):
    return "'" + text.replace("'", "''") + "'"


def sql_list(paths):
    return "[" + ", ".join(sql_text(p) for p in paths) + "]"


# Bytes of landing rows DuckDB reads at once (fleet_engine.DuckDBEngine.read_landing).
LANDING_BATCH = 64 << 20


def tagged_lines(path):
    """The landing file's lines, each object given the file's `source_file` as its first member;
    None where a line does not begin an object, or the file names a source_file itself (read file
    by file, where DuckDB's error names it). Whatever else is wrong (an empty object, a cut line)
    makes DuckDB refuse the batch, which is then read file by file too."""
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        return b""
    if not data.endswith(b"\n"):
        data += b"\n"
    lines = data.count(b"\n")
    if not data.startswith(b"{") or data.count(b"\n{") != lines - 1 or b'"source_file"' in data:
        return None
    prefix = b'{"source_file": ' + json.dumps(re.search(SOURCE, path).group(1)).encode() + b", "
    return prefix + data[1:].replace(b"\n{", b"\n" + prefix)


class DuckDBEngine:
    """Embedded DuckDB over a store in a local folder."""

    hash64 = "hash"

    def __init__(self, threads=None, memory_limit=None):
        import duckdb

        self.db = duckdb.connect()
        if threads:
            self.db.execute(f"SET threads = {int(threads)}")
        if memory_limit:
            self.db.execute(f"SET memory_limit = '{memory_limit}'")
        self.db.execute("SET preserve_insertion_order = false")
        self.error = duckdb.Error
        self.name = f"duckdb {duckdb.__version__}"

    def duck_type(self, sql_type):
        return {"STRING": "VARCHAR", "ARRAY<INTEGER>": "INTEGER[]"}.get(sql_type, sql_type)

    def load(self, table, files):
        # The files of now (store_files), by name: a view over a glob would list the folders again
        # at each aggregation, and a file landing meanwhile would count in some aggregate tables only.
        columns = COLUMNS[table]
        names = column_list(table)
        empty = ", ".join(f"CAST(NULL AS {self.duck_type(t)}) AS {c}" for c, t in columns)
        nothing = f"SELECT {empty}, CAST(NULL AS VARCHAR) AS filename, CAST(NULL AS VARCHAR) AS source_file WHERE false"
        compacted = (f"SELECT {names}, filename, source_file FROM read_parquet({sql_list(files['parquet'])}, "
                     f"filename=true)") if files["parquet"] else nothing
        self.db.execute(f"CREATE OR REPLACE TEMP TABLE {table}_landing AS {nothing}")
        self.read_landing(table, files["ndjson"])
        self.db.execute(f"CREATE OR REPLACE TEMP VIEW {table}_compacted AS {compacted}")
        self.db.execute(f"""CREATE OR REPLACE TEMP VIEW {table}_raw AS
            SELECT * FROM {table}_landing UNION ALL
            SELECT * FROM {table}_compacted WHERE source_file NOT IN (SELECT source_file FROM {table}_landing)""")
        self.check_version(table)
        self.db.execute(f"CREATE OR REPLACE TEMP VIEW {table} AS "
                        f"SELECT * EXCLUDE (filename), epoch_us(CAST(time AS TIMESTAMP)) AS t_us FROM {table}_raw")

    def read_landing(self, table, paths):
        """Adds the landing files' rows to {table}_landing. DuckDB spends about 2 ms opening each
        file, so the files are read in batches: each line given its file's `source_file` and
        written to one scratch file of up to LANDING_BATCH bytes, which DuckDB reads at once. A file
        that is not a plain series of JSON objects, or a batch DuckDB refuses, is read file by file
        instead, where DuckDB's error names the file and line."""
        names = column_list(table)
        spec = ", ".join(f"'{c}': '{self.duck_type(t)}'" for c, t in COLUMNS[table])

        def by_file(batch):
            try:
                self.db.execute(
                    f"INSERT INTO {table}_landing SELECT {names}, filename, "
                    f"regexp_extract(filename, '{SOURCE}', 1) AS source_file FROM read_json({sql_list(batch)}, "
                    f"format='newline_delimited', columns={{{spec}}}, filename=true)")
            except self.error as e:
                raise StoreError(f"{table}: {e}") from e

        def in_one_read(batch, chunks, scratch):
            with open(scratch, "wb") as f:
                f.writelines(chunks)
            table_dir = os.path.dirname(os.path.dirname(batch[0]))
            try:
                self.db.execute(
                    f"INSERT INTO {table}_landing SELECT {names}, {sql_text(table_dir + '/')} || source_file, "
                    f"source_file FROM read_json({sql_text(scratch)}, format='newline_delimited', "
                    f"columns={{{spec}, 'source_file': 'VARCHAR'}})")
            except self.error:
                by_file(batch)

        fd, scratch = tempfile.mkstemp(prefix="sdcprobe-landing-", suffix=".ndjson")
        os.close(fd)
        try:
            batch, chunks, size = [], [], 0
            for path in paths:
                lines = tagged_lines(path)
                if lines is None:
                    by_file([path])
                    continue
                batch.append(path)
                chunks.append(lines)
                size += len(lines)
                if size >= LANDING_BATCH:
                    in_one_read(batch, chunks, scratch)
                    batch, chunks, size = [], [], 0
            if batch:
                in_one_read(batch, chunks, scratch)
        finally:
            os.remove(scratch)

    def stage(self, name, sql):
        try:
            self.db.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {sql}")
        except self.error as e:
            raise StoreError(f"{name}: {e}") from e

    def partials(self, store, since, until):
        """The partial aggregates of the days asked for: a day's stored ones where they stand for
        its files as listed now, the rest grouped from the rows of the days without."""
        listing = {t: day_files(store, t, since, until) for t in RAW_TABLES}
        days = sorted(set().union(*listing.values()))
        stored = {day: stored_partials(store, day, listing, self.name) for day in days}
        stored = {day: folder for day, folder in stored.items() if folder}
        for table in RAW_TABLES:
            self.load(table, store_files({d: files for d, files in listing[table].items() if d not in stored}))
        tables = partials(self.hash64)
        for name, sql in tables.items():
            self.stage(name, sql)
        if not stored:
            return
        # Only once all are grouped: day_digests reads the fresh day_vote_devices alone.
        for name in tables:
            paths = sql_list(os.path.join(folder, f"{name}.parquet") for folder in stored.values())
            self.db.execute(f"ALTER TABLE {name} RENAME TO {name}_rows")
            self.db.execute(f"CREATE TEMP VIEW {name} AS SELECT * FROM {name}_rows "
                            f"UNION ALL BY NAME SELECT * FROM read_parquet({paths}, hive_partitioning=false)")

    def write_partials(self, store, day, listing):
        """Stores the day's partial aggregates from its files as listed (written to a hidden folder,
        synced, renamed), then removes the day's older ones."""
        folder = os.path.join(store, "partials", f"day={day}")
        os.makedirs(folder, exist_ok=True)
        work = tempfile.mkdtemp(prefix=".partials-", dir=folder)
        try:
            for table in RAW_TABLES:
                self.load(table, store_files({day: listing[table][day]} if day in listing[table] else {}))
            for name, sql in partials(self.hash64).items():
                self.stage(name, sql)
                path = os.path.join(work, f"{name}.parquet")
                self.db.execute(f"COPY {name} TO '{path}' (FORMAT PARQUET)")
                fsync_path(path)
            with open(os.path.join(work, "sources.json"), "w") as f:
                json.dump(partials_sources(listing, day, self.name), f)
                f.flush()
                os.fsync(f.fileno())
            fsync_path(work)
            target = os.path.join(folder, f"partials-{time.time_ns()}-{os.getpid()}")
            os.rename(work, target)
            fsync_path(folder)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        for name in os.listdir(folder):
            if name.startswith("partials-") and os.path.join(folder, name) != target:
                shutil.rmtree(os.path.join(folder, name))

    def rows(self, sql):
        return self.db.execute(sql).fetchall()

    def check_version(self, table):
        try:
            bad = self.db.execute(
                f"SELECT filename, schema_version FROM {table}_raw "
                f"WHERE schema_version IS DISTINCT FROM {STORE_SCHEMA_VERSION} LIMIT 1").fetchone()
        except self.error as e:
            raise StoreError(f"{table}: {e}") from e
        if bad:
            raise StoreError(f"{bad[0]}: schema_version {bad[1]}: this sdcprobe reads version {STORE_SCHEMA_VERSION}")

    def write(self, name, sql, folder):
        os.makedirs(folder)
        try:
            self.db.execute(f"COPY ({sql}) TO '{os.path.join(folder, 'part-0.json')}' (FORMAT JSON)")
        except self.error as e:
            raise StoreError(f"{name}: {e}") from e
        open(os.path.join(folder, "_SUCCESS"), "w").close()


class SparkEngine:
    """Spark SQL, over a store at any path Spark reads (a folder, HDFS, s3a)."""

    hash64 = "xxhash64"

    def __init__(self, master=None):
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.appName("sdcprobe fleet aggregates")
        if master:
            builder = builder.master(master)  # spark-submit sets it; `python fleet_engine.py` may
        if master and master.startswith("local"):
            # One machine: a shuffle partition per core, not Spark's 200 for a cluster, which make
            # each small group-by here two hundred tasks.
            builder = builder.config("spark.sql.shuffle.partitions", str(os.cpu_count() or 1))
        self.spark = builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()
        self.spark.sparkContext.setLogLevel("ERROR")
        self.spark.conf.set("spark.sql.session.timeZone", "UTC")

    def load(self, store, table, since, until):
        from pyspark.sql import functions as F
        from pyspark.sql.utils import AnalysisException

        names = [c for c, _ in COLUMNS[table]]
        schema = ", ".join(f"{c} {t}" for c, t in COLUMNS[table])
        base = os.path.join(store, table)
        if "://" in store:  # HDFS, s3a: globs; a table without Parquet yet has no match
            ndjson = [os.path.join(store, table, "day=*", "*.ndjson")]
            parquet = [os.path.join(store, table, "day=*", "*.parquet")]
        else:  # landing files by day folder, which Spark lists once as it plans; a day's newest Parquet file
            files = store_files(day_files(store, table, since, until))
            ndjson, parquet = files["ndjson_days"], files["parquet"]
        nothing = self.spark.createDataFrame([], schema + ", filename STRING, source_file STRING")

        def read(kind, paths):
            if not paths:
                return nothing
            try:
                reader = self.spark.read.option("basePath", base)  # a reader each: schema() sets it in place
                frame = reader.schema(schema).json(paths) if kind == "json" else reader.parquet(*paths)
            except AnalysisException:
                if "://" in store:
                    return nothing
                raise
            frame = frame.withColumn("filename", F.input_file_name())
            if kind == "json":
                frame = frame.withColumn("source_file", F.regexp_extract("filename", SOURCE, 1))
            return frame.select(*names, "filename", "source_file")

        landing, compacted = read("json", ndjson), read("parquet", parquet)
        raw = landing.unionByName(compacted.join(landing.select("source_file").distinct(), "source_file", "left_anti")
                                  .select(*names, "filename", "source_file"))
        if since or until:
            day = F.date_format(F.to_timestamp("time"), "yyyy-MM-dd")
            if since:
                raw = raw.where(day >= since)
            if until:
                raw = raw.where(day <= until)
        raw.createOrReplaceTempView(f"{table}_raw")
        bad = self.spark.sql(f"SELECT filename, schema_version FROM {table}_raw "
                             f"WHERE NOT (schema_version <=> {STORE_SCHEMA_VERSION}) LIMIT 1").collect()
        if bad:
            raise StoreError(f"{bad[0][0]}: schema_version {bad[0][1]}: this sdcprobe reads version "
                             f"{STORE_SCHEMA_VERSION}")
        self.spark.sql(f"CREATE OR REPLACE TEMP VIEW {table} AS "
                       f"SELECT *, unix_micros(to_timestamp(time)) AS t_us FROM {table}_raw")

    def stage(self, name, sql):
        self.spark.sql(sql).persist().createOrReplaceTempView(name)

    def partials(self, store, since, until):
        """The partial aggregates of every day asked for, from its rows: views, planned with the
        query that reads them, but for day_vote_devices, which two tables read (cached)."""
        for table in RAW_TABLES:
            self.load(store, table, since, until)
        for name, sql in partials(self.hash64).items():
            if name == "day_vote_devices":
                self.stage(name, sql)
            else:
                self.spark.sql(sql).createOrReplaceTempView(name)

    def rows(self, sql):
        return [tuple(r) for r in self.spark.sql(sql).collect()]

    def write(self, name, sql, folder):
        # ignoreNullFields=false: every column on every line, as DuckDB writes them.
        self.spark.sql(sql).coalesce(1).write.mode("errorifexists").option("ignoreNullFields", "false").json(folder)


def aggregate(engine, store, out, since=None, until=None):
    """Writes the aggregate tables of `store` under `out`, one folder each with its _SUCCESS."""
    local_store = "://" not in store
    if local_store and not os.path.isdir(store):
        raise StoreError(f"{store}: not a store folder")
    engine.partials(store, since, until)
    for name, sql in MERGED.items():
        engine.stage(name, sql)
    check_stages(engine)
    local_out = "://" not in out
    work = tempfile.mkdtemp(prefix=".aggregates-", dir=os.path.dirname(os.path.abspath(out))) if local_out else out
    try:
        for name, sql in AGGREGATES.items():
            engine.write(name, sql, os.path.join(work, name))
        version = os.path.join(work, "version")
        engine.write("version", f"SELECT {AGGREGATES_VERSION} AS aggregates_version, "
                     f"{STORE_SCHEMA_VERSION} AS store_schema_version", version)
        if local_out:
            if os.path.exists(out):
                shutil.rmtree(out)
            os.rename(work, out)
    except BaseException:
        if local_out:
            shutil.rmtree(work, ignore_errors=True)
        raise


def job_summaries(store, out):
    """Writes the summary of each job in the store, the latest stored, one per line, to `out`."""
    engine = DuckDBEngine()
    engine.load("jobs", store_files(day_files(store, "jobs", None, None)))
    rows = engine.db.execute("""SELECT summary FROM (
        SELECT job_id, summary, row_number() OVER (PARTITION BY job_id ORDER BY t_us DESC, summary) AS k FROM jobs)
        WHERE k = 1 ORDER BY job_id""").fetchall()
    with open(out, "w") as f:
        for (summary,) in rows:
            f.write(summary + "\n")
    return len(rows)


def compact(store):
    """Merges each table's landing files of a day into one Parquet file, then removes them; then
    stores the partial aggregates of each day whose stored ones no longer stand for its files."""
    engine = DuckDBEngine()
    merged = made = 0
    tables = {table: day_files(store, table, None, None) for table in COLUMNS}
    for day in sorted(set().union(*tables.values())):
        for table, days in tables.items():
            if day in days and days[day]["ndjson"]:
                compact_day(engine, table, day, days[day], merged)
                merged += 1
        listing = {t: day_files(store, t, day, day) for t in RAW_TABLES}
        if not any(day in listing[t] for t in RAW_TABLES):
            continue  # a day of job summaries alone
        if any(listing[t].get(day, {}).get("ndjson") for t in RAW_TABLES):
            continue  # a file landed since: left for the next compaction
        if stored_partials(store, day, listing, engine.name) is None:
            engine.write_partials(store, day, listing)
            made += 1
    return merged, made


def compact_day(engine, table, day, files, n):
    """Merges a table's files of the day (day_files) into one Parquet file, each row of a landing
    file over its older copy; publishes it; only then removes what it merged."""
    engine.load(table, store_files({day: files}))
    names = column_list(table)
    folder = files["folder"]
    fd, temp = tempfile.mkstemp(prefix=".compact-", suffix=".tmp", dir=folder)
    os.close(fd)
    engine.db.execute(f"COPY (SELECT {names}, source_file FROM {table}_raw) TO '{temp}' (FORMAT PARQUET)")
    fsync_path(temp)
    # A name no earlier compaction had (a process id comes back), so that publishing never replaces
    # a file the removal below would then take.
    target = os.path.join(folder, f"compacted-{time.time_ns()}-{os.getpid()}-{n}.parquet")
    os.rename(temp, target)
    for path in files["ndjson"] + files["parquet"] + files["stale"]:
        os.remove(path)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="sdcprobe.fleet_engine", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    agg = sub.add_parser("aggregate", help="the aggregate tables of a store")
    agg.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb")
    agg.add_argument("--store", required=True)
    agg.add_argument("--out", required=True)
    agg.add_argument("--since", help="first day, YYYY-MM-DD")
    agg.add_argument("--until", help="last day, YYYY-MM-DD")
    agg.add_argument("--threads", type=int)
    agg.add_argument("--memory-limit", help="DuckDB's memory limit, e.g. 4GB")
    agg.add_argument("--master", help="Spark's master when not run by spark-submit, e.g. local[2]")
    comp = sub.add_parser("compact", help="merge each day's landing files into Parquet (DuckDB)")
    comp.add_argument("--store", required=True)
    jobs = sub.add_parser("jobs", help="each job's latest summary, one per line (DuckDB)")
    jobs.add_argument("--store", required=True)
    jobs.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "jobs":
            job_summaries(args.store, args.out)
            return 0
        if args.command == "compact":
            merged, made = compact(args.store)
            print(f"sdcprobe fleet compact: {merged} day files written, partial aggregates of {made} days stored")
            return 0
        for name in ("since", "until"):
            if getattr(args, name) and not DAY_TEXT.match(getattr(args, name)):
                raise StoreError(f"--{name}: expected a day like 2026-12-01, got {getattr(args, name)!r}")
        engine = DuckDBEngine(args.threads, args.memory_limit) if args.engine == "duckdb" else SparkEngine(args.master)
        aggregate(engine, args.store, args.out, args.since, args.until)
        return 0
    except ImportError as e:
        print(f"sdcprobe: fleet engine: {e.name or e} is not installed in {sys.executable}", file=sys.stderr)
        return 2
    except StoreError as e:
        print(f"sdcprobe: fleet engine: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
