"""The declared schema of every fixed-shape gold dataset: column types and comments, and the
table comment. Passed as ``schema=`` (a DDL string with COMMENTs) and ``comment=`` to the
``@dp.materialized_view`` that builds it, so both show up in Unity Catalog and Genie; tests
check that each builder returns exactly these columns and types.

Gold replicas have no entry: their columns are the source table's, known only from the data.
"""

from __future__ import annotations

from dataclasses import dataclass

SEQUENCE = "STRUCT<position: BIGINT, txn: STRING>"
IMAGE = "MAP<STRING, STRING>"


@dataclass(frozen=True)
class GoldTable:
    name: str  # without the schema
    comment: str
    columns: tuple[tuple[str, str, str], ...]  # (name, SQL type, comment)

    @property
    def ddl(self) -> str:
        return ", ".join(f"`{n}` {t} COMMENT '{_quoted(c)}'" for n, t, c in self.columns)

    @property
    def column_names(self) -> list[str]:
        return [n for n, _, _ in self.columns]

    def options(self, gold_schema: str) -> dict:
        """The ``@dp.materialized_view`` arguments that name, describe and type the dataset."""
        return dict(name=f"{gold_schema}.{self.name}", comment=self.comment, schema=self.ddl,
                    table_properties={"quality": "gold"})


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


SOURCE = ("source", "STRING", "Source system: one database server, the directory under the landing path (e.g. shop).")
SCHEMA = ("schema", "STRING", "Schema (database) of the source table.")
TABLE = ("table", "STRING", "Name of the source table.")
KEY = ("key", "STRING", "Replication key of the row: JSON object of the key columns, sorted by name, values as text.")
KEY_VALUES = ("key_values", IMAGE, "Replication key of the row as a map, e.g. key_values['order_id'] = '42'.")
GOLD_TABLE = ("gold_table", "STRING", "The gold replica of the source table (schema gold).")
TXN_ID = ("txn_id", "STRING",
          "Transaction id at the source (binlog: xid, gtid or position; shadow: the txn_id of the transaction table).")
USER = ("user", "STRING", "Database user that ran the transaction; unknown when capture could not tell.")
ROLE = ("role", "STRING", "Database role of that user for the transaction; NULL when it ran without a role, "
                               "unknown when capture could not tell.")
ENRICHED_AT = ("enriched_at", "TIMESTAMP", "When a session that landed after the transaction named its user and role "
               "(binlog sources: the row was corrected in place then); NULL when they were known from the start.")

REPLICATION_WATERMARK = GoldTable(
    "replication_watermark",
    "Per source, the commit point all gold replicas of the source reflect: every change of every "
    "transaction up to it, in every table, and none after it (CONTRACT section 6).",
    (
        SOURCE,
        ("sequence", SEQUENCE, "The commit point: sequence of the last transaction applied (commit position in the "
                               "source, then transaction id). Compare with the sequence of gold.audit_log."),
        ("commit_ts", "TIMESTAMP", "Commit time of the last transaction applied."),
        ("txn_id", "STRING", "Id of the last transaction applied."),
        ("transactions", "BIGINT", "Committed transactions with changes applied up to the commit point."),
        ("changes", "BIGINT", "Row changes applied up to the commit point (net: one per transaction and row)."),
        ("first_commit_ts", "TIMESTAMP", "Commit time of the first transaction applied."),
        ("gold_tables", "ARRAY<STRING>", "The gold replicas of the source, all at this commit point."),
    ),
)

AUDIT_LOG = GoldTable(
    "audit_log",
    "Every applied change: one row per transaction and changed row, with who (user, role), when "
    "(commit time), what (operation, changed columns, values before and after). Column filters of "
    "the onboarding (drop, mask, hash, rename) apply as in the replicas (CONTRACT section 7).",
    (
        SOURCE, SCHEMA, TABLE, GOLD_TABLE, KEY, KEY_VALUES,
        ("operation", "STRING", "Net operation of the transaction on the row: INSERT, UPDATE or DELETE."),
        ("commit_ts", "TIMESTAMP", "Commit time of the transaction (UTC)."),
        TXN_ID,
        ("sequence", SEQUENCE, "Commit order within the source: commit position, then transaction id. Orders "
                               "changes deterministically even when commit times tie."),
        USER, ROLE,
        ("changed_columns", "ARRAY<STRING>", "Columns whose value the change set (INSERT, DELETE: every column)."),
        ("before", IMAGE, "Row before the transaction, values as text; NULL for INSERT."),
        ("after", IMAGE, "Row after the transaction, values as text; NULL for DELETE."),
        ("changed_values", "MAP<STRING, STRUCT<before: STRING, after: STRING>>",
         "For each changed column, its value before and after, e.g. changed_values['status'].after."),
        ("origin", "STRING", "How the change was captured: binlog, shadow or snapshot (reconciliation)."),
        ("anomalies", "ARRAY<STRING>", "Source defects found while combining the transaction's operations on the row."),
        ("op_count", "BIGINT", "Operations on the row inside the transaction, combined into this one change."),
        ENRICHED_AT,
    ),
)

