"""The local runtime: runs ``dlt`` pipeline source files on open-source Spark and delta-spark.

``loader`` imports the files with a ``dlt``-compatible module injected, ``graph`` holds what
they declare, ``runner`` executes the flows in dependency order with incremental, exactly-once
progress (``checkpoint``), ``expectations`` and an ``event_log`` like Lakeflow's.
"""
