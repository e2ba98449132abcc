"""The Lakeview dashboard run locally, a tool: ``lakeview`` runs its queries on a lake with Spark
SQL and draws them as one HTML page; ``cli`` is ``cdc-lakehouse dashboard``. It reads gold's
tables and is no part of the pipeline: Databricks loads gold without it."""
