"""`sdcprobe fleet sdc --store` over a billion results: a fleet of 100,000 GPUs swept every hour
with four probes, 105 days of it, written straight into the store (docs/fleet.md) as compacted
Parquet files, one per table and day, as a year's compactions leave them. Prints only; nothing is
asserted but the planted faults (docs/fleet.md quotes it).

    bench/fleet_store_billion_bench.py DIR SDCPROBE PYTHON [--gpus 100000] [--days 105]

PYTHON has duckdb (build/release/fleet-engines-venv/bin/python); sdcprobe's package is taken from
this source tree. Timed, each a fresh process with its wall and CPU seconds and peak memory (the
largest of its process tree):
    write:   DuckDB writes each day's results, devices and sites (9.6 M results a day)
    compact: PYTHON -m sdcprobe.fleet_engine compact --store DIR: each day's partial aggregates,
             once a day on a real store
    store:   SDCPROBE fleet sdc --store DIR --json DIR/report.json   (goal: <= 10 min, <= 4 GiB)
    landed:  the next day's first hourly sweep landed (a results and a devices file per node, as
             `sweep --store` writes them), not yet compacted: that day is read from its rows

Planted, and checked in the report: three GPUs that hand back a wrong GEMM digest in every sweep
(suspects), a lemon device failing a third of its memory tests and a lemon node whose eight GPUs
fail 5% of theirs (lemons), and rare background failures.
"""

import argparse
import datetime
import json
import os
import resource
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GPUS_PER_NODE = 8
PROBES = [("alu.fma32", "alu"), ("gemm.exact.fp32", "gemm"), ("mem.march_c", "mem"), ("sfu.transcendental", "sfu")]
WRONG_GEMM = (777, 31337, 77777)  # GPUs whose GEMM digest is wrong in every sweep
LEMON_DEVICE = 4242
LEMON_NODE = 999
DAY0 = "2026-01-01"


