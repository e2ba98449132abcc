"""Reading committed shadow rows out of PostgreSQL and MariaDB, and purging exported ones.

Each read runs in one REPEATABLE READ snapshot, so it sees exactly the transactions committed
before it started: rows of a transaction still in flight are invisible (whatever their ids),
and a transaction's row and its change rows are seen together. A read skips exactly the rows
the exporter names (exported, not purged yet: id ranges and transaction ids); everything else
left is new, so a transaction that commits late is simply found by a later read — no id
high-water mark that it could fall behind (ids are taken at INSERT, not at COMMIT).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal

from cdc_lakehouse.contract.landing import iso_utc
from cdc_lakehouse.contract.lines import change_row, transaction_row
from .introspect import check_captured_tables
from .sqlquote import CAPTURE_SCHEMA, TableName, my_ident, pg_ident

Ranges = dict[str, list[list[int]]]  # shadow table -> sorted, disjoint [first id, last id]


@dataclass
class Batch:
    txns: list[dict] = field(default_factory=list)  # CONTRACT §2.3 rows
    changes: dict[TableName, list[dict]] = field(default_factory=dict)  # §2.4 rows per table
    txn_ids: list[str] = field(default_factory=list)  # to purge from the transaction table
    change_ids: dict[str, list[int]] = field(default_factory=dict)  # shadow table -> row ids
    change_txns: dict[str, list[str]] = field(default_factory=dict)  # shadow table -> txn per id
    full: bool = False  # some table had more rows than the read limit
    dropped: list[TableName] = field(default_factory=list)  # gone tables whose drop this batch lands

    @property
    def empty(self) -> bool:
        return not self.txns and not any(self.changes.values())

    def defer(self, unfinished: set[str]) -> None:
        """Leave out the rows of transactions with change rows beyond this batch. Each is written
        with its last part, so the lakehouse holds the earlier parts (CONTRACT §2.4) rather than
        apply a transaction before all of it has landed."""
        self.txns = [r for r in self.txns if r["txn_id"] not in unfinished]
        self.txn_ids = [t for t in self.txn_ids if t not in unfinished]

    def add_drop(self, table: TableName, statement: str, txn_id: str, at: datetime) -> None:
        """``table``'s DROP TABLE ``statement``, seen ``at``, as a transaction of its own (no user known)."""
        self.changes.setdefault(table, []).append(
            change_row(txn_id, iso_utc(at), 1, "A", {}, None, {"statement": statement}))
        self.txns.append(transaction_row(txn_id, iso_utc(at), None, None, None, None))
        self.dropped.append(table)


def _json(text: str | None):
    return None if text is None else json.loads(text, parse_float=Decimal)


def _txn_row(txn_id, end_ts, db_user, db_role, client, application) -> dict:
    return transaction_row(str(txn_id), iso_utc(end_ts), db_user, db_role, client, application)


def _change_row(txn_id, op_ts, op_seq, op, key, old_key, values) -> dict:
    return change_row(str(txn_id), iso_utc(op_ts), int(op_seq), op, _json(key), _json(old_key),
                      _json(values))


def _pg_multirange(ranges: list[list[int]]) -> str:
    return "{" + ",".join(f"[{lo},{hi}]" for lo, hi in ranges) + "}"


def _my_skip(ranges: list[list[int]]) -> tuple[str, list[int]]:
    """A WHERE clause leaving out the id ranges (ranges, not an id list: exported ids are
    mostly consecutive, so the statement stays short)."""
    if not ranges:
        return "", []
    return ("WHERE NOT (" + " OR ".join(["id BETWEEN %s AND %s"] * len(ranges)) + ") ",
            [i for r in ranges for i in r])


def _collect(batch: Batch, table: TableName, shadow: str, rows, limit: int) -> None:
    batch.changes[table] = [_change_row(*r[1:]) for r in rows]
    batch.change_ids[shadow] = [int(r[0]) for r in rows]
    batch.change_txns[shadow] = [str(r[1]) for r in rows]
    batch.full |= len(rows) >= limit


