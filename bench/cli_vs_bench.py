#!/usr/bin/env python3
"""The CPU memory probes through the CLI and through cpu_probe_bench's BM_CliPath, side by side.

For each mem.* probe and size, runs `sdcprobe run PROBE --backend cpu --size SIZE` (a fresh process)
and then the benchmark of the same probe and size, --repeat times in turn, and prints the best rate of
each, the best memcpy ceiling the benchmark measured next to them, and the ratios (best of several:
on a shared machine the other load only ever slows a run down). The CLI's rate is the one its RATE
column shows: bytes / (duration_s - setup_s). Exits 1 when the two differ by more than --tolerance.

  bench/cli_vs_bench.py build/release [--sizes 1073741824,4294967296] [--probes mem.march_c,...] [--repeat 3]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

PROBES = ["own_address", "walking_bits", "moving_inversions", "march_c", "modulo20", "random_blocks"]


def cli_rate(sdcprobe, probe, size):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "report.json")
        subprocess.run([sdcprobe, "run", "mem." + probe, "--backend", "cpu", "--size", str(size), "--seed", "1",
                        "--json", path], check=True, stdout=subprocess.DEVNULL)
        with open(path) as f:
            r = json.load(f)["results"][0]
    if r["outcome"] != "pass":
        sys.exit(f"{probe}: the CLI's run did not pass: {r['outcome']} {r.get('reason', '')}")
    return r["bytes"] / (r["duration_s"] - r["setup_s"]) / 1e9, r["setup_s"]


def bench_rate(bench, probe, size):
    out = subprocess.run([bench, f"--benchmark_filter=^BM_CliPath/{probe}/{size}/", "--benchmark_format=json"],
                         check=True, capture_output=True, text=True).stdout
    runs = json.loads(out)["benchmarks"]
    if len(runs) != 1 or "error_message" in runs[0]:
        sys.exit(f"{probe}: the benchmark did not run cleanly: {runs}")
    return runs[0]["GB/s"], runs[0]["memcpy_GB/s"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build_dir")
    parser.add_argument("--sizes", default=f"{1 << 30},{4 << 30}")
    parser.add_argument("--probes", default=",".join(PROBES))
    parser.add_argument("--tolerance", type=float, default=0.10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sdcprobe = os.path.join(args.build_dir, "cli", "sdcprobe")
    bench = os.path.join(args.build_dir, "bench", "cpu_probe_bench")
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"{'probe':<20} {'size':>11} {'cli GB/s':>9} {'bench':>9} {'cli/bench':>9} {'memcpy':>9} "
          f"{'cli/memcpy':>10} {'bench/memcpy':>12} {'setup_s':>8}")
    worst = 0.0
    for size in (int(s) for s in args.sizes.split(",")):
        for probe in (p.removeprefix("mem.") for p in args.probes.split(",")):
            cli = bench_gbs = memcpy = setup = 0.0
            for _ in range(args.repeat):
                rate, setup_s = cli_rate(sdcprobe, probe, size)
                if rate > cli:
                    cli, setup = rate, setup_s
                rate, ceiling = bench_rate(bench, probe, size)
                bench_gbs, memcpy = max(bench_gbs, rate), max(memcpy, ceiling)
            worst = max(worst, abs(cli / bench_gbs - 1))
            print(f"{probe:<20} {size:>11} {cli:>9.2f} {bench_gbs:>9.2f} {cli / bench_gbs:>9.3f} {memcpy:>9.2f} "
                  f"{cli / memcpy:>10.3f} {bench_gbs / memcpy:>12.3f} {setup:>8.2f}", flush=True)
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"largest CLI/bench difference: {worst:.1%} (tolerance {args.tolerance:.0%})")
    return 1 if worst > args.tolerance else 0


if __name__ == "__main__":
    sys.exit(main())
