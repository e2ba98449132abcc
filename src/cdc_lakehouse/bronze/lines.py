"""Landing files -> numbered lines, each with the file it came from.

Spark's line readers do not say which line of its file a row was, so each file is read whole
(the text source with ``wholetext``, which also decompresses ``.gz``) and split here.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

TEXT_OPTIONS = {"cloudFiles.format": "text", "wholetext": "true"}


def read_landing(spark, path: str, name_filter: str | None = None) -> DataFrame:
    """New files under ``path`` (Auto Loader on Databricks), one row per file."""
    reader = spark.readStream.format("cloudFiles").options(**TEXT_OPTIONS)
    if name_filter:
        reader = reader.option("pathGlobFilter", name_filter)
    return reader.load(path).select("value", F.col("_metadata.file_path").alias("_source_file"))


def numbered_lines(files: DataFrame) -> DataFrame:
    """One row per line: ``_source_file``, ``_line`` (1-based) and ``_raw`` (without its line
    terminator). The empty string after a final newline is not a line; other blank lines are."""
    # Drop the final newline before splitting instead of filtering the last part afterwards:
    # any expression on the file's text next to posexplode is evaluated once per output line
    # (above the Generate), which made splitting quadratic in the lines of a file.
    text = F.regexp_replace(F.col("value"), r"\n\z", "")
    exploded = files.filter(F.col("value") != "").select(
        "_source_file", F.posexplode(F.split(text, "\n", -1)).alias("_pos", "_text")
    )
    # A CR before the LF and a byte order mark at the start are encoding, not content: JSON Lines
    # readers drop both (the BOM would otherwise make the file's first line "not JSON").
    return exploded.select(
        "_source_file",
        (F.col("_pos") + 1).cast("long").alias("_line"),
        F.regexp_replace("_text", r"^\uFEFF|\r\z", "").alias("_raw"),
    )


def whole_files(files: DataFrame) -> DataFrame:
    """One row per file, for documents that are a single JSON value however they are wrapped."""
    return files.select("_source_file", F.lit(1).cast("long").alias("_line"), F.col("value").alias("_raw"))
