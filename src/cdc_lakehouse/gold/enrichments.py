"""Who ran a binlog transaction in gold's audit, as every session landed so far says.

A change keeps the user and role its transaction had when the change stream emitted it. A
session that lands later and changes that answer corrects the transaction in
``silver.<source>_transactions`` and records the corrected row in
``silver.<source>_session_enrichments`` (silver/session_enrichment.py). Gold's audit rows take who
from the latest enrichment of their transaction, with ``ENRICHED_AT``: when the deciding session
landed. An enrichment of a transaction whose changes gold has already taken emits their audit
rows again, the same keys, whose AUTO CDC sequence ends with ``ENRICHED_AT`` so the corrected
rows win (audit.py); only those at or before the commit point, which keeps the audit coherent
with the replicas: the later ones are taken when the point passes them, enriched then.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.gold.commit_point import at_point
from cdc_lakehouse.silver.transactions_table import ENRICHED_AT

# A change's transaction: its id and commit position (an id alone may repeat across servers).
TXN = ["txn_id", "__position"]


def latest(enriched: DataFrame) -> DataFrame:
    """Per transaction (``TXN``), who its latest enrichment says: ``__user``, ``__role``, ``ENRICHED_AT``."""
    last = F.max_by(F.struct("user", "role", ENRICHED_AT), ENRICHED_AT).alias("__e")
    keyed = enriched.select("txn_id", F.col("sequence_position").alias("__position"), "user", "role", ENRICHED_AT)
    return keyed.groupBy(*TXN).agg(last).select(
        *TXN, F.col("__e.user").alias("__user"), F.col("__e.role").alias("__role"), F.col(f"__e.{ENRICHED_AT}").alias(ENRICHED_AT))


def with_enriched_at(rows: DataFrame) -> DataFrame:
    """``rows`` with ``ENRICHED_AT``, NULL where they have none: a source without sessions (shadow),
    or a table kept before enrichments."""
    return rows if ENRICHED_AT in rows.columns else rows.withColumn(ENRICHED_AT, F.lit(None).cast("timestamp"))


def with_enrichments(changes: DataFrame, enriched: DataFrame | None) -> DataFrame:
    """``changes`` with the user and role of their transaction's latest enrichment, and its
    ``ENRICHED_AT`` (NULL: not enriched, or a source without sessions: ``enriched`` None)."""
    if enriched is None:
        return with_enriched_at(changes)
    keyed = changes.withColumn("__position", F.col("sequence.position"))
    joined = keyed.join(F.broadcast(latest(enriched)), TXN, "left")
    found = F.col(ENRICHED_AT).isNotNull()
    return joined.withColumns({
        "user": F.when(found, F.col("__user")).otherwise(F.col("user")),
        "role": F.when(found, F.col("__role")).otherwise(F.col("role")),
    }).drop("__position", "__user", "__role")


def taken_changes(new_enriched: DataFrame, changes: DataFrame, points: DataFrame, source: str) -> DataFrame:
    """The changes of the transactions ``new_enriched`` corrects that gold has taken: at or
    before the source's commit point. Only the change stream's stretch between their commit
    positions is read (its files are in commit order: statistics skip the others). The streaming
    form (Databricks) has no commit point, gold takes every change at once: all of them."""
    txns = new_enriched.select("txn_id", F.col("sequence_position").alias("__position"))
    keyed = changes.withColumn("__position", F.col("sequence.position"))
    if new_enriched.isStreaming:
        return txns.join(keyed, TXN).drop("__position")
    span = txns.agg(F.min("__position"), F.max("__position")).first()
    if span is None or span[0] is None:
        return changes.limit(0)
    near = keyed.filter(F.col("__position").between(span[0], span[1]))
    return at_point(near.join(F.broadcast(txns.dropDuplicates()), TXN, "left_semi").drop("__position"), points, source)
