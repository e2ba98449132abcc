"""Column filters from the onboarding file, applied before anything reaches a silver replica:
drop, rename, mask or hash columns (e.g. PII)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

MASK = "****"


def apply_column_filters(df: DataFrame, filters) -> DataFrame:
    if filters is None:
        return df
    present = set(df.columns)
    for column in filters.drop:
        df = df.drop(column)
    for column in filters.mask:
        if column in present:
            df = df.withColumn(column, F.when(F.col(column).isNotNull(), F.lit(MASK)))
    for column in filters.hash:
        if column in present:
            df = df.withColumn(column, F.sha2(F.col(column).cast("string"), 256))
    for old, new in filters.rename.items():
        df = df.withColumnRenamed(old, new)
    return df
