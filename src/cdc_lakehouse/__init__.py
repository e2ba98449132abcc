"""cdc-lakehouse: replicate relational databases into a lakehouse with Lakeflow Declarative Pipelines.

Shared DataFrame-in/DataFrame-out logic lives in the sub-packages (bronze, silver, gold, cdc);
the local runtime (``runtime``) runs the pipeline source files in ``src/bronze``, ``src/silver``
and ``src/gold`` on open-source Spark with Delta tables kept by delta-spark (``storage``).
"""

__version__ = "0.1.0"
