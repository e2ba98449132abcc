"""Where a flow's batch goes: appended, recomputed, or applied as changes."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from cdc_lakehouse.cdc import apply as cdc_apply
from cdc_lakehouse.cdc import snapshot as cdc_snapshot
import cdc_lakehouse.storage.spark_plans as spark_plans
from cdc_lakehouse.storage.base import where_predicate


def table_options(target) -> dict:
    return dict(partition_by=target.partition_cols, properties=target.table_properties, comment=target.comment)


def write_query(runner, target, df: DataFrame, batch, source: DataFrame, from_cache: bool = False) -> int:
    """Streaming input appends; a batch query recomputes the whole table (materialized view).
    ``source``: the flow's rows before its expectations. ``from_cache``: they come only from
    cached results, and the expectations were counted apart (``reads_only_cached``)."""
    if batch.already_committed(target.name):
        return 0
    df = conform_to_schema(runner.spark, df, target.schema)
    if batch.streaming and target.kind != "materialized_view":
        if from_cache and runner.store.exists(target.name) and df.isEmpty():
            return 0  # nothing to append: no commit (the checkpoint records the batch)
        return runner.store.append(target.name, df, batch.commit(), **table_options(target))
    replacing = batch.view_refresh.replacing if batch.view_refresh is not None else None
    if _stays_empty(runner.store, target.name, df, replacing, source):
        return 0
    if replacing is not None:  # a view refreshed by partition: only its touched partitions' rows
        return runner.store.replace_where(target.name, df, replacing, batch.commit())
    return runner.store.overwrite(target.name, df, batch.commit(), **table_options(target))


def reads_only_cached(df: DataFrame) -> bool:
    """Whether ``df`` computes nothing new: its rows come only from cached results (a quarantine
    table reading the landing view its bronze table read first: runtime/shared_views.py). Then
    its expectations are counted apart (a pass over the cache) and whether any row is left to
    append is asked before writing, so an empty batch costs no commit. Any other batch is
    written as it is: asking first would compute it twice, and its expectations are counted by
    the write's own pass (a look at its first row would count only the rows before it)."""
    plan = df._jdf.queryExecution().withCachedData()
    return all(spark_plans.kind(leaf) in ("InMemoryRelation", "LocalRelation") for leaf in spark_plans.leaves(plan))


def _stays_empty(store, name: str, df: DataFrame, replacing: dict[str, list] | None, source: DataFrame) -> bool:
    """Whether a view (or the partitions of it ``replacing`` names) that has no rows would be
    recomputed as no rows (``source`` has none) with the same columns (those of ``df``): then
    the table is left as it is, without a commit (the batch is recorded in its checkpoint).
    Asked only where the table has no rows to replace, so a view with rows is never computed
    twice."""
    if not store.exists(name):
        return False
    table = store.read(name)
    if table.schema.simpleString() != df.schema.simpleString():
        return False
    if replacing is None:
        return store.row_count(name) == 0 and source.isEmpty()
    return table.filter(where_predicate(replacing)).isEmpty() and source.isEmpty()


def write_cdc(runner, flow, target, df: DataFrame, batch) -> int:
    spec = cdc_apply.CdcSpec.from_params(flow.cdc)
    return cdc_apply.apply_changes(runner.store, target.name, df, spec, batch, table_options(target))


def write_snapshot_cdc(runner, flow, target, batch) -> int:
    return cdc_snapshot.apply_snapshots(runner, flow, target, batch, table_options(target))


def conform_to_schema(spark, df: DataFrame, schema) -> DataFrame:
    """A declared table schema fixes column order and types."""
    if schema is None:
        return df
    struct = schema if isinstance(schema, StructType) else _struct(StructType.fromDDL(schema))
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in struct.fields])


def _struct(parsed) -> StructType:
    """``StructType.fromDDL`` of a column list: typed as any DataType, it is a struct."""
    assert isinstance(parsed, StructType), f"a table schema is a column list, not {parsed.simpleString()}"
    return parsed