AUDIT_TRANSACTIONS = GoldTable(
    "audit_transactions",
    "Every applied transaction: who ran it (user, role, client), when it began and committed, which "
    "tables it changed and how many rows.",
    (
        SOURCE, TXN_ID,
        ("commit_ts", "TIMESTAMP", "Commit time (UTC)."),
        ("begin_ts", "TIMESTAMP", "Time the transaction began (its first event or operation), when known."),
        ("duration_s", "DOUBLE", "Seconds from begin to commit, when both are known."),
        ("sequence", SEQUENCE, "Commit order within the source; a commit point for replicas as of this transaction."),
        USER, ROLE,
        ("client", "STRING", "Client address recorded by the source (shadow capture), when known."),
        ("application", "STRING", "Application name recorded by the source (shadow capture), when known."),
        ("tables", "ARRAY<STRING>", "Replicated tables (schema.table) the transaction changed."),
        ("rows_changed", "BIGINT", "Rows changed (net: one per row, whatever the number of operations)."),
        ("inserts", "BIGINT", "Rows inserted."),
        ("updates", "BIGINT", "Rows updated."),
        ("deletes", "BIGINT", "Rows deleted."),
        ("anomalies", "ARRAY<STRING>", "Distinct source defects recorded with the transaction's changes."),
        ("ddl", "STRING", "DDL statement, for a DDL transaction (binlog)."),
        ("server_id", "BIGINT", "Source server id (binlog)."),
        ("thread_id", "BIGINT", "Source connection (thread) id (binlog)."),
        ("xid", "BIGINT", "XID of the commit (binlog, transactional engines)."),
        ("gtid", "STRING", "GTID of the transaction (binlog, when GTIDs are on)."),
        ("position", "STRUCT<file: STRING, pos: BIGINT, epoch: BIGINT>",
         "Binlog position of the commit; epoch counts the source's position restarts (docs/binlog-epochs.md)."),
        ENRICHED_AT,
    ),
)

AUDIT_CHANGES_BY_USER_DAY = GoldTable(
    "audit_changes_by_user_day",
    "Applied changes per day, source table, user and role: who changes what, how much.",
    (
        SOURCE,
        ("day", "DATE", "Commit date (UTC)."),
        USER, ROLE, SCHEMA, TABLE,
        ("changes", "BIGINT", "Row changes (INSERT + UPDATE + DELETE)."),
        ("inserts", "BIGINT", "Rows inserted."),
        ("updates", "BIGINT", "Rows updated."),
        ("deletes", "BIGINT", "Rows deleted."),
        ("transactions", "BIGINT", "Distinct transactions."),
        ("first_commit_ts", "TIMESTAMP", "First commit of the day by this user and role on this table."),
        ("last_commit_ts", "TIMESTAMP", "Last commit of the day by this user and role on this table."),
    ),
)

AUDIT_ROW_LAST_CHANGE = GoldTable(
    "audit_row_last_change",
    "Per source row (also deleted ones): who changed it last, with which role, when and what, and how "
    "often it changed.",
    (
        SOURCE, SCHEMA, TABLE, GOLD_TABLE, KEY, KEY_VALUES,
        ("operation", "STRING", "Last operation on the row: INSERT, UPDATE or DELETE."),
        ("commit_ts", "TIMESTAMP", "Commit time of the last change."),
        TXN_ID, USER, ROLE,
        ("changed_columns", "ARRAY<STRING>", "Columns the last change set."),
        ("changes", "BIGINT", "Number of changes to the row since replication began."),
        ("first_commit_ts", "TIMESTAMP", "Commit time of the first change seen for the row."),
        ("row_exists", "BOOLEAN", "Whether the row exists at the commit point (its last change is not a DELETE)."),
    ),
)

