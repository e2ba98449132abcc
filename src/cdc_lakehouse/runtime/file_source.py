"""The local stand-in for Auto Loader (``cloudFiles``): new files under a folder, once each.

Like Auto Loader, a file is identified by its path and read once; files whose names start
with ``_`` or ``.`` are skipped unless ``pathGlobFilter`` names them; ``.gz`` files are
decompressed by Spark's readers.

A JSON Lines file that is empty or whose last line has no newline yet is being written: it is
left for a later batch until it is complete or has not changed for ``SETTLE_SECONDS`` (a writer
that stopped mid-line), so a line is not read half-written (docs/bronze.md: write, then rename).
"""

from __future__ import annotations

import atexit
import fnmatch
import functools
import glob
import os
import shutil
import tempfile
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from cdc_lakehouse.paths import glob_literal

# Options that only mean something to Auto Loader itself.
_AUTOLOADER_ONLY = ("cloudfiles.",)
TEXT_SCHEMA = StructType([StructField("value", StringType())])


def list_files(path: str, options: dict) -> list[str]:
    """All data files under ``path`` (a folder or a glob, read as Hadoop reads it: a backslash
    makes the next character literal), sorted for a stable order."""
    name_filter = _option(options, "pathGlobFilter")
    pattern, literal = _python_glob(path)
    roots = glob.glob(pattern) if glob.has_magic(pattern) else [literal]
    found = []
    for root in roots:
        if os.path.isfile(root):
            found.append(os.path.abspath(root))
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            found.extend(
                os.path.abspath(os.path.join(dirpath, f))
                for f in filenames
                if _wanted(f, name_filter)
            )
    return sorted(found)


SETTLE_SECONDS = 60


def settled(files: list[str], now: float | None = None) -> list[str]:
    """The ``files`` that are not being written (see the module's doc)."""
    now = time.time() if now is None else now
    return [f for f in files if not _in_writing(f, now)]


def _in_writing(path: str, now: float) -> bool:
    if not path.endswith(".jsonl"):
        return False  # a whole document, or compressed: its reader fails on a cut file
    stat = os.stat(path)
    if now - stat.st_mtime >= SETTLE_SECONDS:
        return False
    if stat.st_size == 0:
        return True
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) != b"\n"


def _python_glob(path: str) -> tuple[str, str]:
    """A Hadoop glob as a Python ``glob`` pattern, and as the literal path it names when it has
    no pattern: ``\\[`` is a literal ``[`` (``[[]`` to Python's glob)."""
    pattern, literal, chars = [], [], iter(path)
    for c in chars:
        if c == "\\":
            c = next(chars, "\\")
            pattern.append(glob.escape(c))
        else:
            pattern.append(c)
        literal.append(c)
    return "".join(pattern), "".join(literal)


def listing_options(options: dict) -> dict:
    """The options ``list_files`` uses, as a checkpoint records them."""
    name_filter = _option(options, "pathGlobFilter")
    return {"pathGlobFilter": name_filter} if name_filter else {}


def _wanted(filename: str, name_filter: str | None) -> bool:
    if name_filter:
        return fnmatch.fnmatch(filename, name_filter)
    return not filename.startswith(("_", "."))


def _option(options: dict, key: str):
    for k, v in options.items():
        if k.lower() == key.lower():
            return v
    return None


def read_files(spark: SparkSession, files: list[str], fmt: str, options: dict, schema,
               starts: dict[str, int] | None = None) -> DataFrame:
    """Read exactly ``files`` with Spark's own reader for ``fmt``.

    ``_metadata`` stays a hidden column, as on Databricks, except in a batch with files named
    ``_*`` or read again from ``starts`` (a grown file: path -> byte offset, given as its
    ``_metadata.file_block_start``): there it is an ordinary column (select your columns
    explicitly in such flows).
    """
    rescued = _option(options, "cloudFiles.rescuedDataColumn")
    if rescued:  # read every value as text, then fit it to the schema by column name
        return rescue(_read_files(spark, files, fmt, _as_text(fmt, options), None, starts), schema, rescued)
    return _read_files(spark, files, fmt, options, schema, starts)


def _read_files(spark: SparkSession, files: list[str], fmt: str, options: dict, schema,
                starts: dict[str, int] | None) -> DataFrame:
    starts = starts or {}
    hidden = [f for f in files if _hidden(f)]
    if not hidden and not starts:
        return _load(spark, files, fmt, options, schema)
    plain = [f for f in files if not _hidden(f) and f not in starts]
    frames = [_load(spark, plain, fmt, options, schema).select("*", "_metadata")] if plain else []
    if hidden:
        frames.append(_load_hidden(spark, hidden, fmt, options, schema))
    for path in (f for f in files if f in starts and not _hidden(f)):
        df = _load(spark, [path], fmt, options, schema).select("*", "_metadata")
        start = F.lit(starts[path]).cast("long")
        frames.append(df.withColumn("_metadata", F.col("_metadata").withField("file_block_start", start)))
    return functools.reduce(lambda a, b: a.unionByName(b), frames)


