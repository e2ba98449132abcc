"""Which flows survive Databricks' streaming rules: every flow of the project pipeline run on
*real* streaming DataFrames, as a Databricks update gives them.

The local runtime hands a streaming flow its new input as a batch DataFrame, so actions
(``first``, ``persist``, ``localCheckpoint``), non-time windows and aggregations in append mode
all work locally. On Databricks ``spark.readStream.table`` and Auto Loader give streaming DataFrames,
where they fail. Here each flow reads ``spark.readStream`` over the demo lake's tables and the
fixture landing files, and its query is started (Spark's unsupported-operation checks run at
start) and stopped at once.

The silver change stream takes its streaming form there (silver/arrivals.py, a stream-static
join); tests/test_silver_streaming_form.py checks that it emits what the batch form does. The
replicas' AUTO CDC flows pass because the demo declares every table's column types
(source_schema_path); without them they fail with an error that says so.
"""

from __future__ import annotations

from pathlib import Path

from cdc_lakehouse.runtime import declarations, file_source
from cdc_lakehouse.runtime.loader import load_pipeline
from cdc_lakehouse.runtime.runner import pipeline_configuration
from cdc_lakehouse.storage import LakeStore
from lake_helpers import REPO
from silver_support import onboarding_for

SOURCES = [str(REPO / "src" / layer / "**" / "*.py") for layer in ("bronze", "silver", "gold")]
# A table of each source of the demo: its other tables' flows are of the same kinds (starting
# every flow of the whole demo made this one test a minute and a half).
ONE_TABLE_EACH = ({"shop", "shop_pg"}, {"customers"})


class StreamingReads:
    """``spark.readStream.table`` and Auto Loader as on Databricks: streaming DataFrames."""

    def __init__(self, spark, store: LakeStore, graph):
        self.spark, self.store, self.graph = spark, store, graph

    def read(self, name: str):
        dataset = self.graph.datasets[name]
        return dataset.func() if dataset.kind == "view" else self.store.read(name)

    def read_stream(self, name: str):
        dataset = self.graph.datasets[name]
        if dataset.kind == "view":
            return dataset.func()
        return self.spark.readStream.format("delta").load(str(self.store.path(name)))

    def read_files(self, path: str, fmt: str, options: dict, schema):
        files = file_source.list_files(path, options)
        if not files:
            raise FileNotFoundError(path)  # a landing folder the fixtures do not have
        batch = file_source.read_files(self.spark, files[:1], fmt, options, schema)
        return self.spark.readStream.schema(batch.schema).format(fmt).load(path)


def started(flow, reads: StreamingReads, checkpoints: Path) -> str:
    """"batch" (not a streaming flow), "ok", or why Spark refused the streaming query."""
    try:
        df = reads.read_stream(flow.cdc["source"]) if flow.kind == "auto_cdc" else flow.func()
        if not df.isStreaming:
            return "batch"
        query = (df.writeStream.format("noop").option("checkpointLocation", str(checkpoints / flow.name))
                 .trigger(availableNow=True).start())
        query.stop()
        return "ok"
    except FileNotFoundError:
        return "no input folder"
    except Exception as exc:  # noqa: BLE001 - the reason is what the test reports
        return str(exc).splitlines()[0][:200]


def test_every_flow_keeps_databricks_streaming_rules(spark, demo_lake, tmp_path):
    store = LakeStore(spark, demo_lake)
    configuration = {"cdc_lakehouse.landing_path": str(REPO / "fixtures" / "landing"),
                     "cdc_lakehouse.onboarding_file": str(onboarding_for(tmp_path, *ONE_TABLE_EACH))}
    with pipeline_configuration(spark, configuration):
        graph = load_pipeline(spark, SOURCES)
        reads = StreamingReads(spark, store, graph)
        token = declarations.running_flow.set(reads)
        try:
            outcome = {f.name: started(f, reads, tmp_path) for f in graph.flows.values() if f.kind != "auto_cdc_snapshot"}
        finally:
            declarations.running_flow.reset(token)
    refused = {name: why for name, why in outcome.items() if why not in ("ok", "batch", "no input folder")}
    assert not refused, refused
    silver = {name: why for name, why in outcome.items() if name.endswith(("_binlog_changes", "_shadow_changes"))}
    assert silver and set(silver.values()) == {"ok"}, silver
    replicas = {f.name: outcome[f.name] for f in graph.flows.values() if f.kind == "auto_cdc"}
    assert replicas and set(replicas.values()) == {"ok"}, replicas