REPLICATION_HEALTH = GoldTable(
    "replication_health",
    "Per source: replication lag (measurement time vs commit time of the last transaction applied), "
    "held transactions and their age, rolled back transactions, quarantined lines and changes with "
    "anomalies (silver.<source>_anomalies).",
    (
        SOURCE,
        ("sequence", SEQUENCE, "Commit point of the gold replicas (gold.replication_watermark)."),
        ("last_commit_ts", "TIMESTAMP", "Commit time of the last transaction applied."),
        ("last_txn_id", "STRING", "Last transaction applied."),
        ("measured_at", "TIMESTAMP", "When the pipeline update measured this row."),
        ("lag_seconds", "DOUBLE", "measured_at minus last_commit_ts, in seconds (for a live value compute "
                                  "current_timestamp() minus last_commit_ts)."),
        ("latest_seen_commit_ts", "TIMESTAMP", "Latest commit time of any committed transaction landed so far."),
        ("pending_transactions", "BIGINT", "Committed transactions with changes that landed but are after the commit point."),
        ("held_transactions", "BIGINT", "Transactions held: begun but not committed yet (open, unterminated), "
                                       "or with a line in quarantine (incomplete)."),
        ("oldest_held_begin_ts", "TIMESTAMP", "Begin time of the oldest held transaction."),
        ("oldest_held_age_seconds", "DOUBLE", "measured_at minus oldest_held_begin_ts, in seconds."),
        ("released_held_transactions", "BIGINT", "Held transactions that no longer hold gold back: begun longer "
                                                 "than cdc_lakehouse.held_release_after_minutes before the newest "
                                                 "commit (0 without that setting: gold waits)."),
        ("rolled_back_transactions", "BIGINT", "Transactions ended by ROLLBACK (never applied)."),
        ("quarantined_lines", "BIGINT", "Landing lines of the source in bronze quarantine tables."),
        ("anomalous_changes", "BIGINT", "Distinct changes of the source with at least one anomaly in "
                                        "silver.<source>_anomalies (0 for a source without a change stream)."),
        ("tied_commit_transactions", "BIGINT", "Shadow sources: committed transactions whose commit time another "
                                               "one shares, ordered by txn_id among themselves (a clock of whole "
                                               "seconds: docs/capture.md). Binlog sources: 0 (the log orders them)."),
        ("changed_landing_files", "BIGINT", "Landing files that changed after bronze read them, whose changes are "
                                            "not read (gold.landing_summary notes them; docs/bronze.md)."),
        ("inferred_epochs", "BIGINT", "Binlog sources: times the positions started again (RESET MASTER, a restore) "
                                      "or another server's lines followed (a failover, a fail-back) in landing lines "
                                      "without an epoch, inferred from the landing order (anomaly epoch_inferred; "
                                      "docs/binlog-epochs.md). 0 when none."),
        ("status", "STRING", "ok; waiting: no landing file of the source yet (onboarded before its first capture); "
                             "stopped: a flow of the source failed in the latest update, or was skipped because "
                             "what it reads was left unfinished (the next update retries it)."),
        ("reason", "STRING", "Why the status is not ok: each failed table with its flow's error, as the event log "
                             "has it; or the failure upstream of the skipped ones."),
    ),
)

HELD_TRANSACTIONS = GoldTable(
    "held_transactions",
    "Transactions held back: begun (or with change rows landed) but not committed yet; applied once "
    "their commit lands, never dropped (a released one no longer holds gold back).",
    (
        SOURCE, TXN_ID,
        ("status", "STRING", "open: no commit yet; unterminated: a new transaction began on the connection first, "
                             "or its server's next boundary is of a later epoch (held_because says why); "
                             "incomplete: a line of it is in quarantine (held_because names it)."),
        ("begin_ts", "TIMESTAMP", "Time the transaction began (first event or operation)."),
        ("age_seconds", "DOUBLE", "measured_at minus begin_ts, in seconds."),
        USER, ROLE,
        ("server_id", "BIGINT", "Source server id (binlog)."),
        ("thread_id", "BIGINT", "Source connection (thread) id (binlog)."),
        ("gtid", "STRING", "GTID, when GTIDs are on (binlog)."),
        ("position", "STRUCT<file: STRING, pos: BIGINT, epoch: BIGINT>", "Binlog position, when known."),
        ("held_because", "STRING", "For an incomplete transaction: its quarantined lines (file, line, reason); "
                                   "it completes when the corrected lines land. For one whose server's next boundary "
                                   "is of a later epoch: why no order can be inferred (docs/binlog-epochs.md)."),
        ("released", "BOOLEAN", "Given up on by the release policy (cdc_lakehouse.held_release_after_minutes): "
                                "gold no longer waits for it; its changes apply if its commit still lands."),
        ("measured_at", "TIMESTAMP", "When the pipeline update measured this row."),
    ),
)

