"""The ``spark`` global pipeline files see locally: the real session, except that
``spark.readStream`` reads new files (``cloudFiles``) or new table rows for the running flow,
and ``spark.read.table``/``spark.table`` read the pipeline's datasets as the flow sees them."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, DataFrameReader, SparkSession

from cdc_lakehouse.runtime.declarations import read, read_stream, running_flow


class LocalStreamReader:
    def __init__(self):
        self._format = None
        self._options: dict = {}
        self._schema = None

    def format(self, source: str) -> "LocalStreamReader":
        self._format = source
        return self

    def option(self, key: str, value) -> "LocalStreamReader":
        self._options[key] = str(value).lower() if isinstance(value, bool) else str(value)
        return self

    def options(self, **options) -> "LocalStreamReader":
        for key, value in options.items():
            self.option(key, value)
        return self

    def schema(self, schema) -> "LocalStreamReader":
        self._schema = schema
        return self

    def load(self, path: str):
        if self._format != "cloudFiles":
            raise ValueError(
                f"spark.readStream.format({self._format!r}) is not available locally: "
                "use cloudFiles for files, or spark.readStream.table for tables"
            )
        fmt = next((v for k, v in self._options.items() if k.lower() == "cloudfiles.format"), None)
        if fmt is None:
            raise ValueError("cloudFiles needs the option cloudFiles.format (json, text, csv, parquet, ...)")
        return running_flow.get().read_files(path, fmt, self._options, self._schema)

    def table(self, tableName: str) -> DataFrame:
        return read_stream(tableName)


class LocalBatchReader:
    """``spark.read`` with ``table`` answered by the running flow; the rest is Spark's."""

    def __init__(self, reader: DataFrameReader):
        self._reader = reader

    def table(self, tableName: str) -> DataFrame:
        return read(tableName)

    def __getattr__(self, item: str) -> Any:
        return getattr(self._reader, item)


class SparkProxy:
    def __init__(self, spark: SparkSession):
        self._spark = spark

    @property
    def readStream(self) -> LocalStreamReader:
        return LocalStreamReader()

    @property
    def read(self) -> LocalBatchReader:
        return LocalBatchReader(self._spark.read)

    def table(self, tableName: str) -> DataFrame:
        return read(tableName)

    def __getattr__(self, item):
        return getattr(self._spark, item)
