# Databricks notebook source
# MAGIC %md
# MAGIC # Nutter fixture: gold summaries agree with bronze and silver
# MAGIC
# MAGIC `gold.landing_summary` counts, per source and bronze table, exactly the rows bronze holds
# MAGIC (and, where it reports them, the rows its quarantine table holds). `gold.data_quality` and
# MAGIC `gold.replication_health` show exactly the anomalies `silver.<source>_anomalies` records:
# MAGIC per table the distinct changes (a change with two anomalies counts once) and their kinds.
# MAGIC
# MAGIC * Workspace: `nutter run <bundle files>/tests/nutter/ --cluster_id <id> --recursive --notebook_params '{"catalog": "main"}'`.
# MAGIC * Locally: `pytest tests/nutter` runs this class against a lake built from `fixtures/`.

# COMMAND ----------

# MAGIC %pip install nutter==0.1.35

# COMMAND ----------

import os
import sys

if "dbutils" in globals() and os.getcwd() not in sys.path:  # workspace: import modules next to this notebook
    sys.path.insert(0, os.getcwd())

from pyspark.sql import functions as F
from runtime.nutterfixture import NutterFixture, tag


class GoldFixture(NutterFixture):
    """Gold summaries against the layer they summarize (the gold audit has its own fixture)."""

    def __init__(self, lake, binlog_sources=("shop",), shadow_sources=("shop_pg",)):
        super().__init__()
        self.lake = lake
        self.sources = set(binlog_sources) | set(shadow_sources)

    @tag("gold")
    def run_landing_summary(self):
        summary = self.lake.table("gold.landing_summary")
        self.columns = set(summary.columns)
        # One row per source and bronze table; rows without a bronze table are landing folders
        # no flow reads (their note says why): nothing in bronze to count them against.
        self.summary = [r.asDict() for r in summary.collect() if r["bronze_table"]]

    def _count(self, table, source):
        df = self.lake.table(table)
        return (df.where(F.col("_source") == source) if "_source" in df.columns else df).count()

    def assertion_landing_summary(self):
        assert self.summary, "gold.landing_summary is empty"
        wrong = {}
        for row in self.summary:
            counted = self._count(row["bronze_table"], row["source"])
            if row["rows"] != counted:
                wrong[(row["source"], row["bronze_table"])] = (row["rows"], counted)
            if {"quarantine_table", "quarantined_rows"} <= self.columns and row["quarantine_table"]:
                quarantined = self._count(row["quarantine_table"], row["source"])
                if row["quarantined_rows"] != quarantined:
                    wrong[(row["source"], row["quarantine_table"])] = (row["quarantined_rows"], quarantined)
        assert not wrong, f"gold.landing_summary (summary, bronze) disagree: {wrong}"
        landed = {row["source"] for row in self.summary if row["rows"]}
        missing = self.sources - landed
        assert not missing, f"sources without landed rows in gold.landing_summary: {sorted(missing)}"

    @tag("gold")
    def run_anomalies(self):
        quality = self.lake.table("gold.data_quality").collect()
        # Tables without anomalies show (0, []): compare only the others with what silver recorded.
        self.shown = {(r["source"], r["table"]): (r["anomalous_changes"], list(r["anomalies"]))
                      for r in quality if r["anomalous_changes"] or r["anomalies"]}
        self.per_source = {r["source"]: r["anomalous_changes"]
                           for r in self.lake.table("gold.replication_health").collect()}
        self.recorded = {}
        for source in sorted(self.sources):  # binlog and shadow sources: those with an anomalies table
            for row in self._recorded_anomalies(source).collect():
                self.recorded[(source, row["table"])] = (row["changes"], list(row["kinds"]))

    def _recorded_anomalies(self, source):
        """Per table: changes with anomalies (row key, transaction, sequence) and their kinds."""
        anomalies = self.lake.table(f"silver.{source}_anomalies")
        return anomalies.groupBy(F.concat_ws(".", "schema", "table").alias("table")).agg(
            F.count_distinct(F.struct("key", "txn_id", "sequence")).alias("changes"),
            F.array_sort(F.collect_set("anomaly")).alias("kinds"),
        )

    def assertion_anomalies(self):
        assert self.shown == self.recorded, (
            f"gold.data_quality (source, table) -> (changes, kinds) {self.shown} "
            f"disagrees with silver anomalies {self.recorded}")
        totals = {s: sum(c for (src, _), (c, _) in self.recorded.items() if src == s) for s in self.per_source}
        assert self.per_source == totals, (
            f"gold.replication_health anomalous_changes {self.per_source} disagree with silver {totals}")


# COMMAND ----------

if "dbutils" in globals():  # run by `nutter run` (or by hand) in the workspace; pytest only imports
    from nutter_lake import workspace_lake

    lake, sources = workspace_lake(spark, dbutils)  # noqa: F821 - notebook globals
    result = GoldFixture(lake, **sources).execute_tests()
    print(result.to_string())
    result.exit(dbutils)  # noqa: F821