def _as_text(fmt: str, options: dict) -> dict:
    """Reader options that keep each value as the file wrote it (CSV and JSON)."""
    kept = {k: v for k, v in options.items() if k.lower() not in ("inferschema", "primitivesasstring")}
    if fmt == "json":
        return {**kept, "primitivesAsString": "true"}
    return {**kept, "inferSchema": "false"} if fmt == "csv" else kept


def rescue(raw: DataFrame, schema: StructType | None, column: str) -> DataFrame:
    """Auto Loader's schema enforcement with ``cloudFiles.rescuedDataColumn``: columns match
    the schema by name (a missing one is NULL); a value that does not fit its type, or a column
    the schema lacks, is kept in ``column`` as JSON (NULL when there is none), not lost."""
    others = [c for c in raw.columns if c != "_metadata"]
    if schema is None:  # the inferred schema holds every column and value
        return raw.withColumn(column, F.lit(None).cast("string"))
    fields = [f for f in schema.fields if f.name != column]
    typed, kept = [], []
    for f in fields:
        if f.name in others:
            value = F.col(f"`{f.name}`")
            typed.append(value.try_cast(f.dataType).alias(f.name))
            kept.append(F.when(value.isNotNull() & value.try_cast(f.dataType).isNull(), value).alias(f.name))
        else:
            typed.append(F.lit(None).cast(f.dataType).alias(f.name))
    names = {f.name for f in fields}
    kept += [F.col(f"`{c}`").alias(c) for c in others if c not in names]
    as_json = F.to_json(F.struct(*kept)) if kept else F.lit(None).cast("string")
    rescued = F.when(as_json != "{}", as_json).alias(column)
    metadata = [F.col("_metadata")] if "_metadata" in raw.columns else []
    return raw.select(*typed, rescued, *metadata)


def _hidden(path: str) -> bool:
    return os.path.basename(path).startswith(("_", "."))


def _load(spark: SparkSession, files: list[str], fmt: str, options: dict, schema) -> DataFrame:
    spark_options = {
        k: v for k, v in options.items()
        if not k.lower().startswith(_AUTOLOADER_ONLY) and k.lower() != "pathglobfilter"
    }
    reader = spark.read.format(fmt).options(**spark_options)
    if schema is not None:
        reader = reader.schema(schema)
    return reader.load([glob_literal(f) for f in files])  # listed already: no pattern in them


def _load_hidden(spark: SparkSession, files: list[str], fmt: str, options: dict, schema) -> DataFrame:
    """Spark's file index drops names starting with ``_`` or ``.`` even when named explicitly
    (``_manifest.json``), so such files are read through links with plain names and
    ``_metadata`` is pointed back at the original files."""
    stage = tempfile.mkdtemp(prefix="cdc-lakehouse-hidden-")
    # The frame is lazy and reads the links whenever it is evaluated: they go at exit.
    atexit.register(shutil.rmtree, stage, True)
    links = {}
    for i, original in enumerate(files):
        link = os.path.join(stage, f"h{i}{os.path.basename(original)}")
        try:
            os.link(original, link)
        except OSError:
            shutil.copy2(original, link)  # keeps the time: bronze records it (_file_modified_at)
        links[link] = original
    df = _load(spark, list(links), fmt, options, schema).select("*", "_metadata")
    path, name = F.col("_metadata.file_path"), F.col("_metadata.file_name")
    for link, original in links.items():
        path = F.replace(path, F.lit(link), F.lit(original))
        name = F.when(name == os.path.basename(link), F.lit(os.path.basename(original))).otherwise(name)
    return df.withColumn("_metadata", F.col("_metadata").withField("file_path", path).withField("file_name", name))


def empty_frame(spark: SparkSession, fmt: str, options: dict, schema) -> DataFrame | None:
    """The empty input of a run with no new files, when its shape is known. It is read from an
    empty file so that it has the file source's ``_metadata`` column like any other batch."""
    if schema is None and fmt == "text":
        schema = TEXT_SCHEMA
    if schema is None:
        return None
    rescued = _option(options, "cloudFiles.rescuedDataColumn")
    if rescued:  # an empty file has no header to match the schema's names with: read with the schema
        return _load(spark, [_empty_file()], fmt, options, schema).withColumn(rescued, F.lit(None).cast("string"))
    return read_files(spark, [_empty_file()], fmt, options, schema)


def _empty_file() -> str:
    path = os.path.join(tempfile.gettempdir(), "cdc-lakehouse-empty-input")
    if not os.path.exists(path):
        open(path, "w").close()
    return path
