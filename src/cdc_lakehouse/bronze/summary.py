"""What landed in bronze, per source and table: rows kept, quarantined and not onboarded, and
the landing folders no flow reads."""

from __future__ import annotations

import os
from datetime import datetime
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.bronze import landing
from cdc_lakehouse.bronze.kinds import landing_kinds, onboarded_tables
from cdc_lakehouse.bronze.lines import FILE_COLUMNS, file_columns
from cdc_lakehouse.bronze.unread import unread_folders
from cdc_lakehouse.paths import local_path

TABLE = ("source", "bronze_table", "kind", "quarantine_table")
LINE = ("_source_file string, _file_size long, _file_modified_at timestamp, quarantined boolean, held boolean, "
        "source_table string")
CHANGED = "changed after bronze read it"
COLUMNS = ("source", "bronze_table", "rows", "files", "kind", "quarantine_table", "quarantined_rows",
           "not_onboarded_rows", "not_onboarded_tables", "note")


def landing_summary(read, settings) -> DataFrame:
    """One row per bronze table: ``source``, ``bronze_table``, ``rows``, ``files``, ``kind``,
    ``quarantine_table``, ``quarantined_rows``, ``not_onboarded_rows``, ``not_onboarded_tables``
    (their ``schema.table`` names) and ``note`` (null); then one row per landing folder no flow
    reads, and one per landing file that changed after bronze read it, with the reason in
    ``note``. ``read(name)`` reads a bronze table (``spark.read.table`` in a pipeline)."""
    tables = [_names(settings.bronze, source, kind) for source, kind in landing_kinds(settings.onboarding)]
    lines = [
        part
        for (source, kind), names in zip(landing_kinds(settings.onboarding), tables)
        for part in _lines(read, names, kind, onboarded_tables(settings.onboarding, source))
    ]
    spark = lines[0].sparkSession
    # One line-less row per table, so that a table nothing landed in still shows, with zeros.
    every_table = spark.createDataFrame([(*names, *[None] * len(LINE.split(","))) for names in tables],
                                        f"{_table_ddl()}, {LINE}")
    counted = reduce(DataFrame.unionByName, lines, every_table).groupBy(*TABLE).agg(
        F.count_if(~F.col("quarantined")).alias("rows"),
        F.count_distinct("_source_file").alias("files"),
        F.count_if("quarantined").alias("quarantined_rows"),
        F.count_if("held").alias("not_onboarded_rows"),
        F.array_sort(F.collect_set(F.when(F.col("held"), F.col("source_table")))).alias("not_onboarded_tables"),
        F.lit(None).cast("string").alias("note"),
    )
    summary = counted.select(*COLUMNS)
    changed = _changed(spark, reduce(DataFrame.unionByName, lines), summary.schema)
    return summary.unionByName(_unread(spark, settings, summary.schema)).unionByName(changed)


def _changed(spark, lines: DataFrame, schema) -> DataFrame:
    """One row per landing file that changed after bronze last read it (its size or time now
    differ from the ones bronze recorded): a writer rewrote or appended to a published file,
    whose changes bronze does not read (docs/bronze.md, publishing landing files)."""
    read = lines.groupBy(*TABLE, "_source_file").agg(F.max_by(F.struct(*FILE_COLUMNS), F.col(FILE_COLUMNS[0])).alias("f"))
    rows = []
    for r in read.filter(F.col("f._file_size").isNotNull()).collect():
        now = _stat(r["_source_file"])
        if now is not None and now != (r["f"]["_file_size"], r["f"]["_file_modified_at"]):
            note = (f"{r['_source_file']}: {CHANGED} ({r['f']['_file_size']} bytes then, {now[0]} now); "
                    "its changes are not read: publish a landing file by writing it, then renaming it into place")
            rows.append((r["source"], r["bronze_table"], 0, 1, r["kind"], r["quarantine_table"], 0, 0, [], note))
    return spark.createDataFrame(rows, schema)


def changed_file_warnings(summary: DataFrame) -> list[str]:
    """The notes of ``gold.landing_summary`` on landing files that changed after bronze read them."""
    rows = summary.filter(F.col("note").contains(CHANGED)).orderBy("note").collect()
    return [f"{r['bronze_table']}: {r['note']}" for r in rows]


def _stat(uri: str) -> tuple[int, datetime] | None:
    """The file's size and modification time (as Spark gives it: milliseconds), None if gone or not local."""
    try:
        stat = os.stat(local_path(uri.removeprefix("dbfs:")))
    except (OSError, ValueError):
        return None
    ms = stat.st_mtime_ns // 1_000_000
    return stat.st_size, datetime.fromtimestamp(ms // 1000).replace(microsecond=ms % 1000 * 1000)


def _unread(spark, settings, schema) -> DataFrame:
    """The landing folders no flow reads, as summary rows (of ``schema``) with nothing read from them."""
    rows = [(u.source, None, 0, u.files, None, None, 0, 0, [], f"{u.folder}: {u.reason}")
            for u in unread_folders(settings.landing_path, settings.onboarding)]
    return spark.createDataFrame(rows, schema)


def _names(schema: str, source: str, kind) -> tuple[str, ...]:
    return source, landing.table_name(schema, source, kind), kind.name, landing.quarantine_name(schema, source, kind)


def _table_ddl() -> str:
    return ", ".join(f"{column} string" for column in TABLE)


def _lines(read, names: tuple[str, ...], kind, onboarded: list[str]) -> list[DataFrame]:
    labels = [F.lit(value).alias(column) for column, value in zip(TABLE, names)]
    table = F.lower(F.expr(kind.source_table)) if kind.source_table else F.lit(None)
    kept, rejected = read(names[1]), read(names[3])
    kept = kept.select(
        *labels, "_source_file", *file_columns(kept), F.lit(False).alias("quarantined"),
        (~landing.is_onboarded(kind, onboarded)).alias("held"), table.cast("string").alias("source_table"),
    )
    rejected = rejected.select(*labels, "_source_file", *file_columns(rejected), F.lit(True).alias("quarantined"),
                               F.lit(False).alias("held"), F.lit(None).cast("string").alias("source_table"))
    return [kept, rejected]


def not_onboarded_warnings(summary: DataFrame) -> list[str]:
    """One line per bronze table of ``gold.landing_summary`` holding rows of tables no flow
    onboards (kept in bronze, not carried to silver), naming the tables."""
    rows = summary.filter("size(not_onboarded_tables) > 0").orderBy("source", "bronze_table").collect()
    return [f"{r['bronze_table']}: {r['not_onboarded_rows']} row(s) of tables no flow onboards "
            f"({', '.join(r['not_onboarded_tables'])}); kept in bronze, not replicated" for r in rows]
