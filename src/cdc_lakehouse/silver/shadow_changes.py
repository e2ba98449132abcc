"""Shadow change rows of committed transactions -> net changes per transaction and row.

A change row is committed once its transaction row is there (CONTRACT §2.3-§2.4); the latest
recording of a transaction wins. Shadow updates carry only the changed columns, so each
operation's full row is rebuilt by folding the row's history in commit order: an insert sets
all columns, an update overwrites the columns it names (an explicit null sets NULL), a delete
ends the row. A key-changing update continues the row of its old key, so rows are rebuilt in
rounds until every chain of key changes is resolved.

A PostgreSQL TRUNCATE is a change row of op ``T`` keyed ``{}``: the fold keeps it as that key's
row, the table's truncates; the operations before it in its transaction become part of it
(silver/truncates.py). An ALTER TABLE (op ``A``) is the row of a key of its own, its image the
statement (silver/schema_changes.py).

A row that entered the replica through a snapshot has no insert in the shadow history: the
snapshot's corrective changes (full images, at the snapshot's place in commit order) are folded
with it as operations that start the row and are never emitted (``correction_operations``), so
a later partial update keeps the columns it does not name and has the snapshot's row as before.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from cdc_lakehouse.bronze.json_text import exact_members
from cdc_lakehouse.silver import arrivals, keys, net_change, schema_changes, truncates

# The streaming form (Databricks) cannot look at the data before planning: it plans this many
# rounds, which rebuild chains of up to KEY_CHANGE_ROUNDS - 1 key changes, and marks the changes
# of rows at the end of a longer chain with the anomaly CHAIN_TOO_LONG. The batch form rebuilds
# any chain length.
KEY_CHANGE_ROUNDS = 4
CHAIN_TOO_LONG = "key_chain_too_long"
ROW_MAP = "map<string,string>"
TXN_COLUMNS = ["_source", "txn_id", "commit_ts", "user", "role"]
CHANGE_CONTENT = ["_source", "txn_id", "schema", "table", "op_ts", "op_seq", "op", "key", "old_key", "values"]

_MERGE = (
    "map_concat(transform_values(coalesce({a}, cast(map() as {t})), (k, v) -> IF(map_contains_key({b}, k), {b}[k], v)),"
    " map_filter({b}, (k, v) -> NOT map_contains_key(coalesce({a}, cast(map() as {t})), k)))"
)
_STEP = (
    "CASE WHEN x.op IN ('I', 'A') THEN x.vals WHEN x.op IN ('D', 'T') THEN CAST(NULL AS {t}) "
    "WHEN x.rename_in THEN {merge_base} ELSE {merge_state} END"
).format(
    t=ROW_MAP,
    merge_base=_MERGE.format(a="x.base", b="x.vals", t=ROW_MAP),
    merge_state=_MERGE.format(a="s", b="x.vals", t=ROW_MAP),
)
_STATE_AFTER = "aggregate(slice(ops, 1, i + 1), CAST(NULL AS {t}), (s, x) -> {step})".format(t=ROW_MAP, step=_STEP)
_STATE_BEFORE = "IF(i = 0, CAST(NULL AS {t}), aggregate(slice(ops, 1, i), CAST(NULL AS {t}), (s, x) -> {step}))".format(
    t=ROW_MAP, step=_STEP
)


def latest_transactions(txns: DataFrame) -> DataFrame:
    """One row per transaction: its latest recording (the commit time, when it was recorded
    first with the time of its last operation)."""
    latest = Window.partitionBy("txn_id").orderBy(F.col("end_ts").desc())
    return (
        txns.withColumn("__r", F.row_number().over(latest)).filter("__r = 1")
        .select("txn_id", F.col("end_ts").alias("commit_ts"), F.col("db_user").alias("user"),
                F.col("db_role").alias("role"))
    )


def distinct_changes(changes: DataFrame) -> DataFrame:
    """A re-delivered file repeats change rows: the n-th row of one content in a file is the
    same operation as the n-th in a copy of that file, and one is kept, at its first place in
    the log (file, line). Rows that differ in anything, values included, are all kept, and so
    are repeats of one content inside one file (x=1, x=2, x=1 at one time are three updates)."""
    nth_in_file = Window.partitionBy(*CHANGE_CONTENT, "_source_file").orderBy("_line")
    numbered = changes.withColumn("__nth", F.dense_rank().over(nth_in_file))
    first = F.min(F.struct("_source_file", "_line")).alias("__first")
    return numbered.groupBy(*CHANGE_CONTENT, "__nth").agg(first).select(*CHANGE_CONTENT, "__first.*")


def operations(changes: DataFrame, txns: DataFrame) -> DataFrame:
    """Committed change rows with canonical keys, order and values, plus, for each key change,
    a delete at the old key so the old key's history ends there."""
    ops = changes.join(txns, "txn_id").select(
        "_source", *TXN_COLUMNS[1:], "schema", "table", "op",
        keys.from_json_object(F.col("key")).alias("key"),
        F.when(F.col("old_key").isNotNull(), keys.from_json_object(F.col("old_key"))).alias("old_key"),
        # Operation order inside a transaction: op_seq, else op_ts, else log order (CONTRACT §3).
        F.struct(F.unix_micros("commit_ts").alias("position"), F.col("txn_id").alias("txn"),
                 F.col("op_seq"), F.col("op_ts"), F.col("_source_file").alias("file"),
                 F.col("_line").alias("line")).alias("ord"),
        # Column -> value as JSON text (so 1 and "1" stay apart), numbers as written, in the
        # order the source wrote them.
        exact_members(F.col("values")).alias("vals"),
    )
    ops = schema_changes.with_statement_keys(truncates.with_undone_in_truncates(ops))
    rename_in = (F.col("op") == "U") & F.col("old_key").isNotNull() & (F.col("old_key") != F.col("key"))
    ops = ops.withColumn("rename_in", F.coalesce(rename_in, F.lit(False))).withColumn("emit", F.lit(True))
    rename_out = ops.filter("rename_in").select(
        *[c for c in ops.columns if c not in ("key", "op", "old_key", "vals", "rename_in", "emit")],
        F.col("old_key").alias("key"), F.lit("D").alias("op"), F.lit(None).cast("string").alias("old_key"),
        F.lit(None).cast(ROW_MAP).alias("vals"), F.lit(False).alias("rename_in"), F.lit(False).alias("emit"),
    )
    return ops.unionByName(rename_out)


