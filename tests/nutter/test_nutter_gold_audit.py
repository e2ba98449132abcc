# Databricks notebook source
# MAGIC %md
# MAGIC # Nutter fixture: gold replicas, audit and health agree
# MAGIC
# MAGIC * `gold.replication_watermark` has one commit point per source, and every gold replica it lists
# MAGIC   holds exactly the rows whose last audited change (up to that point) is not a DELETE.
# MAGIC * `gold.audit_log` has every applied change once, with who, role, when and what, none after
# MAGIC   the commit point.
# MAGIC * `gold.replication_health` reports each source at that commit point.
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

OPERATIONS = ("INSERT", "UPDATE", "DELETE")
TABLE_OPERATIONS = ("TRUNCATE", "ALTER")  # of the whole table: no key, no changed columns


class GoldAuditFixture(NutterFixture):
    def __init__(self, lake, binlog_sources=("shop",), shadow_sources=("shop_pg",)):
        super().__init__()
        self.lake = lake
        self.sources = set(binlog_sources) | set(shadow_sources)

    @tag("gold")
    def run_replicas_at_the_watermark(self):
        self.watermarks = {r["source"]: r for r in self.lake.table("gold.replication_watermark").collect()}
        live = (self.lake.table("gold.audit_row_last_change").where("row_exists")
                .groupBy("gold_table").count().collect())
        self.live_rows = {r["gold_table"]: r["count"] for r in live}
        self.replica_rows = {t: self.lake.table(t).count() for w in self.watermarks.values() for t in w["gold_tables"]}

    def assertion_replicas_at_the_watermark(self):
        missing = self.sources - set(self.watermarks)
        assert not missing, f"sources without a commit point in gold.replication_watermark: {sorted(missing)}"
        unset = sorted(s for s, w in self.watermarks.items() if w["sequence"] is None)
        assert not unset, f"sources with nothing applied: {unset}"
        wrong = {t: (n, self.live_rows.get(t, 0)) for t, n in self.replica_rows.items() if n != self.live_rows.get(t, 0)}
        assert not wrong, f"gold replicas whose rows differ from the audited rows (replica, audit): {wrong}"

    @tag("gold")
    def run_audit_log(self):
        log = self.lake.table("gold.audit_log")
        points = self.lake.table("gold.replication_watermark").select("source", F.col("sequence").alias("point"))
        self.incomplete = log.where(
            # role may be NULL: a user acting without a role (unknown is for "capture could not tell")
            F.col("user").isNull() | F.col("commit_ts").isNull() | F.col("txn_id").isNull()
            | ~F.col("operation").isin(*OPERATIONS, *TABLE_OPERATIONS)
            | (F.col("operation").isin(*OPERATIONS) & (F.size("changed_columns") == 0))).count()
        self.repeated = log.groupBy("source", "txn_id", "schema", "table", "key").count().where("count > 1").count()
        self.after_point = log.join(points, "source").where(F.col("sequence") > F.col("point")).count()
        self.sources_audited = {r["source"] for r in log.select("source").distinct().collect()}

    def assertion_audit_log(self):
        assert self.incomplete == 0, f"{self.incomplete} audit rows without user, time, transaction or change"
        assert self.repeated == 0, f"{self.repeated} changes audited more than once"
        assert self.after_point == 0, f"{self.after_point} audited changes after the replicas' commit point"
        missing = self.sources - self.sources_audited
        assert not missing, f"sources without audited changes: {sorted(missing)}"

    @tag("gold")
    def run_health(self):
        self.health = {r["source"]: r for r in self.lake.table("gold.replication_health").collect()}
        self.points = {r["source"]: r for r in self.lake.table("gold.replication_watermark").collect()}

    def assertion_health(self):
        assert set(self.health) == set(self.points), f"health {sorted(self.health)} vs watermark {sorted(self.points)}"
        stale = sorted(s for s, h in self.health.items() if h["last_commit_ts"] != self.points[s]["commit_ts"])
        assert not stale, f"health not at the replicas' commit point: {stale}"
        negative = sorted(s for s, h in self.health.items() if h["lag_seconds"] is None or h["lag_seconds"] < 0)
        assert not negative, f"sources without a lag: {negative}"


# COMMAND ----------

if "dbutils" in globals():  # run by `nutter run` (or by hand) in the workspace; pytest only imports
    from nutter_lake import workspace_lake

    lake, sources = workspace_lake(spark, dbutils)  # noqa: F821 - notebook globals
    result = GoldAuditFixture(lake, **sources).execute_tests()
    print(result.to_string())
    result.exit(dbutils)  # noqa: F821