DATA_QUALITY = GoldTable(
    "data_quality",
    "Per source and table: landing lines in quarantine (with reasons) and changes with anomalies "
    "(silver.<source>_anomalies: apply policy, changes the replicas cannot apply, impossible operation "
    "pairs). Lines that name no table are under table '(none)'.",
    (
        SOURCE,
        ("table", "STRING", "schema.table the lines or changes are about, or (none)."),
        ("quarantined_lines", "BIGINT", "Landing lines rejected by bronze, in quarantine tables."),
        ("quarantine_reasons", "ARRAY<STRING>", "Distinct reasons of the quarantined lines."),
        ("quarantine_tables", "ARRAY<STRING>", "Bronze quarantine tables holding them."),
        ("last_quarantined_at", "TIMESTAMP", "Ingestion time of the latest quarantined line."),
        ("anomalous_changes", "BIGINT", "Distinct changes of the table with at least one anomaly in "
                                        "silver.<source>_anomalies (a change with two anomalies counts once; "
                                        "0 for a source without a change stream)."),
        ("anomalies", "ARRAY<STRING>", "Sorted distinct anomaly kinds of those changes (the anomaly column of "
                                       "silver.<source>_anomalies, e.g. insert_of_existing_key, unknown_op, "
                                       "insert_after_insert)."),
        ("schema_changes", "BIGINT", "Committed DDL statements naming the table other than TRUNCATE (ALTER, RENAME, "
                                     "DROP TABLE, indexes; binlog sources): the replicas do not follow them."),
        ("last_schema_change", "STRING", "The latest of those statements."),
        ("dropped_at", "TIMESTAMP", "Commit time of a DROP TABLE of the table, when it is the latest of those "
                                    "statements: the replicas keep the rows it had."),
        ("may_diverge_since", "TIMESTAMP", "Commit time of the first DML statement logged as SQL (anomaly "
                                           "statement_dml) that no later snapshot of the table covers: the "
                                           "replicas may differ from the source until the next snapshot; NULL "
                                           "when none (docs/capture.md)."),
    ),
)

ROWS_PER_LAYER = GoldTable(
    "rows_per_layer",
    "Rows per replicated table in each layer: bronze landing rows, silver change stream and replicas, "
    "gold replicas and audit log. Counts of the tables as of the pipeline update.",
    (
        SOURCE,
        ("table", "STRING", "schema.table at the source."),
        ("layer", "STRING", "bronze, silver or gold."),
        ("dataset", "STRING", "The table counted (schema.name)."),
        ("what", "STRING", "What a row of that table is."),
        ("rows", "BIGINT", "Rows of that table about the source table."),
    ),
)

# Each update's rows of gold.replication_health, kept: AUTO CDC FROM SNAPSHOT (SCD type 2) of the
# view, keyed by source; measured_at changes at every update that refreshes it, so each adds a
# version. Its columns are the view's, with __START_AT and __END_AT (the snapshot versions).
REPLICATION_HEALTH_HISTORY = "replication_health_history"
REPLICATION_HEALTH_HISTORY_COMMENT = (
    "Per source, its gold.replication_health row as each pipeline update measured it (one version per "
    "update: SCD type 2 of the view's snapshots, __START_AT and __END_AT the snapshot versions): lag "
    "over time, held transactions and quarantine as they were.")

FIXED = (
    REPLICATION_WATERMARK, AUDIT_LOG, AUDIT_TRANSACTIONS, AUDIT_CHANGES_BY_USER_DAY, AUDIT_ROW_LAST_CHANGE,
    REPLICATION_HEALTH, HELD_TRANSACTIONS, DATA_QUALITY, ROWS_PER_LAYER,
)