def timed(command):
    """Runs `command` with /bin/sh from a fresh child, so that the usage it reports back is this
    step's alone: (exit code, wall s, CPU s, peak MiB)."""
    read, write = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        code = subprocess.call(command, shell=True)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        os.write(write, json.dumps([code, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024]).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        code, cpu, peak = json.loads(f.read())
    os.waitpid(pid, 0)
    return code, time.monotonic() - start, cpu, peak


def report(name, step, expected_code=0):
    code, wall, cpu, peak = step
    print(f"{name:8} {wall:8.1f} s wall {cpu:8.1f} s CPU {peak:8.0f} MiB peak  exit {code}", flush=True)
    if code != expected_code:
        sys.exit(f"{name}: exit {code}, expected {expected_code}")


# One day of the fleet, as SQL over DuckDB's range(): each GPU g on node g / 8, each hourly sweep h,
# each probe p; each sweep's seed in its class key, as sdcprobe's consensus keys a vote. Columns in
# the store's order (fleet_engine.COLUMNS), with each row's landing file. Per-row strings are made
# once per GPU, sweep or run and joined, which keeps the writing of a day to seconds.
RESULTS = """
WITH gpu AS (
  SELECT g, g // {per_node} AS node, 'node' || (g // {per_node}) AS host,
    printf('GPU-%08x-0000-4000-8000-%012x', g, g) AS device_uuid,
    printf('00000000:%02X:00.0', g % 8 + 24) AS pci_bus_id,
    CASE WHEN (g // {per_node}) % 2 = 0 THEN 'NVIDIA H100 80GB HBM3' ELSE 'NVIDIA A100-SXM4-80GB' END AS model,
    CASE WHEN (g // {per_node}) % 2 = 0 THEN '550.54.15' ELSE '535.104' END AS driver,
    CASE WHEN (g // {per_node}) % 2 = 0 THEN 'cuda|NVIDIA H100 80GB HBM3|132|9.0|550.54.15|12.4'
         ELSE 'cuda|NVIDIA A100-SXM4-80GB|108|8.0|535.104|12.4' END AS class_base,
    45.0 + g % 40 AS temperature_c, 500.0 + g % 150 AS power_w
  FROM range({gpus}) t(g)
), sweep AS (
  SELECT h, hash('{day}', h) AS seed FROM range({hours}) t(h)
), run AS (
  SELECT node, h, seed, printf('%016x', hash(node, '{day}', h)) AS run_key,
    strftime(date '{day}' + to_hours(h) + to_seconds(node % 3000), '%Y-%m-%dT%H:%M:%S.000000Z') AS time,
    printf('day={day}/node%d-%02d.ndjson', node, h) AS source_file
  FROM range({gpus} // {per_node}) t(node), sweep
), probe AS (
  SELECT * FROM (VALUES (0, '{p0}', '{f0}'), (1, '{p1}', '{f1}'), (2, '{p2}', '{f2}'), (3, '{p3}', '{f3}'))
    t(p, probe, family)
), digest AS (
  SELECT h, p, printf('0x%016x', seed) AS run_seed, '|seed ' || seed AS class_seed,
    md5(probe || seed) AS right_digest, md5(probe || seed || 'wrong') AS wrong_digest
  FROM sweep, probe
), result AS (
  SELECT gpu.*, run.h, run.run_key, run.time, run.source_file, probe.*, digest.run_seed, digest.class_seed,
    CASE WHEN probe.p = 1 AND gpu.g IN {wrong} THEN digest.wrong_digest ELSE digest.right_digest END AS digest,
    probe.p = 2 AND ((gpu.g = {lemon_device} AND hash(gpu.g, run.h, '{day}') % 3 = 0)
      OR (gpu.node = {lemon_node} AND hash(gpu.g, run.h, '{day}') % 20 = 0)
      OR hash(gpu.g, run.h, '{day}') % 2000000 = 0) AS failed
  FROM gpu JOIN run ON gpu.node = run.node CROSS JOIN probe JOIN digest ON digest.h = run.h AND digest.p = probe.p
)
SELECT 1 AS schema_version, run_key, time, host, 'sweep' AS mode, device_uuid, pci_bus_id, model, driver,
  'cuda' AS backend, class_base || class_seed AS class_key, probe, family, 'standard' AS level,
  CAST(NULL AS BIGINT) AS size_bytes, CAST(NULL AS BIGINT) AS iterations, run_seed, run_seed AS seed, 0 AS attempt,
  CASE WHEN failed THEN 'fail' ELSE 'pass' END AS outcome, 600.5 AS duration_s, 16777216 AS checked,
  CAST(failed AS BIGINT) AS mismatches, digest, CAST(NULL AS VARCHAR) AS golden_digest, false AS injected,
  temperature_c + h % 5 AS temperature_c, 1980.0 AS sm_clock_mhz, power_w, 700.0 AS power_limit_w, source_file
FROM result
"""
SITES = """
SELECT 1 AS schema_version, run_key, time, host, device_uuid, probe, attempt, 0 AS record,
  CAST(5 * 262144 + hash(time, device_uuid) % 4096 AS BIGINT) AS element_index,
  CAST((5 * 262144 + hash(time, device_uuid) % 4096) * 8 AS BIGINT) AS byte_offset,
  CAST(NULL AS INTEGER) AS unit, CAST(NULL AS INTEGER) AS lane, 64 AS width_bits,
  '0x0000000000000000' AS expected, '0x0000000000000008' AS observed, [3] AS bits, false AS preempted, source_file
FROM {day_results} WHERE outcome = 'fail'
"""
DEVICES = """
SELECT 1 AS schema_version, run_key, time, host, device_uuid AS uuid, pci_bus_id, model, backend,
  CAST(CASE WHEN model LIKE '%H100%' THEN 132 ELSE 108 END AS INTEGER) AS compute_units,
  CASE WHEN model LIKE '%H100%' THEN '9.0' ELSE '8.0' END AS compute_capability,
  CAST(85899345920 AS BIGINT) AS memory_bytes, driver, '12.4' AS runtime_version, CAST(NULL AS VARCHAR) AS open_error,
  source_file
FROM {day_results} WHERE probe = '{p0}'
"""


def write_day(db, store, day, gpus, hours=24):
    """Writes the day's results, then its sites and devices from them, each as the day's one
    Parquet file; returns the SQL of each table, for landing files."""
    names = {f"p{i}": p for i, (p, _) in enumerate(PROBES)} | {f"f{i}": f for i, (_, f) in enumerate(PROBES)}
    results = RESULTS.format(day=day, gpus=gpus, hours=hours, per_node=GPUS_PER_NODE, wrong=WRONG_GEMM,
                             lemon_device=LEMON_DEVICE, lemon_node=LEMON_NODE, **names)
    written = os.path.join(store, "results", f"day={day}", "compacted-0-0-0.parquet")
    day_results = f"(SELECT * FROM read_parquet('{written}', hive_partitioning=false))"
    for table, sql in (("results", results), ("sites", SITES.format(day_results=day_results)),
                       ("devices", DEVICES.format(day_results=day_results, **names))):
        folder = os.path.join(store, table, f"day={day}")
        os.makedirs(folder, exist_ok=True)
        temp = os.path.join(folder, ".written.tmp")
        db.execute(f"COPY ({sql}) TO '{temp}' (FORMAT PARQUET)")
        os.rename(temp, os.path.join(folder, "compacted-0-0-0.parquet"))


def day_name(d):
    return str(datetime.date.fromisoformat(DAY0) + datetime.timedelta(days=d))


def generate(store, gpus, days, workers=os.cpu_count()):
    """Writes the days, one writer process per core (a day's writing keeps one core busy)."""
    import multiprocessing

    pool = [multiprocessing.Process(target=write_days, args=(store, gpus, range(w, days, workers)))
            for w in range(workers)]
    for p in pool:
        p.start()
    for p in pool:
        p.join()
        if p.exitcode != 0:
            sys.exit(f"a writer failed: exit {p.exitcode}")


def write_days(store, gpus, days):
    import duckdb

    db = duckdb.connect()
    db.execute("SET preserve_insertion_order = false")
    db.execute("SET threads = 1")
    for d in days:
        write_day(db, store, day_name(d), gpus)
        print(f"  day {d + 1} written", file=sys.stderr, flush=True)


def land_hour(store, gpus, d):
    """The day's first hourly sweep as landing files: per node, its results and its devices."""
    import duckdb

    db = duckdb.connect()
    day = day_name(d)
    scratch = os.path.join(store, "..", "landing-hour")
    write_day(db, scratch, day, gpus, hours=1)
    for table in ("results", "devices"):
        folder = os.path.join(store, table, f"day={day}")
        os.makedirs(folder, exist_ok=True)
        rows = db.execute(f"SELECT host, to_json(r) FROM (SELECT * EXCLUDE (source_file) FROM read_parquet("
                          f"'{scratch}/{table}/day={day}/*.parquet', hive_partitioning=false)) r").fetchall()
        by_node = {}
        for host, line in rows:
            by_node.setdefault(host, []).append(line)
        for host, lines in by_node.items():
            with open(os.path.join(folder, f"{host}-{day}T00.ndjson"), "w") as f:
                f.write("\n".join(lines) + "\n")
    shutil.rmtree(scratch)


def step_script(path, call):
    """A script that runs `call` of this module, so that a step is a fresh process of its own."""
    with open(path, "w") as f:
        f.write(f"import sys\nsys.path.insert(0, {HERE!r})\nimport fleet_store_billion_bench as b\nb.{call}\n")
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir")
    parser.add_argument("sdcprobe")
    parser.add_argument("python")
    parser.add_argument("--gpus", type=int, default=100000)
    parser.add_argument("--days", type=int, default=105)
    args = parser.parse_args()
    store = os.path.join(args.dir, "store")
    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(store)
    results = args.gpus * 24 * 4 * args.days
    print(f"fleet: {args.gpus} GPUs, hourly sweeps of 4 probes, {args.days} days: {results:,} results", flush=True)
    report("write", timed(f"{args.python} " + step_script(os.path.join(args.dir, "generate.py"),
                                                         f"generate({store!r}, {args.gpus}, {args.days})")))
    print(f"store on disk: {subprocess.check_output(['du', '-sh', store], text=True).split()[0]}", flush=True)

    engine = f"PYTHONPATH={os.path.join(os.path.dirname(HERE), 'python')} SDCPROBE_PYTHON={args.python} "
    report("compact", timed(f"{engine}{args.python} -m sdcprobe.fleet_engine compact --store {store}"))
    json_path = os.path.join(args.dir, "report.json")
    analysis = f"{engine}{args.sdcprobe} fleet sdc --store {store} --json {json_path} > /dev/null"
    step = timed(analysis)
    report("store", step, expected_code=1)  # the planted faults
    print(f"goal: <= 600 s and <= 4096 MiB: {'met' if step[1] <= 600 and step[3] <= 4096 else 'NOT met'}")
    check(json_path, results)

    subprocess.check_call([args.python, step_script(os.path.join(args.dir, "land.py"),
                                                    f"land_hour({store!r}, {args.gpus}, {args.days})")])
    report("landed", timed(analysis), expected_code=1)
    check(json_path, results + args.gpus * 4)


def check(json_path, results):
    with open(json_path) as f:
        fleet = json.load(f)
    suspects = {s["uuid"] for s in fleet["suspects"]}
    lemons = {d["uuid"] for d in fleet["lemons"]["devices"]}
    nodes = {n["host"] for n in fleet["lemons"]["nodes"]}
    wrong = {f"GPU-{g:08x}-0000-4000-8000-{g:012x}" for g in WRONG_GEMM}
    print(f"results counted: {fleet['inputs']['results']:,} (expected {results:,}); "
          f"wrong-digest GPUs among suspects: {len(wrong & suspects)} of 3; "
          f"lemon device found: {f'GPU-{LEMON_DEVICE:08x}-0000-4000-8000-{LEMON_DEVICE:012x}' in lemons}; "
          f"lemon node found: {f'node{LEMON_NODE}' in nodes}", flush=True)


if __name__ == "__main__":
    main()
