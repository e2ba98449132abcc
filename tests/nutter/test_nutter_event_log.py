# Databricks notebook source
# MAGIC %md
# MAGIC # Nutter fixture: the pipeline's latest update, from its event log
# MAGIC
# MAGIC No flow failed, and every bronze table of `gold.landing_summary` was processed.
# MAGIC
# MAGIC * Workspace: needs the event log: `--notebook_params '{"catalog": "main", "event_log": "main.pipeline.event_log"}'`
# MAGIC   when the pipeline publishes it to a table, or `"pipeline_id": "<id>"` (pipeline owner: `event_log(<id>)`).
# MAGIC * Locally: `pytest tests/nutter` reads our runtime's `pipeline.event_log`.

# COMMAND ----------

# MAGIC %pip install nutter==0.1.35

# COMMAND ----------

import os
import sys

if "dbutils" in globals() and os.getcwd() not in sys.path:  # workspace: import modules next to this notebook
    sys.path.insert(0, os.getcwd())

from runtime.nutterfixture import NutterFixture, tag

from nutter_lake import FINISHED, latest_flow_status


class EventLogFixture(NutterFixture):
    def __init__(self, lake, **_sources):
        super().__init__()
        self.lake = lake

    @tag("pipeline")
    def run_latest_update(self):
        self.status = latest_flow_status(self.lake)
        self.landing_tables = {r["bronze_table"] for r in
                               self.lake.table("gold.landing_summary").select("bronze_table").distinct().collect()
                               if r["bronze_table"]}

    def assertion_latest_update(self):
        assert self.status, "the event log has no flow progress"
        failed = {flow: s for flow, s in self.status.items() if s == "FAILED"}
        assert not failed, f"flows failed in the latest update: {failed}"
        unfinished = {flow: s for flow, s in self.status.items() if s not in FINISHED}
        assert not unfinished, f"flows that did not finish: {unfinished}"
        missing = self.landing_tables - set(self.status)
        assert not missing, f"bronze tables without a flow in the latest update: {sorted(missing)}"


# COMMAND ----------

if "dbutils" in globals():  # run by `nutter run` (or by hand) in the workspace; pytest only imports
    from nutter_lake import workspace_lake

    lake, sources = workspace_lake(spark, dbutils)  # noqa: F821 - notebook globals
    result = EventLogFixture(lake, **sources).execute_tests()
    print(result.to_string())
    result.exit(dbutils)  # noqa: F821
