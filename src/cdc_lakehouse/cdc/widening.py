"""Column types of an AUTO CDC target as its change batches reveal them (type widening).

Change rows are typed from their JSON values batch by batch, so one column can come as BIGINT
in one batch and DOUBLE in the next, or as STRING in a batch where it held only NULLs. A batch
is never cast into a narrower column (5.5 stored as 5, a number kept as text for good):

* a column that has only held NULLs so far takes the type of its first values;
* otherwise the column widens first (BIGINT -> DOUBLE; anything else that differs -> STRING),
  as Delta's type widening does, and the batch is cast to the widened type.

Native Delta on Databricks widens types itself; this keeps local runs equally lossless.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DoubleType, LongType, StringType


def wider(a: DataType, b: DataType) -> DataType:
    if a == b:
        return a
    if {a, b} == {LongType(), DoubleType()}:
        return DoubleType()
    return StringType()


def _only_nulls(df: DataFrame, column: str) -> bool:
    return df.filter(F.col(column).isNotNull()).limit(1).count() == 0


def fit_to_target(store, target: str, batch: DataFrame, table_opts: dict) -> DataFrame:
    """``batch`` cast to the target's column types, after widening the target where needed."""
    if not store.exists(target):
        return batch
    current = store.read(target)
    have = {f.name: f.dataType for f in current.schema.fields}
    retype, cast = {}, {}
    for field in batch.schema.fields:
        old, new = have.get(field.name), field.dataType
        # The same type whose nested parts differ only in nullability (a map whose values had
        # no NULL in one batch) is no change: widening it would turn it into text.
        if old is None or old.simpleString() == new.simpleString():
            continue
        if _only_nulls(batch, field.name):
            cast[field.name] = old
        elif _only_nulls(current, field.name):
            retype[field.name] = new
        else:
            retype[field.name] = wider(old, new)
            cast[field.name] = retype[field.name]
    retype = {c: t for c, t in retype.items() if t != have[c]}
    if retype:
        widened = current.withColumns({c: F.col(c).cast(t) for c, t in retype.items()})
        store.overwrite(target, widened, **table_opts)
    return batch.withColumns({c: F.col(c).cast(t) for c, t in cast.items() if t != batch.schema[c].dataType})
