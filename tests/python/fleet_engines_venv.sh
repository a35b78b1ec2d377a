#!/bin/sh
# Makes (once) a virtual environment with the fleet store's engines from PyPI: DuckDB (embedded, the
# default of `sdcprobe fleet sdc --store`) and PySpark (the Spark job, run in local mode; Java 17
# comes from Debian). Both are for the analysing side only: nodes never need them. Pinned by
# tests/python/fleet-engines-constraints.txt.
#
#   tests/python/fleet_engines_venv.sh DIR    prints DIR/bin/python once DIR holds a working environment
set -eu
dir=${1:?usage: fleet_engines_venv.sh DIR}
python=${SDC_SYSTEM_PYTHON:-/usr/bin/python3}
constraints=$(dirname "$0")/fleet-engines-constraints.txt
if [ -x "$dir/bin/python" ] && [ -f "$dir/.complete" ]; then
  echo "$dir/bin/python"
  exit 0
fi
rm -rf "$dir"
"$python" -m venv "$dir" >&2
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check -c "$constraints" duckdb pyspark >&2
"$dir/bin/python" -c "import duckdb, pyspark" >&2
touch "$dir/.complete"
echo "$dir/bin/python"
