# Databricks notebook source
# MAGIC %md
# MAGIC # Nutter fixture: gold summaries agree with bronze
# MAGIC
# MAGIC `gold.landing_summary` counts, per source and bronze table, exactly the rows bronze holds
# MAGIC (and, where it reports them, the rows its quarantine table holds).
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
    """Gold tables that exist today; silver replicas and the gold audit add fixtures later."""

    def __init__(self, lake, binlog_sources=("shop",), shadow_sources=("shop_pg",)):
        super().__init__()
        self.lake = lake
        self.sources = set(binlog_sources) | set(shadow_sources)

    @tag("gold")
    def run_landing_summary(self):
        summary = self.lake.table("gold.landing_summary")
        self.columns = set(summary.columns)
        self.summary = [r.asDict() for r in summary.collect()]  # one row per source and bronze table

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


# COMMAND ----------

if "dbutils" in globals():  # run by `nutter run` (or by hand) in the workspace; pytest only imports
    from nutter_lake import workspace_lake

    lake, sources = workspace_lake(spark, dbutils)  # noqa: F821 - notebook globals
    result = GoldFixture(lake, **sources).execute_tests()
    print(result.to_string())
    result.exit(dbutils)  # noqa: F821
