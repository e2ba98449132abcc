"""What a keyed MERGE, or an overwrite of the rows a predicate selects (``replaceWhere``), leaves
in a small table, as a query: the table written again in one pass.

Delta's MERGE runs at least six Spark jobs whatever the sizes (a copy of its source, scans for
the files it touches, the rewrite of those files, the table's state), 0.7-1.7 s on two cores
into a table of a few hundred rows, and a pipeline update MERGEs some 30 tables; its
``replaceWhere`` five. A table of a few megabytes is one or two files, all of which such a
write rewrites anyway; writing it again as this query's result is one job
(``storage/delta_txn.py`` commits it as an overwrite of the version read, which conflicts with
any write landing meanwhile, as the MERGE's own read of the whole table does). docs/storage.md,
"The cost of a commit".

The result of ``merged`` is the MERGE's: rows whose key the source does not name stay as they
are; a source row flagged for delete removes its key's row; any other source row replaces its
key's row or is added. Where the MERGE would fail because several source rows name one key, so
does this query (it checks every key the source names twice, not only those the table holds).

A MERGE none of whose source rows matches a row of the table only inserts, and Delta commits it
as an append: a reader of the table's appended rows (a streaming read, a view refreshed by
partition) reads on. ``matches_any`` finds that out first where the writer asks for it
(``UpsertSpec.keep_appends``), and ``inserted`` is then what the append adds.

Into a table with a change data feed, ``merged_with_changes`` adds the rows the MERGE's feed
holds (its ``_change_type``: the image before and after each updated row, each inserted row, the
image of each deleted row), which Delta's ``writeFiles`` writes to the feed's own files, as the
MERGE's rewrite does.

The result of ``replaced`` is ``replaceWhere``'s: the rows for which the predicate is true give
way to the new rows (one for which it is NULL stays, as a DELETE keeps it), and a new row for
which it is false fails the write, as Delta's check of the written rows does.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Observation, Window
from pyspark.sql import functions as F

from cdc_lakehouse.storage.base import UpsertSpec

_ROWS_OF_KEY = "__rows_of_key"


def merged(table: DataFrame, source: DataFrame, spec: UpsertSpec, rows: Observation) -> DataFrame:
    """``table`` after MERGE of ``source`` by ``spec``, in ``table``'s columns (which ``source``
    has, with the delete flag if any, and no others). ``rows`` counts the source's rows (as
    ``rows``) when the result is written."""
    return _merged(table, _one_row_per_key(source, _match_columns(spec)), spec, rows)


CHANGE_TYPE = "_change_type"  # Delta's column of a change data feed's rows in a write (CDCReader)
_MATCHED, _DELETED = "__matched", "__deleted"


def merged_with_changes(table: DataFrame, source: DataFrame, spec: UpsertSpec, rows: Observation) -> DataFrame:
    """``merged``, its rows with a NULL ``_change_type``, and the rows of the MERGE's change data
    feed with theirs."""
    keys = _match_columns(spec)
    checked = _one_row_per_key(source, keys)
    columns = [_quoted(c) for c in table.columns]
    deleted = F.lit(False) if spec.delete_flag is None else _quoted(spec.delete_flag)
    flagged = checked.select(*[_quoted(k) for k in keys], deleted.alias(_DELETED))
    before = table.join(flagged.hint("shuffle_hash"), keys, "inner").select(
        *columns, F.when(F.col(_DELETED), "delete").otherwise("update_preimage").alias(CHANGE_TYPE))
    matched = _keys(table, keys).withColumn(_MATCHED, F.lit(True))
    after = _upserts(checked, spec, table.columns).join(matched.hint("shuffle_hash"), keys, "left").select(
        *columns, F.when(F.col(_MATCHED), "update_postimage").otherwise("insert").alias(CHANGE_TYPE))
    data = _merged(table, checked, spec, rows).withColumn(CHANGE_TYPE, F.lit(None).cast("string"))
    return data.unionByName(before).unionByName(after)


def matches_any(table: DataFrame, source: DataFrame, spec: UpsertSpec) -> bool:
    """Whether a row of ``source`` matches a row of ``table`` (one Spark job)."""
    keys = _match_columns(spec)
    return _keys(table, keys).join(_keys(source, keys).hint("shuffle_hash"), keys, "left_semi").limit(1).count() > 0


def inserted(table: DataFrame, source: DataFrame, spec: UpsertSpec, rows: Observation) -> DataFrame:
    """The rows the MERGE of ``source`` inserts into ``table`` when no key matches (every row
    not flagged for delete), with the same failure on a key named twice; ``rows`` as in
    ``merged``."""
    checked = _one_row_per_key(source, _match_columns(spec)).observe(rows, F.count(F.lit(1)).alias("rows"))
    return _upserts(checked, spec, table.columns)


def replaced(table: DataFrame, rows: DataFrame, predicate: str, counted: Observation) -> DataFrame:
    """``table`` with ``rows`` in place of its rows where ``predicate`` (SQL) is true;
    ``counted`` counts ``rows`` (as ``rows``) when the result is written."""
    selected = F.coalesce(F.expr(predicate), F.lit(False))
    outside = F.lit(f"replaceWhere: a written row does not satisfy the condition {predicate[:200]}")
    # Checked in a written column, not a filter: Spark would push a filter on the columns the
    # condition names below the query that restricts ``rows`` to it, and fail on rows never written.
    first, *others = table.columns
    checked = F.coalesce(F.when(~F.expr(predicate), F.raise_error(outside)), _quoted(first)).alias(first)
    written = rows.select(checked, *[_quoted(c) for c in others]).observe(counted, F.count(F.lit(1)).alias("rows"))
    return table.filter(~selected).unionByName(written)


def _merged(table: DataFrame, checked: DataFrame, spec: UpsertSpec, rows: Observation) -> DataFrame:
    """``merged`` of a source whose keys ``_one_row_per_key`` checked."""
    keys = _match_columns(spec)
    # Counted on the branch that reads every source row once: the keys the table's rows are
    # matched against.
    named = _keys(checked, keys).observe(rows, F.count(F.lit(1)).alias("rows"))
    kept = table.join(named.hint("shuffle_hash"), keys, "left_anti")
    return kept.unionByName(_upserts(checked, spec, table.columns))


def _match_columns(spec: UpsertSpec) -> list[str]:
    return [*spec.keys, *spec.extra_match_columns]


def _keys(df: DataFrame, keys: list[str]) -> DataFrame:
    return df.select(*[_quoted(k) for k in keys])


def _upserts(checked: DataFrame, spec: UpsertSpec, columns: list[str]) -> DataFrame:
    flag = spec.delete_flag
    upserts = checked if flag is None else checked.filter(~_quoted(flag))
    return upserts.select(*[_quoted(c) for c in columns])


def _one_row_per_key(source: DataFrame, keys: list[str]) -> DataFrame:
    """``source``, failing the query where two of its rows share a key (a NULL key matches no
    row, as in the MERGE's condition, so it is not checked)."""
    rows_of_key = F.count(F.lit(1)).over(Window.partitionBy(*[_quoted(k) for k in keys]))
    counted = source.withColumn(_ROWS_OF_KEY, rows_of_key)
    complete = F.lit(True)
    for key in keys:
        complete = complete & _quoted(key).isNotNull()
    message = F.lit(f"MERGE: several source rows share a key ({', '.join(keys)}); a key takes one change a batch")
    fail = F.when(complete & (F.col(_ROWS_OF_KEY) > 1), F.raise_error(message))
    return counted.filter(fail.isNull()).drop(_ROWS_OF_KEY)


def _quoted(name: str) -> Column:
    return F.col(f"`{name.replace('`', '``')}`")
