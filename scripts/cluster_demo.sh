#!/usr/bin/env bash
# The demo on a Spark standalone cluster instead of local[2] (docs/storage.md "Beyond one
# machine"): a master and one worker from the pyspark distribution, on loopback only, then
# `cdc-lakehouse demo` on delta-spark with CDC_LAKEHOUSE_SPARK_MASTER pointing at them. Every table write is a
# task of the worker's executor; the driver only plans and commits. Stops both when done.
# With arguments, runs `cdc-lakehouse <arguments>` on the cluster instead of the demo
# (tests/test_cluster_demo.py: one table's update).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
SPARK_HOME=$($BIN/python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
export SPARK_HOME SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON="$PWD/$BIN/python"
PORT=${CLUSTER_PORT:-7177}
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

"$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master --host 127.0.0.1 --port "$PORT" \
    --webui-port 0 >"$WORK/master.log" 2>&1 &
"$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker "spark://127.0.0.1:$PORT" \
    --host 127.0.0.1 --cores 2 --memory 3g --webui-port 0 --work-dir "$WORK/worker" >"$WORK/worker.log" 2>&1 &
for _ in $(seq 60); do grep -q "Successfully registered with master" "$WORK/worker.log" && break; sleep 1; done
grep -q "Successfully registered with master" "$WORK/worker.log" || { cat "$WORK"/*.log; exit 1; }

export CDC_LAKEHOUSE_SPARK_MASTER="spark://127.0.0.1:$PORT"
if [ $# -gt 0 ]; then
    $BIN/cdc-lakehouse "$@"
else
    mkdir -p "$WORK/demo" && cp -r fixtures/landing "$WORK/demo/landing"
    $BIN/cdc-lakehouse demo --landing "$WORK/demo/landing" --lake "$WORK/demo/lake"
fi
# The executors ran the tasks: the worker launched an executor for the application.
ls "$WORK/worker" | grep -q "^app-" && echo "cluster demo: passed (tasks ran on the standalone worker)"
