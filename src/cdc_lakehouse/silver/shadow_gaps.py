"""Quarantined shadow change lines hold their transactions: none is applied without one of its rows.

A shadow change line that bronze quarantines but that still names its transaction (``txn_id``,
read as silver/quarantined_lines.py reads it) is *outstanding* until a corrected line is
accepted: a change row of the same table and transaction that agrees with what the quarantined
line still tells of ``key``, ``op_ts``, ``op_seq`` and ``op`` (it must tell ``op_ts`` or ``op_seq``). While
one is outstanding, the transaction row of its transaction is kept out of assembly, so its
change rows wait as they wait for a transaction row that has not landed; the transactions table
shows it ``incomplete``, naming the line (``held_because``). Once the corrected line lands, the
transaction row counts again and the transaction is applied whole.

Cost: the accepted change rows of the transactions with a quarantined line are looked up in
bronze. With no quarantined line that names a transaction, the local runtime finds so in one
small job and holds nothing without planning the lookup; on Databricks the lookup has an empty
side, which adaptive execution skips without scanning bronze.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse import flow_state
from cdc_lakehouse.bronze.fields import utc_timestamp
from cdc_lakehouse.bronze.kinds import SHADOW_CHANGES
from cdc_lakehouse.silver import keys
from cdc_lakehouse.silver import quarantined_lines as ql

_PATTERNS: ql.Patterns = {
    "txn_id": ql.string_member("txn_id"), "op_ts": ql.string_member("op_ts"),
    "op_seq": ql.number_member("op_seq"), "op": ql.string_member("op"),
    "key": (r'"key"\s*:\s*(\{[^{}]*\})', "string"),  # an object; read leniently as its JSON text
}
_TOLD = ("key", "op_ts", "op_seq", "op")  # what a corrected line must agree on, where the line tells it


def outstanding(quarantined: DataFrame, changes: DataFrame, onboarded: list[str]) -> DataFrame:
    """(txn_id, held_because) of each transaction with a quarantined change line of an
    ``onboarded`` table (``schema.table``, lower case) that no accepted change row of ``changes``
    (bronze) corrects."""
    lines = located(quarantined).filter(F.lower(F.concat_ws(".", "schema", "table")).isin(onboarded or [""]))
    if flow_state.planned_per_batch() and lines.isEmpty():
        # Nothing to hold: an empty local relation, which Spark's optimizer drops from the joins
        # that use it (without_held, marked) before anything runs.
        return quarantined.sparkSession.createDataFrame([], "txn_id string, held_because string")
    candidates = changes.join(F.broadcast(lines.select("txn_id").distinct()), "txn_id", "left_semi") \
        .withColumn("key", keys.from_json_object(F.col("key")))
    corrected = F.lit(True)
    for name in _TOLD:
        corrected = corrected & (F.col(f"q.{name}").isNull() | (F.col(f"q.{name}") == F.col(f"c.{name}")))
    told = F.col("q.op_ts").isNotNull() | F.col("q.op_seq").isNotNull()
    match = (F.col("q.txn_id") == F.col("c.txn_id")) & F.col("q.schema").eqNullSafe(F.col("c.schema")) \
        & F.col("q.table").eqNullSafe(F.col("c.table")) & told & corrected
    left = lines.alias("q").join(candidates.alias("c"), match, "left_anti")
    return left.groupBy("txn_id").agg(ql.joined_notes().alias("held_because"))


def located(quarantined: DataFrame) -> DataFrame:
    """The quarantined shadow change lines that name their transaction, with what they tell."""
    read = ql.members(_PATTERNS)
    folder = {name: make() for name, make in SHADOW_CHANGES.derived.items()}  # schema, table
    return quarantined.select(
        *[column.alias(name) for name, column in folder.items()],
        read["txn_id"].alias("txn_id"), keys.from_json_object(read["key"]).alias("key"),
        utc_timestamp(read["op_ts"]).alias("op_ts"),
        read["op_seq"].alias("op_seq"), read["op"].alias("op"), ql.note().alias("note"),
    ).filter(F.col("txn_id").isNotNull())


def without_held(txns: DataFrame, held: DataFrame) -> DataFrame:
    """Transaction rows (bronze, a stream or not) of the transactions ``held`` does not hold."""
    return txns.join(F.broadcast(held.select("txn_id")), "txn_id", "left_anti")


def marked(rows: DataFrame, held: DataFrame) -> DataFrame:
    """Rows of the transactions table: an open one that ``held`` holds is ``incomplete``, and says why."""
    joined = rows.drop("held_because").join(F.broadcast(held), "txn_id", "left")
    hold = F.col("held_because").isNotNull() & (F.col("status") == "open")
    return joined.withColumn("status", F.when(hold, F.lit("incomplete")).otherwise(F.col("status"))) \
        .withColumn("held_because", F.when(hold, F.col("held_because"))).select(*rows.columns)
