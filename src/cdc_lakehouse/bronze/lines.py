"""Landing files -> numbered lines, each with the file it came from.

Spark's line readers do not say which line of its file a row was, so each file is read whole
(the text source with ``wholetext``, which also decompresses ``.gz``) and split here.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

TEXT_OPTIONS = {"cloudFiles.format": "text", "wholetext": "true"}


FILE_COLUMNS = ("_file_size", "_file_modified_at")  # the file as it was read (bronze/summary.py)


def read_landing(spark, path: str, name_filter: str | None = None) -> DataFrame:
    """New files under ``path`` (Auto Loader on Databricks), one row per file, with its size
    and modification time, and ``_block_start``: the byte where its new lines start (0 but for
    a file that grew after it was read: runtime/file_identity.py)."""
    reader = spark.readStream.format("cloudFiles").options(**TEXT_OPTIONS)
    if name_filter:
        reader = reader.option("pathGlobFilter", name_filter)
    return reader.load(path).select(
        "value", F.col("_metadata.file_path").alias("_source_file"),
        F.col("_metadata.file_size").alias("_file_size"),
        F.col("_metadata.file_modification_time").alias("_file_modified_at"),
        F.col("_metadata.file_block_start").alias("_block_start"),
    )


def file_columns(files: DataFrame) -> list:
    """The file's size and time where ``files`` has them (a hand-made frame, or a bronze table
    written before they were kept, has not): NULL otherwise."""
    types = {"_file_size": "long", "_file_modified_at": "timestamp"}
    return [F.col(c) if c in files.columns else F.lit(None).cast(types[c]).alias(c) for c in FILE_COLUMNS]


def _lines_before_start(files: DataFrame):
    """How many lines of a file lie before its ``_block_start`` (a line start): read before."""
    if "_block_start" not in files.columns:
        return F.lit(0)
    prefix = F.expr("decode(substring(encode(value, 'UTF-8'), 1, coalesce(_block_start, 0)), 'UTF-8')")
    return F.size(F.split(prefix, "\n", -1)) - 1


def numbered_lines(files: DataFrame) -> DataFrame:
    """One row per line: ``_source_file``, ``_line`` (1-based) and ``_raw`` (without its line
    terminator). The empty string after a final newline is not a line; other blank lines are."""
    # Drop the final newline before splitting instead of filtering the last part afterwards:
    # any expression on the file's text next to posexplode is evaluated once per output line
    # (above the Generate), which made splitting quadratic in the lines of a file.
    text = F.regexp_replace(F.col("value"), r"\n\z", "")
    counted = files.filter(F.col("value") != "").select(
        "value", "_source_file", *file_columns(files), _lines_before_start(files).alias("_skip")
    )
    exploded = counted.select(
        "_source_file", *FILE_COLUMNS, "_skip", F.posexplode(F.split(text, "\n", -1)).alias("_pos", "_text")
    ).filter(F.col("_pos") >= F.col("_skip"))
    # A CR before the LF and a byte order mark at the start are encoding, not content: JSON Lines
    # readers drop both (the BOM would otherwise make the file's first line "not JSON").
    return exploded.select(
        "_source_file", *FILE_COLUMNS,
        (F.col("_pos") + 1).cast("long").alias("_line"),
        F.regexp_replace("_text", r"^\uFEFF|\r\z", "").alias("_raw"),
    )


def whole_files(files: DataFrame) -> DataFrame:
    """One row per file, for documents that are a single JSON value however they are wrapped."""
    return files.select("_source_file", *file_columns(files), F.lit(1).cast("long").alias("_line"),
                        F.col("value").alias("_raw"))