class PostgresShadowReader:
    """A dropped table's DROP TABLE is a change row its event trigger wrote (ddl_postgres)."""

    def __init__(self, conn):
        self.conn = conn
        conn.autocommit = True

    def forget_tables(self, tables: list[TableName]) -> None:
        """Nothing to forget: this reader lands no drops of its own."""

    def read(self, limit: int, skip_txns: list[str] = (), skip_ids: Ranges | None = None) -> Batch:
        """Committed rows, except transaction rows ``skip_txns`` and change rows in ``skip_ids``."""
        from psycopg import sql

        batch = Batch()
        skip_ids = skip_ids or {}
        with self.conn.cursor() as cur:
            cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            try:
                cur.execute(f"SELECT txn_id::text, end_ts, db_user, db_role, client, application "
                            f"FROM {pg_ident(CAPTURE_SCHEMA)}._transactions "
                            f"WHERE txn_id <> ALL(%s::text[]::xid8[]) "
                            f"ORDER BY end_ts, txn_id LIMIT %s", (list(skip_txns), limit))
                txns = cur.fetchall()
                batch.txns = [_txn_row(*r) for r in txns]
                batch.txn_ids = [r[0] for r in txns]
                batch.full = len(txns) >= limit
                cur.execute(f"SELECT source_schema, source_table, shadow_table "
                            f"FROM {pg_ident(CAPTURE_SCHEMA)}._tables ORDER BY 1, 2")
                unfinished = set()
                for schema, name, shadow in cur.fetchall():
                    table = sql.SQL("{}.{}").format(sql.Identifier(CAPTURE_SCHEMA), sql.Identifier(shadow))
                    skip = _pg_multirange(skip_ids.get(shadow, []))
                    cur.execute(sql.SQL(
                        'SELECT id, txn_id::text, op_ts, op_seq, op, key::text, old_key::text, '
                        '"values"::text FROM {} WHERE NOT (id <@ %s::int8multirange) '
                        'ORDER BY id LIMIT %s').format(table), (skip, limit))
                    rows = cur.fetchall()
                    _collect(batch, TableName(schema, name), shadow, rows, limit)
                    if len(rows) >= limit:  # only the batch's own transactions can be deferred
                        cur.execute(sql.SQL(
                            "SELECT DISTINCT txn_id::text FROM {} WHERE id > %s AND NOT (id <@ %s::int8multirange) "
                            "AND txn_id = ANY(%s::text[]::xid8[])"
                        ).format(table), (rows[-1][0], skip, batch.txn_ids))
                        unfinished.update(r[0] for r in cur.fetchall())
            finally:
                cur.execute("COMMIT")
        batch.defer(unfinished)
        return batch

    def purge(self, txn_ids: list[str], change_ids: dict[str, list[int]]) -> None:
        from psycopg import sql

        with self.conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(f"DELETE FROM {pg_ident(CAPTURE_SCHEMA)}._transactions "
                        f"WHERE txn_id = ANY(%s::text[]::xid8[])", (txn_ids,))
            for shadow, ids in change_ids.items():
                cur.execute(sql.SQL("DELETE FROM {}.{} WHERE id = ANY(%s)").format(
                    sql.Identifier(CAPTURE_SCHEMA), sql.Identifier(shadow)), (ids,))
            cur.execute("COMMIT")


_ROW_END_MAX = 2**64 - 1  # ROW END of current rows in a transaction-precise versioned table


