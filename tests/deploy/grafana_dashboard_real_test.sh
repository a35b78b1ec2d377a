#!/usr/bin/env bash
# Every PromQL expression of deploy/grafana/sdcprobe-dashboard.json against a real Prometheus
# (Debian's prometheus) scraping a real node_exporter's textfile collector over two textfiles: a
# sweep's (with an injected fault, so failures and quarantine have series) and `fleet goodput
# --prom`'s (a small cluster from its own accounting). Both servers are started here by their own
# pids on 127.0.0.1 (free ports) and stopped on exit. Each expression must parse and return series.
# Exits 77 (skipped) without them. Usage: grafana_dashboard_real_test.sh SDCPROBE DASHBOARD
set -uo pipefail
sdcprobe="$(readlink -f "$1")"
dashboard="$(readlink -f "$2")"
exporter="$(command -v prometheus-node-exporter || command -v node_exporter)" ||
  { echo "SKIP: prometheus-node-exporter not installed (scripts/install-deps.sh)"; exit 77; }
command -v prometheus >/dev/null || { echo "SKIP: prometheus not installed (scripts/install-deps.sh)"; exit 77; }
work="$(mktemp -d)"
pids=()
source "$(dirname "$(readlink -f "$0")")/test_lib.sh"
cleanup() {
  stop_pids
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
failures=0

mkdir "$work/textfile"
"$sdcprobe" --backend cpu --cpu-devices 2 sweep --once --level quick --size 64K --state-dir "$work/state" \
  --prom-dir "$work/textfile" --inject device=1,probe=alu.fma32,model=bitflip,bit=7,mode=permanent \
  > "$work/sweep.log" 2>&1
check "the sweep found the injected fault (exit 1)" 1 $?
cat > "$work/sacct.json" <<'EOF2'
{"jobs": [
 {"job_id": 7, "user": "ann", "account": "lab", "partition": "train", "state": {"current": "NODE_FAIL"},
  "time": {"eligible": 1798761600, "start": 1798761700, "end": 1798765300},
  "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 8}]}},
 {"job_id": 8, "user": "ben", "account": "lab", "partition": "debug", "state": {"current": "COMPLETED"},
  "time": {"eligible": 1798761600, "start": 1798762000, "end": 1798769000},
  "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 2}]}}
]}
EOF2
"$sdcprobe" fleet goodput --sacct "$work/sacct.json" --prom "$work/textfile/sdcprobe-fleet.prom" > "$work/fleet.log" 2>&1
check "fleet goodput --prom exit" 0 $?

exporter_port="$(free_port)"
"$exporter" --web.listen-address="127.0.0.1:$exporter_port" --collector.disable-defaults --collector.textfile \
  --collector.textfile.directory="$work/textfile" > "$work/exporter.log" 2>&1 &
pids+=($!)
prom_port="$(free_port)"
cat > "$work/prometheus.yml" <<EOF2
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: node
    static_configs:
      - targets: ["127.0.0.1:$exporter_port"]
EOF2
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" > "$work/prometheus.log" 2>&1 &
pids+=($!)

# Each expression of the dashboard, until it returns series (the first scrapes take a few seconds).
/usr/bin/python3 - "$dashboard" "http://127.0.0.1:$prom_port" <<'PY'
import json, sys, time, urllib.parse, urllib.request
dashboard, base = sys.argv[1], sys.argv[2]
exprs = []
def walk(panels):
    for p in panels:
        exprs.extend(t["expr"] for t in p.get("targets", []) if "expr" in t)
        walk(p.get("panels", []))
walk(json.load(open(dashboard))["panels"])
failed = 0
for expr in exprs:
    deadline, answer, error = time.time() + 60, None, ""
    while time.time() < deadline:
        try:
            url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
            answer = json.load(urllib.request.urlopen(url, timeout=10))
            if answer["status"] == "success" and answer["data"]["result"]:
                break
        except urllib.error.HTTPError as e:
            # 400: the expression does not parse. Anything else (a 503 while Prometheus starts) is
            # retried until the deadline.
            body = e.read()
            error = "HTTP %d: %s" % (e.code, body[:200].decode(errors="replace"))
            if e.code == 400:
                break
        except OSError as e:
            error = str(e)
        time.sleep(0.5)
    ok = answer is not None and answer.get("status") == "success" and bool(answer["data"]["result"])
    print("%s: %s -> %s" % ("ok" if ok else "FAIL", expr,
                            "%d series" % len(answer["data"]["result"]) if ok else (answer or error)))
    failed += not ok
print("%d of %d dashboard expressions returned series" % (len(exprs) - failed, len(exprs)))
sys.exit(1 if failed or not exprs else 0)
PY
check "every dashboard expression parses and returns series" 0 $?
if [ "$failures" -ne 0 ]; then
  tail -n 5 "$work/prometheus.log" "$work/exporter.log" "$work/fleet.log"
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS"
