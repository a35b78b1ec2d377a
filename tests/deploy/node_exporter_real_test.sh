#!/usr/bin/env bash
# The sweep's metrics through a real node_exporter: Debian's prometheus-node-exporter, started here by
# its own pid on 127.0.0.1 (a free port) with only the textfile collector over a sweep's .prom, and
# stopped on exit whatever happens. Asserts node_textfile_scrape_error 0 and the sdcprobe_* series
# with dcgm-exporter's labels (gpu, UUID, pci_bus_id, Hostname, modelName), a fault included.
# Exits 77 (skipped) without node_exporter. Usage: node_exporter_real_test.sh SDCPROBE
set -uo pipefail
sdcprobe="$(readlink -f "$1")"
exporter="$(command -v prometheus-node-exporter || command -v node_exporter)" ||
  { echo "SKIP: prometheus-node-exporter not installed (scripts/install-deps.sh --test)"; exit 77; }
work="$(mktemp -d)"
pid=""
cleanup() {
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
failures=0
source "$(dirname "$(readlink -f "$0")")/test_lib.sh"

mkdir "$work/textfile"
"$sdcprobe" --backend cpu --cpu-devices 2 sweep --once --level quick --size 64K --state-dir "$work/state" \
  --prom-dir "$work/textfile" --inject device=1,probe=alu.fma32,model=bitflip,bit=7,mode=permanent \
  > "$work/sweep.log" 2>&1
check "the sweep found the injected fault (exit 1)" 1 $?
uuid1="$("$sdcprobe" --backend cpu --cpu-devices 2 devices --json | grep -o '"uuid": "[^"]*"' | sed -n 2p | cut -d'"' -f4)"

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$exporter" --web.listen-address="127.0.0.1:$port" --collector.disable-defaults --collector.textfile \
  --collector.textfile.directory="$work/textfile" > "$work/exporter.log" 2>&1 &
pid=$!
scrape() {
  python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
    "http://127.0.0.1:$port/metrics" > "$work/metrics" 2>/dev/null
}
for _ in $(seq 300); do
  scrape && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.2
done
[ -s "$work/metrics" ] || { echo "FAIL: no scrape"; cat "$work/exporter.log"; exit 1; }

series() { grep -E "^$1(\{| )" "$work/metrics"; }
check "node_textfile_scrape_error 0" "node_textfile_scrape_error 0" "$(series node_textfile_scrape_error)"
check "the textfile was read" 1 "$(series node_textfile_mtime_seconds | grep -c 'sdcprobe.prom')"
labels='\{Hostname="[^"]+",UUID="'"$uuid1"'",gpu="1",modelName="[^"]+",pci_bus_id="[^"]*"'
check "sdcprobe_device_healthy with dcgm-exporter labels: 0 for the faulty device" 1 \
  "$(series sdcprobe_device_healthy | grep -cE "^sdcprobe_device_healthy$labels\} 0$")"
check "sdcprobe_device_quarantined 1 for the faulty device" 1 \
  "$(series sdcprobe_device_quarantined | grep -cE "^sdcprobe_device_quarantined$labels\} 1$")"
check "sdcprobe_probe_failures_total counts the fault" 1 \
  "$(series sdcprobe_probe_failures_total | grep -E "UUID=\"$uuid1\"" | grep -E 'probe="alu.fma32"' | grep -cvE ' 0$')"
check "sdcprobe_probe_runs_total for both devices" 2 \
  "$(series sdcprobe_probe_runs_total | grep 'probe="alu.fma32"' | grep -c UUID=)"
check "sdcprobe_build_info" 1 "$(series sdcprobe_build_info | grep -c 'version=')"
echo "node_exporter served $(grep -c '^sdcprobe_' "$work/metrics") sdcprobe_* samples"

if [ "$failures" -ne 0 ]; then
  sed 's/^/  sweep: /' "$work/sweep.log" | tail -5
  echo "$failures check(s) failed"
  exit 1
fi
echo "all node_exporter checks passed"
