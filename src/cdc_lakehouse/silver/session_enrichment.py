"""Sessions that land after their transactions (CONTRACT §2.2 with §2 and §4).

A binlog transaction's user and role are those of the latest session of its thread that
connected before it began, whichever landed first. A transaction is assembled with the sessions
that landed by then (binlog_transactions.with_session_user); a session landing later that
changes the answer (it names a user where there was none, or connected more recently before the
begin than the one used) *enriches* the transactions of its thread: their rows of
``silver.<source>_transactions`` are upserted again, the same keys, with the user and role of
all the sessions landed so far and ``ENRICHED_AT``, when the deciding session landed. Their
``PROGRESS`` carries that time last, so the corrected row wins over the row it corrects, and a
later enrichment over an earlier one (transactions_table.py).

Cost follows what landed: an update reads the transactions of the (server, thread) pairs its new
sessions name, from ``silver.<source>_transaction_versions`` (every row the transaction flow
emitted: the transactions table itself cannot be read by a flow that writes it), and the
sessions of those pairs; no other transaction is looked at.

A transaction first assembled in this very update already knows every session landed (the
transaction flow runs with them), so it is no enrichment: whether its session landed in the
same update or before, nothing says "enriched". A re-delivered session line is the session that
landed first (``landed_at``), so it enriches nothing again.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.silver import binlog_transactions as bt
from cdc_lakehouse.silver.transactions_table import ENRICHED_AT, PROGRESS, TXN_KEYS

THREAD = ["server_id", "thread_id"]
# What a new session line says, and when it landed: which session decided, as first landed.
LINE = [*THREAD, "connected_at", "user", "role", "_ingested_at"]


def enrichments(new_sessions: DataFrame, all_sessions: DataFrame, versions: DataFrame,
                new_versions: DataFrame | None = None) -> DataFrame:
    """The corrected rows (with ``ENRICHED_AT`` and ``PROGRESS``) of the transactions whose user
    and role a session in ``new_sessions`` changes. ``versions``: the transaction flow's rows,
    this update's (``new_versions``) included. The streaming form (Databricks) cannot tell this
    update's rows: it joins the new sessions to the decisions over every transaction, and a
    transaction assembled in the same micro-batch as its session may be enriched too (with the
    same user and role)."""
    if new_sessions.isStreaming:
        decided = decisions(latest_versions(versions), bt.distinct_sessions(all_sessions))
        rows = _lines(new_sessions).join(decided, _deciding()).select(*decided.columns)
        return _corrected(rows, versions.columns)
    threads = F.broadcast(new_sessions.select(*THREAD).dropDuplicates())
    txns = latest_versions(versions.join(threads, THREAD, "left_semi"))
    if new_versions is not None:  # assembled now, with every session landed: no enrichment
        txns = txns.join(_only_new(versions.join(threads, THREAD, "left_semi"), new_versions), TXN_KEYS, "left_anti")
    decided = decisions(txns, bt.distinct_sessions(all_sessions.join(threads, THREAD, "left_semi")))
    return _corrected(decided.join(_lines(new_sessions), _deciding(), "left_semi"), versions.columns)


def decisions(txns: DataFrame, sessions: DataFrame) -> DataFrame:
    """``txns`` (latest versions) whose answer (user, role) came with the landing of the latest
    session of their thread before their begin, with that session's columns (``s_``): the
    sessions that landed before it give another answer. ``sessions``: ``distinct_sessions``."""
    begins = txns.select(*TXN_KEYS, "thread_id", F.col("begin_position").alias("begin_lsn"),
                         F.unix_timestamp("begin_ts").alias("begin_ts"))
    candidates = bt.session_candidates(begins, sessions).withColumn(
        "__deciding_landed_at", F.first("s_landed_at").over(bt.latest_first()))
    now = bt.first_sessions(candidates).filter(F.col("s_landed_at").isNotNull())
    # The answer before the deciding session landed: the first of those landed before it
    # (none: unknown). Re-deliveries are one session, landed when it first did.
    earlier = candidates.filter(F.col("s_landed_at") < F.col("__deciding_landed_at"))
    before = bt.first_sessions(earlier).select(*TXN_KEYS, *[F.col(f"s_{c}").alias(f"b_{c}") for c in ("user", "role")])
    decided = now.select(*TXN_KEYS, *[f"s_{c}" for c in bt.SESSION_COLUMNS]).join(before, TXN_KEYS, "left")
    return txns.join(decided.filter(~_same_answer()), TXN_KEYS)


def latest_versions(versions: DataFrame) -> DataFrame:
    """Each transaction's latest row: the one with the greatest ``PROGRESS``."""
    latest = F.max_by(F.struct(*versions.columns), PROGRESS).alias("__latest")
    return versions.groupBy(*TXN_KEYS).agg(latest).select("__latest.*")


def _only_new(versions: DataFrame, new_versions: DataFrame) -> DataFrame:
    """Keys of the transactions all of whose rows are this update's (as many rows as it emitted)."""
    count = lambda df: df.groupBy(*TXN_KEYS).agg(F.count(F.lit(1)).alias("__n"))  # noqa: E731
    return count(versions).join(count(new_versions), [*TXN_KEYS, "__n"], "left_semi").select(*TXN_KEYS)


def _lines(new_sessions: DataFrame) -> DataFrame:
    return new_sessions.select(*[F.col(c).alias(f"n_{c}") for c in LINE])


def _deciding() -> Column:
    """A new session line (``_lines``) is the deciding session, as first landed (not a re-delivery)."""
    same = [F.col(f"n_{c}").eqNullSafe(F.col(f"s_{c}")) for c in ("connected_at", "user", "role")]
    return reduce(Column.__and__, [*(F.col(f"n_{c}") == F.col(c) for c in THREAD), *same,
                                   F.col("n__ingested_at") == F.col("s_landed_at")])


def _corrected(decided: DataFrame, columns: list[str]) -> DataFrame:
    """The decided transactions' rows with the deciding session's user and role."""
    return bt.who(decided.withColumn(ENRICHED_AT, F.col("s_landed_at"))).select(*columns).withColumn(
        PROGRESS, F.struct(F.col(f"{PROGRESS}.ended"), F.col(f"{PROGRESS}.at"), F.col(ENRICHED_AT)))


def _answer(user: str, role: str) -> tuple[Column, Column]:
    """The user and role a session gives (binlog_transactions.who): unknown without a user."""
    return F.coalesce(F.col(user), F.lit("unknown")), F.when(F.col(user).isNull(), F.lit("unknown")).otherwise(F.col(role))


def _same_answer() -> Column:
    """The sessions landed before the deciding one give the same user and role (a more recent
    session of the same user and role changes nothing)."""
    (user, role), (b_user, b_role) = _answer("s_user", "s_role"), _answer("b_user", "b_role")
    return user.eqNullSafe(b_user) & role.eqNullSafe(b_role)
