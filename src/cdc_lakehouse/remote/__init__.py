"""Operate the deployed pipeline on Databricks through ``databricks-sdk``.

``cdc-lakehouse remote ...`` (see ``remote.cli``):

* ``start``  – start a pipeline update, optionally a full refresh of chosen tables
  (``POST /api/2.0/pipelines/{id}/updates``);
* ``follow`` – follow an update from the pipeline events until it ends
  (``GET /api/2.0/pipelines/{id}/updates/{update_id}``, ``GET /api/2.0/pipelines/{id}/events``);
* ``health`` – print the gold health summary through a SQL warehouse
  (Statement Execution API, ``POST /api/2.0/sql/statements``).

Nothing here imports Spark: these commands run on a laptop or in CI with only the SDK.
"""