def correction_operations(corrections: DataFrame | None, like: DataFrame) -> DataFrame | None:
    """Snapshot corrections (change-stream rows, snapshot/corrections.py) as operations of
    ``like``'s columns that set the row to the snapshot's image (a DELETE ends it) at the
    snapshot's sequence, and are never emitted: the corrections reach the change stream by their
    own flow."""
    if corrections is None:
        return None
    ord_type = like.schema["ord"].dataType
    ord_ = F.struct(F.col("sequence.position").alias("position"), F.col("sequence.txn").alias("txn"),
                    F.lit(None).alias("op_seq"), F.col("commit_ts").alias("op_ts"),
                    F.lit(None).alias("file"), F.lit(None).alias("line")).cast(ord_type)
    values = {
        "_source": F.col("source"), "op": F.when(F.col("op") == "DELETE", F.lit("D")).otherwise(F.lit("I")),
        "ord": ord_, "vals": F.when(F.col("op") != "DELETE", exact_members(F.col("row"))),
        "rename_in": F.lit(False), "emit": F.lit(False),
    }
    rows = corrections.filter(F.col("op").isin("INSERT", "UPDATE", "DELETE"))
    return rows.select(*[(values[f.name] if f.name in values else F.col(f.name) if f.name in rows.columns
                          else F.lit(None)).cast(f.dataType).alias(f.name) for f in like.schema.fields])


def with_corrections(ops: DataFrame, corrections: DataFrame | None) -> DataFrame:
    seeds = correction_operations(corrections, ops)
    return ops if seeds is None else ops.unionByName(seeds)


def _fold(ops: DataFrame, bases: DataFrame | None) -> DataFrame:
    """Each operation with the full row before and after it, per key in commit order."""
    if bases is None:
        with_base = ops.withColumn("base", F.lit(None).cast(ROW_MAP))
    else:
        with_base = ops.join(bases, ["schema", "table", "key", "ord"], "left")
    entry = F.struct(*[F.col(c) for c in ["ord", *[c for c in with_base.columns if c not in ("ord", "schema", "table", "key")]]])
    # Maps cannot be compared, so the operations are sorted by their order field alone.
    by_ord = "(l, r) -> CASE WHEN l.ord < r.ord THEN -1 WHEN l.ord > r.ord THEN 1 ELSE 0 END"
    grouped = with_base.groupBy("schema", "table", "key").agg(F.collect_list(entry).alias("ops")).select(
        "schema", "table", "key", F.expr(f"array_sort(ops, {by_ord})").alias("ops")
    )
    folded = grouped.select(
        "schema", "table", "key",
        F.expr(f"transform(ops, (x, i) -> named_struct('op', x, 'before', {_STATE_BEFORE}, 'after', {_STATE_AFTER}))").alias("steps"),
    )
    return folded.select("schema", "table", "key", F.explode("steps").alias("s")).select(
        "schema", "table", "key", "s.op.*",
        F.when(F.col("s.op.rename_in"), F.col("s.op.base")).otherwise(F.col("s.before")).alias("before_map"),
        F.col("s.after").alias("after_map"),
    )


