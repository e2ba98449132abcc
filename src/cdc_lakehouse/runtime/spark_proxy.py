"""The ``spark`` global pipeline files see locally: the real session, except that
``spark.readStream`` reads new files (``cloudFiles``) or new table rows for the running flow."""

from __future__ import annotations

from pyspark.sql import SparkSession

from cdc_lakehouse.runtime import dlt_api


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
                "use cloudFiles for files, or dlt.read_stream / spark.readStream.table for tables"
            )
        fmt = next((v for k, v in self._options.items() if k.lower() == "cloudfiles.format"), None)
        if fmt is None:
            raise ValueError("cloudFiles needs the option cloudFiles.format (json, text, csv, parquet, ...)")
        return dlt_api._reader.get().read_files(path, fmt, self._options, self._schema)

    def table(self, name: str):
        return dlt_api.read_stream(name)


class SparkProxy:
    def __init__(self, spark: SparkSession):
        self._spark = spark

    @property
    def readStream(self) -> LocalStreamReader:
        return LocalStreamReader()

    def __getattr__(self, item):
        return getattr(self._spark, item)