class MariaDBShadowReader:
    """Transaction rows are assembled: commit time from ``mysql.transaction_registry``, user
    and role from the transaction's first change row (see ddl_mariadb).

    MariaDB fires no trigger on DROP TABLE: a captured table found gone gets, once its shadow
    rows are all read, a DROP TABLE row in a transaction of its own at the time it was found
    (``Batch.add_drop``); once that batch is published the exporter has its registry entry
    forgotten (``forget_tables``), so the drop lands once.
    """

    def __init__(self, conn):
        from .introspect import DefaultRoles

        self.conn = conn
        self.role_of = DefaultRoles(conn)
        with conn.cursor() as cur:
            cur.execute("SET SESSION time_zone = '+00:00'")  # registry times come out in UTC
            # Once per export, before its first read (a reader serves one export's batches).
            self.gone = check_captured_tables(cur, CAPTURE_SCHEMA)

    def read(self, limit: int, skip_txns: list[str] = (), skip_ids: Ranges | None = None) -> Batch:
        """Committed rows, except change rows in ``skip_ids`` (``skip_txns`` is for PostgreSQL:
        transaction rows here are assembled from the change rows read)."""
        s = my_ident(CAPTURE_SCHEMA)
        skip_ids = skip_ids or {}
        batch = Batch()
        firsts: dict[int, tuple] = {}  # txn -> (op_seq, user, client, last op time)
        with self.conn.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            try:
                cur.execute(f"SELECT source_schema, source_table, shadow_table FROM {s}.`_tables` "
                            f"ORDER BY 1, 2")
                cut = []  # (shadow table, skip clause, its parameters, last id read)
                for schema, name, shadow in cur.fetchall():
                    where, params = _my_skip(skip_ids.get(shadow, []))
                    cur.execute(f"SELECT id, txn_id, op_ts, op_seq, op, `key`, old_key, `values`, "
                                f"db_user, client FROM {s}.{my_ident(shadow)} {where}"
                                f"ORDER BY id LIMIT %s", (*params, limit))
                    rows = cur.fetchall()
                    _collect(batch, TableName(schema, name), shadow, [r[:8] for r in rows], limit)
                    for r in rows:
                        _note_first(firsts, r)
                    if len(rows) >= limit:
                        cut.append((shadow, where, params, rows[-1][0]))
                    elif (table := TableName(schema, name)) in self.gone:
                        batch.add_drop(table, f"DROP TABLE {my_ident(schema)}.{my_ident(name)}", self.gone[table],
                                       datetime.now(timezone.utc))
                # Once every table is read: only the batch's own transactions can be deferred.
                unfinished = set()
                for shadow, where, params, last in cut:
                    cur.execute(f"SELECT DISTINCT txn_id FROM {s}.{my_ident(shadow)} "
                                f"{where or 'WHERE TRUE '}AND id > %s AND txn_id IN %s",
                                (*params, last, list(firsts)))
                    unfinished.update(str(r[0]) for r in cur.fetchall())
                commits = self._commit_times(cur, list(firsts))
            finally:
                cur.execute("COMMIT")
        for txn, (_, user, client, last_op) in sorted(firsts.items()):
            batch.txns.append(_txn_row(txn, commits.get(txn, last_op), user,
                                       self.role_of(user, client), client, None))
        batch.defer(unfinished)
        return batch

    def forget_tables(self, tables: list[TableName]) -> None:
        """Unregister dropped tables whose drop has landed (their shadow tables stay until purged)."""
        with self.conn.cursor() as cur:
            cur.executemany(f"DELETE FROM {my_ident(CAPTURE_SCHEMA)}.`_tables` "
                            f"WHERE source_schema = %s AND source_table = %s",
                            [(t.schema, t.table) for t in tables])

    @staticmethod
    def _commit_times(cur, txn_ids: list[int]) -> dict:
        if not txn_ids:
            return {}
        cur.execute("SELECT transaction_id, commit_timestamp FROM mysql.transaction_registry "
                    "WHERE transaction_id IN %s", (txn_ids,))
        return dict(cur.fetchall())

    def purge(self, txn_ids: list[str], change_ids: dict[str, list[int]]) -> None:
        s = my_ident(CAPTURE_SCHEMA)
        with self.conn.cursor() as cur:
            cur.execute("START TRANSACTION")
            for shadow, ids in change_ids.items():
                # the whole key (id, ROW END): an IN list or a prefix would lock the next row,
                # which may belong to a writer still in flight, and wait for it
                cur.executemany(f"DELETE FROM {s}.{my_ident(shadow)} "
                                f"WHERE id = %s AND txn_end = {_ROW_END_MAX}", [(i,) for i in ids])
            cur.execute("COMMIT")
            self._vacuum(cur, [shadow for shadow, ids in change_ids.items() if ids])

    @staticmethod
    def _vacuum(cur, shadows: list[str]) -> None:
        """Drop the history rows purging leaves in versioned tables, when it cannot stall anyone.

        DELETE HISTORY scans the table and would wait for rows of open writers: it runs only
        when no other transaction has written anything, with a short lock timeout anyway.
        """
        cur.execute("SELECT COUNT(*) FROM information_schema.INNODB_TRX "
                    "WHERE trx_rows_modified > 0 AND trx_mysql_thread_id <> CONNECTION_ID()")
        if cur.fetchone()[0]:
            return
        for shadow in shadows:
            try:
                cur.execute(f"SET STATEMENT innodb_lock_wait_timeout = 1 FOR "
                            f"DELETE HISTORY FROM {my_ident(CAPTURE_SCHEMA)}.{my_ident(shadow)}")
            except Exception as exc:  # a lock wait: the history goes on the next run
                if getattr(exc, "args", [None])[0] != 1205:
                    raise


def _note_first(firsts: dict, row) -> None:
    txn, op_ts, op_seq = int(row[1]), row[2], int(row[3])
    seen = firsts.get(txn)
    last = max(op_ts, seen[3]) if seen else op_ts
    if seen is None or op_seq < seen[0]:
        firsts[txn] = (op_seq, row[8], row[9], last)
    else:
        firsts[txn] = (*seen[:3], last)