def _bases(folded: DataFrame, ops: DataFrame) -> DataFrame:
    """For each key change: the old key's row just before it."""
    renames = ops.filter("rename_in").select("schema", "table", "key", "ord", F.col("old_key"))
    old_rows = folded.select("schema", "table", F.col("key").alias("old_key"), F.col("ord").alias("old_ord"), "after_map")
    candidates = renames.join(old_rows, ["schema", "table", "old_key"]).filter(F.col("old_ord") < F.col("ord"))
    latest = Window.partitionBy("schema", "table", "key", "ord").orderBy(F.col("old_ord").desc())
    return (
        candidates.withColumn("__r", F.row_number().over(latest)).filter("__r = 1")
        .select("schema", "table", "key", "ord", F.col("after_map").alias("base"))
    )


def full_rows(ops: DataFrame, streaming: bool = False) -> DataFrame:
    # Batch: checkpointed, not persisted: each round's plan would otherwise hold all earlier
    # rounds, and Spark analyses a plan in full even where its parts are cached. Streaming:
    # nothing may be materialized (the static side is read again for each micro-batch), so
    # every round a chain may need is planned.
    keep = (lambda df: df) if streaming else (lambda df: df.localCheckpoint())
    ops = keep(ops)
    folded = keep(_fold(ops, None))
    for _ in range((KEY_CHANGE_ROUNDS if streaming else _rounds(ops)) - 1):
        folded = keep(_fold(ops, keep(_bases(folded, ops))))
    return folded


def _rounds(ops: DataFrame) -> int:
    """A chain of n key changes (each changing the key the one before it changed to, later in
    commit order) needs n + 1 rounds. Its length is found level by level on the key changes
    alone, a small table; most batches have none and need one round, found in one job."""
    renames = _renames(ops)
    rounds, level = 1, renames
    while not level.isEmpty():
        rounds += 1
        level = _chain_links(renames, level).localCheckpoint()
    return rounds


def touched_transactions(new_changes: DataFrame, new_txns: DataFrame, txns: DataFrame) -> DataFrame:
    """(txn_id) of each committed transaction (``txns``) a new change or transaction row belongs to."""
    ids = new_changes.select("txn_id").unionByName(new_txns.select("txn_id")).distinct()
    return ids.join(txns.select("txn_id"), "txn_id")


def history_fold(new_changes: DataFrame, new_txns: DataFrame, all_changes: DataFrame, all_txns: DataFrame,
                 corrections: DataFrame | None = None) -> tuple[DataFrame, DataFrame]:
    """The whole history of every row a transaction that a new change or transaction row belongs
    to touches, snapshot ``corrections`` included, folded (``full_rows``), and (txn_id) of those
    transactions."""
    txns = latest_transactions(all_txns)
    touched = touched_transactions(new_changes, new_txns, txns)
    changes = distinct_changes(all_changes)
    touched_rows = changes.join(touched, "txn_id").select(
        F.col("schema").alias("t_schema"), F.col("table").alias("t_table"), F.explode(F.array_compact(F.array(
            keys.from_json_object(F.col("key")), F.when(F.col("old_key").isNotNull(), keys.from_json_object(F.col("old_key")))
        ))).alias("row_key"),
    ).distinct()
    ops = with_corrections(operations(changes, txns), corrections)
    rows_keys = touched_rows.select(F.col("t_schema").alias("schema"), F.col("t_table").alias("table"),
                                    F.col("row_key").alias("key"))
    history = ops.join(_with_key_chains(rows_keys, changes), ["schema", "table", "key"], "left_semi")
    return full_rows(history), touched


def net_changes(new_changes: DataFrame, new_txns: DataFrame, all_changes: DataFrame, all_txns: DataFrame,
                corrections: DataFrame | None = None) -> DataFrame:
    """Net changes of every committed transaction that a new change row or a new transaction
    row belongs to. Only the history of the rows those transactions touch is rebuilt."""
    return emitted(*history_fold(new_changes, new_txns, all_changes, all_txns, corrections))


def emitted(folded: DataFrame, touched: DataFrame | None = None) -> DataFrame:
    """The net changes of the folded operations that are emitted (not a key change's delete at
    its old key, nor a row image standing for earlier history), of the ``touched`` transactions
    (txn_id) only when given."""
    rows = folded.filter("emit")
    return combined(rows if touched is None else rows.join(touched, "txn_id", "left_semi"))


