# Databricks notebook source
# MAGIC %md
# MAGIC # Nutter fixture: bronze landing tables
# MAGIC
# MAGIC Raw, append-only, every row traceable to its landing file and ingestion time (CONTRACT §2).
# MAGIC
# MAGIC * Workspace: `nutter run <bundle files>/tests/nutter/ --cluster_id <id> --recursive --notebook_params '{"catalog": "main"}'`
# MAGIC   (widgets: `catalog`, `binlog_sources`, `shadow_sources`; see docs/databricks.md).
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

from nutter_lake import BINLOG_TYPES


class BronzeFixture(NutterFixture):
    """Bronze landing tables of each source: binlog events, sessions, shadow transactions."""

    def __init__(self, lake, binlog_sources=("shop",), shadow_sources=("shop_pg",)):
        super().__init__()
        self.lake = lake
        self.binlog_sources = list(binlog_sources)
        self.shadow_sources = list(shadow_sources)

    def _profile(self, table, *checks):
        """Row count and, per named check, the rows that violate it (one aggregation)."""
        df = self.lake.table(table)
        aggs = [F.count(F.lit(1)).alias("rows")]
        aggs += [F.sum(F.when(~F.coalesce(condition, F.lit(False)), 1).otherwise(0)).alias(name)
                 for name, condition in checks]
        return df.agg(*aggs).first().asDict()

    @tag("bronze")
    def run_binlog_events(self):
        self.binlog = {
            source: self._profile(
                f"bronze.{source}_binlog_events",
                ("unknown_type", F.col("type").isin(*BINLOG_TYPES)),
                ("wrong_source", F.col("_source") == source),
                ("untraceable", F.col("_source_file").isNotNull() & F.col("_ingested_at").isNotNull()),
                ("no_position", F.col("file").isNotNull() & F.col("pos").isNotNull()),
            )
            for source in self.binlog_sources
        }

    def assertion_binlog_events(self):
        for source, profile in self.binlog.items():
            assert profile["rows"] > 0, f"bronze.{source}_binlog_events is empty"
            bad = {k: v for k, v in profile.items() if k != "rows" and v}
            assert not bad, f"bronze.{source}_binlog_events: rows violating {bad}"

    @tag("bronze")
    def run_sessions(self):
        self.sessions = {
            source: self._profile(
                f"bronze.{source}_sessions",
                ("no_thread", F.col("thread_id").isNotNull()),
                ("no_user", F.col("user").isNotNull()),
                ("wrong_source", F.col("_source") == source),
                ("untraceable", F.col("_source_file").isNotNull() & F.col("_ingested_at").isNotNull()),
            )
            for source in self.binlog_sources
        }

    def assertion_sessions(self):
        for source, profile in self.sessions.items():
            assert profile["rows"] > 0, f"bronze.{source}_sessions is empty"
            bad = {k: v for k, v in profile.items() if k != "rows" and v}
            assert not bad, f"bronze.{source}_sessions: rows violating {bad}"

    @tag("bronze")
    def run_shadow_transactions(self):
        self.transactions = {
            source: self._profile(
                f"bronze.{source}_shadow_transactions",
                ("no_txn_id", F.col("txn_id").isNotNull()),
                ("bad_end_ts", F.to_timestamp("end_ts").isNotNull()),
                ("no_user", F.col("db_user").isNotNull()),
                ("wrong_source", F.col("_source") == source),
                ("untraceable", F.col("_source_file").isNotNull() & F.col("_ingested_at").isNotNull()),
            )
            for source in self.shadow_sources
        }

    def assertion_shadow_transactions(self):
        for source, profile in self.transactions.items():
            assert profile["rows"] > 0, f"bronze.{source}_shadow_transactions is empty"
            bad = {k: v for k, v in profile.items() if k != "rows" and v}
            assert not bad, f"bronze.{source}_shadow_transactions: rows violating {bad}"


# COMMAND ----------

if "dbutils" in globals():  # run by `nutter run` (or by hand) in the workspace; pytest only imports
    from nutter_lake import workspace_lake

    lake, sources = workspace_lake(spark, dbutils)  # noqa: F821 - notebook globals
    result = BronzeFixture(lake, **sources).execute_tests()
    print(result.to_string())
    result.exit(dbutils)  # noqa: F821
