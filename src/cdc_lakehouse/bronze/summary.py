"""What landed in bronze, per source and table: rows kept, quarantined and not onboarded."""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.bronze import landing
from cdc_lakehouse.bronze.kinds import landing_kinds, onboarded_tables

TABLE = ("source", "bronze_table", "kind", "quarantine_table")
LINE = "_source_file string, quarantined boolean, held boolean"


def landing_summary(read, settings) -> DataFrame:
    """One row per bronze table: ``source``, ``bronze_table``, ``rows``, ``files``, ``kind``,
    ``quarantine_table``, ``quarantined_rows``, ``not_onboarded_rows``. ``read(name)`` reads a
    bronze table (``dlt.read`` in a pipeline)."""
    tables = [_names(settings.bronze, source, kind) for source, kind in landing_kinds(settings.onboarding)]
    lines = [
        part
        for (source, kind), names in zip(landing_kinds(settings.onboarding), tables)
        for part in _lines(read, names, kind, onboarded_tables(settings.onboarding, source))
    ]
    spark = lines[0].sparkSession
    # One line-less row per table, so that a table nothing landed in still shows, with zeros.
    every_table = spark.createDataFrame([(*names, None, None, None) for names in tables], f"{_table_ddl()}, {LINE}")
    return reduce(DataFrame.unionByName, lines, every_table).groupBy(*TABLE).agg(
        F.count_if(~F.col("quarantined")).alias("rows"),
        F.count_distinct("_source_file").alias("files"),
        F.count_if("quarantined").alias("quarantined_rows"),
        F.count_if("held").alias("not_onboarded_rows"),
    ).select("source", "bronze_table", "rows", "files", "kind", "quarantine_table", "quarantined_rows",
             "not_onboarded_rows")


def _names(schema: str, source: str, kind) -> tuple[str, ...]:
    return source, landing.table_name(schema, source, kind), kind.name, landing.quarantine_name(schema, source, kind)


def _table_ddl() -> str:
    return ", ".join(f"{column} string" for column in TABLE)


def _lines(read, names: tuple[str, ...], kind, onboarded: list[str]) -> list[DataFrame]:
    labels = [F.lit(value).alias(column) for column, value in zip(TABLE, names)]
    kept = read(names[1]).select(
        *labels, "_source_file", F.lit(False).alias("quarantined"),
        (~landing.is_onboarded(kind, onboarded)).alias("held"),
    )
    rejected = read(names[3]).select(*labels, "_source_file", F.lit(True).alias("quarantined"), F.lit(False).alias("held"))
    return [kept, rejected]