def streamed_net_changes(new_changes: DataFrame, new_txns: DataFrame, all_changes: DataFrame, all_txns: DataFrame,
                         corrections: DataFrame | None = None) -> DataFrame:
    """The streaming form (silver/arrivals.py): every committed transaction's net changes, rebuilt
    from the whole history (snapshot ``corrections`` included), joined to the new change or
    transaction rows that complete them."""
    ops = operations(distinct_changes(all_changes), latest_transactions(all_txns))
    folded = full_rows(with_corrections(ops, corrections), streaming=True)
    net = flag_long_chains(emitted(folded), ops, KEY_CHANGE_ROUNDS)
    lines = all_changes.select("txn_id", *arrivals.ARRIVAL).unionByName(all_txns.select("txn_id", *arrivals.ARRIVAL))
    new_lines = new_changes.select(*arrivals.ARRIVAL).unionByName(new_txns.select(*arrivals.ARRIVAL))
    return net.join(arrivals.completed(new_lines, arrivals.last_arrivals(lines, ["txn_id"]), ["txn_id"]), "txn_id")


def _renames(ops: DataFrame) -> DataFrame:
    """The key changes among ``ops``, each with its place in commit order."""
    return ops.filter("rename_in").select("schema", "table", "key", "old_key", "ord")


def _chain_links(renames: DataFrame, level: DataFrame) -> DataFrame:
    """The key changes that change a key the ones of ``level`` changed to, later."""
    previous = level.select("schema", "table", F.col("key").alias("old_key"), F.col("ord").alias("__before"))
    return (renames.join(previous, ["schema", "table", "old_key"]).filter(F.col("ord") > F.col("__before"))
            .select(*renames.columns).distinct())


def flag_long_chains(net: DataFrame, ops: DataFrame, rounds: int) -> DataFrame:
    """``net`` with ``CHAIN_TOO_LONG`` among the anomalies of each change of a row that a chain
    of ``rounds`` or more key changes led to: ``rounds`` fold rounds cannot rebuild its image.
    Planned without looking at the data (the streaming form)."""
    renames = _renames(ops)
    level = renames
    for _ in range(rounds - 1):
        level = _chain_links(renames, level)
    too_long = level.select("schema", "table", "key", F.lit(True).alias("__too_long")).distinct()
    flagged = F.when(F.col("__too_long"), F.array_union("anomalies", F.array(F.lit(CHAIN_TOO_LONG)))).otherwise(F.col("anomalies"))
    return net.join(too_long, ["schema", "table", "key"], "left").withColumn("anomalies", flagged).drop("__too_long")


def combined(rows: DataFrame) -> DataFrame:
    """The net change per transaction and row of the emitted operations, images as JSON objects."""
    shaped = rows.select(
        "_source", *TXN_COLUMNS[1:], "schema", "table", "ord", "op", "key", "old_key",
        F.expr(_json_expr("after_map")).alias("row"),
        F.expr(_json_expr("before_map")).alias("before"),
    )
    return net_change.combine(shaped, [*TXN_COLUMNS, "schema", "table"])


def _with_key_chains(row_keys: DataFrame, changes: DataFrame) -> DataFrame:
    """The keys, and every key linked to them by key changes, either way, at any distance: a
    row's full image is rebuilt from its whole history, and the rows it became are rebuilt with
    it. The renames come from the raw change rows (a small plan); one level per round, until a
    round finds no key not found before."""
    renames = changes.select(
        "schema", "table", "op", keys.from_json_object(F.col("key")).alias("key"),
        F.when(F.col("old_key").isNotNull(), keys.from_json_object(F.col("old_key"))).alias("old_key"),
    ).filter((F.col("op") == "U") & F.col("old_key").isNotNull() & (F.col("old_key") != F.col("key")))
    # Checkpointed: each round joins them, and their own plans are large.
    renames = renames.select("schema", "table", "key", "old_key").localCheckpoint()
    found = frontier = row_keys.select("schema", "table", "key").distinct().localCheckpoint()
    while True:
        before = renames.join(frontier, ["schema", "table", "key"], "left_semi").select(
            "schema", "table", F.col("old_key").alias("key"))
        after = renames.join(frontier.withColumnRenamed("key", "old_key"), ["schema", "table", "old_key"],
                             "left_semi").select("schema", "table", "key")
        frontier = before.unionByName(after).distinct().join(found, ["schema", "table", "key"], "left_anti").localCheckpoint()
        if frontier.isEmpty():
            return found
        found = found.unionByName(frontier).localCheckpoint()


def _json_expr(column: str) -> str:
    entry = "concat('\"', replace(e.key, '\"', '\\\\\"'), '\":', e.value)"
    return (
        f"CASE WHEN {column} IS NULL THEN NULL "
        f"ELSE concat('{{', array_join(transform(map_entries({column}), e -> {entry}), ','), '}}') END"
    )
