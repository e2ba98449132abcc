"""Does a replica equal the source state the generator replayed independently?

Compared in Spark (never collected): numbers as DOUBLE (a JSON ``0.0`` may come back as a
BIGINT column), everything else as text; rows missing from the replica and rows the replica
has that the source does not are counted both ways (``exceptAll``, duplicates count).
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, NumericType, StringType, StructField, StructType

from bench.workload import SCHEMA, TABLES


def _normalised(df: DataFrame, columns: list[str], numeric: set[str]) -> DataFrame:
    return df.select(*[
        (F.col(f"`{c}`").cast("double") if c in numeric else F.col(f"`{c}`").cast("string")).alias(c)
        for c in columns
    ])


def compare(spark, replica: DataFrame, expected_path: str | Path, columns: list[str]) -> dict:
    """``missing``: expected rows not in the replica; ``unexpected``: replica rows not expected."""
    numeric = {f.name for f in replica.schema.fields if isinstance(f.dataType, NumericType)}
    missing_columns = [c for c in columns if c not in replica.columns]
    for c in missing_columns:  # a column only ever NULL may never have reached the replica
        replica = replica.withColumn(c, F.lit(None).cast("string"))
    schema = StructType([StructField(c, DoubleType() if c in numeric else StringType()) for c in columns])
    expected = spark.read.schema(schema).json(str(expected_path))
    got = _normalised(replica, columns, numeric)
    want = _normalised(expected, columns, numeric)
    rows = got.count()
    expected_rows = want.count()
    missing = want.exceptAll(got).count()
    unexpected = got.exceptAll(want).count()
    return {"rows": rows, "expected_rows": expected_rows, "missing": missing, "unexpected": unexpected,
            "equal": missing == 0 and unexpected == 0, "columns_never_seen": missing_columns}


def verify_replicas(spark, read_table, out: str | Path, source: str, tables, name=lambda s, t: f"silver.{s}_{t}") -> dict:
    """Compare every table's replica (``read_table(name)``) with ``<out>/expected``."""
    results = {}
    for table in tables:
        path = Path(out) / "expected" / source / f"{SCHEMA}.{table}.jsonl"
        try:
            replica = read_table(name(source, table))
        except LookupError as exc:
            results[table] = {"equal": False, "error": str(exc)}
            continue
        results[table] = compare(spark, replica, path, list(TABLES[table].columns))
    results["all_equal"] = all(r.get("equal") for r in results.values() if isinstance(r, dict))
    return results
